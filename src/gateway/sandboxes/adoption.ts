// The adoption of sandboxes at gateway start: each sandbox a previous gateway left gets the
// action its phase calls for (src/lifecycle/adoption.ts: the table), carried out here with
// the same parts a running gateway uses: generation handles, the controller's
// compare-and-set, supervision for running generations, the lifecycle tasks for
// unfinished stops, deletes and owed teardowns. Then supervision starts watching.

import type { Logger } from "pino";
import { adoptionOf, type Adoption } from "../../lifecycle/adoption.js";
import type { SandboxRecord, Store } from "../../store/contract.js";
import type { LifecycleController } from "./controller.js";
import type { Generations } from "./generations.js";
import type { HostScope } from "./host-scope.js";
import type { Supervision } from "./supervision.js";
import { activePolicy, type LifecycleTasks } from "./tasks.js";

export interface AdoptionDeps {
  store: Store;
  /** Only this gateway's host's sandboxes are adopted (another host's gateway adopts its own). */
  scope: HostScope;
  controller: LifecycleController;
  generations: Generations;
  supervision: Supervision;
  tasks: LifecycleTasks;
  log: Logger;
}

/** Adopt every sandbox of this host, then start supervision. Returns how many took each action (for the log and tests). */
export async function adoptAll(d: AdoptionDeps): Promise<Partial<Record<Adoption, number>>> {
  const counts: Partial<Record<Adoption, number>> = {};
  let otherHosts = 0;
  for (const s of await d.store.list()) {
    if (!d.scope.drives(s)) {
      otherHosts++;
      continue;
    }
    const action = adoptionOf({ phase: s.phase, runtime: s.runtime !== null, teardownOwed: s.teardownOwed !== null }, d.supervision.active);
    await adopt(d, s, action);
    counts[action] = (counts[action] ?? 0) + 1;
  }
  d.supervision.start();
  d.log.info({ adopted: counts, otherHosts, host: d.scope.name }, "sandboxes adopted");
  return counts;
}

async function adopt(d: AdoptionDeps, s: SandboxRecord, action: Adoption): Promise<void> {
  const { store, controller, generations, supervision, tasks } = d;
  switch (action) {
    case "reverify":
    case "watch":
    case "hold": {
      const handle = generations.open(s, s.runtime!.nonce, s.runtime);
      // The desired policy lives in the store: supervisors that reconnect get it pushed again.
      const p = await activePolicy(store, s.id);
      handle.desire(p.policy, p.revision);
      if (action === "hold") return;
      if (action === "reverify") await controller.observe(s.id, s.generation, { type: "contactLost", cause: "gateway restarted: re-verifying" }, "gateway restarted: re-verifying before trusting");
      await supervision.watch(handle);
      return;
    }
    case "teardown":
      // A previous gateway owed this teardown; it is ours now.
      generations.open(s, s.runtime?.nonce ?? "", s.runtime).end(s.phase === "Error" ? "sandbox_failed" : "sandbox_completed");
      tasks.teardown(s.id, s.generation);
      return;
    case "stop":
      tasks.stop(s);
      return;
    case "delete":
      tasks.delete(s);
      return;
    case "fail": {
      const detail = "the gateway restarted during provisioning";
      generations.open(s, "", s.runtime);
      await controller.observe(s.id, s.generation, { type: "provisionFailed", detail }, detail);
      return;
    }
    case "nothing":
      return;
  }
}
