// The handoff of a sandbox created for this host (lifecycle.ts): on a store several hosts
// share, a gateway launches what another gateway created for its host when the row's
// event reaches it; its own creates it launches at once, and the event of its own create
// must not launch them a second time. Real parts: a SQLite store (its events reach the
// listener within the create, the closest the two paths can come), the in-memory driver.

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { oneHost } from "../../../src/gateway/sandboxes/host-scope.js";
import { createLifecycle, type Lifecycle } from "../../../src/gateway/sandboxes/lifecycle.js";
import { defaultPolicy } from "../../../src/policy/index.js";
import type { NewSandbox, Store } from "../../../src/store/contract.js";
import { SqliteStore } from "../../../src/store/store.js";
import { eventually } from "../../support/gateway-fixture.js";
import { MemoryDriver } from "../../support/memory-driver.js";

let cleanup: (() => Promise<void>) | undefined;
afterEach(async () => {
  await cleanup?.();
  cleanup = undefined;
});

/**
 * `lateCreate`: the create's answer reaches the caller only once the handoff of its event
 * has launched it, as on PostgreSQL when the NOTIFY and the reads it starts beat the
 * COMMIT's answer. The create's own launch must then do nothing (tasks.ts).
 */
async function start(host: string, lateCreate = false): Promise<{ lc: Lifecycle; store: SqliteStore; driver: MemoryDriver }> {
  const dir = mkdtempSync(join(tmpdir(), "sg-handoff-"));
  const store = SqliteStore.open(join(dir, "state.db"));
  const driver = new MemoryDriver();
  const seen = new Set<string>();
  store.onEvent((e) => seen.add(e.sandboxId));
  const slow: Store = lateCreate
    ? new Proxy(store, {
        get(target, prop) {
          // The store's own methods on the store itself (its private fields are not the proxy's).
          const own = Reflect.get(target, prop, target) as unknown;
          if (prop !== "createSandbox") return typeof own === "function" ? (own as (...a: unknown[]) => unknown).bind(target) : own;
          return async (input: NewSandbox) => {
            const s = await target.createSandbox(input);
            // Until the handoff's launch of the row is provisioning it.
            await eventually(() => (driver.calls.includes(`provision ${input.name} g1`) ? true : undefined), 10_000, "the handoff's launch");
            expect(seen.has(s.id)).toBe(true);
            return s;
          };
        },
      })
    : store;
  const lc = createLifecycle({ store: slow, driver, control: null, log: pino({ level: "silent" }), scope: oneHost(host) });
  await lc.runtime.prepare();
  await lc.resume();
  cleanup = async () => {
    await lc.close();
    store.close();
    rmSync(dir, { recursive: true, force: true });
  };
  return { lc, store, driver };
}

describe("handoff", () => {
  it.each([false, true])("a create of this gateway's own is launched once, though its own event also reaches the handoff (the create's answer after the event: %s)", async (late) => {
    const { lc, driver } = await start("h1", late);
    for (const name of ["a", "b", "c"]) await lc.service.create({ name });
    await eventually(async () => ((await lc.read.list()).every((s) => s.phase === "Ready") ? true : undefined), 10_000, "all Ready");
    await lc.idle();
    expect(driver.calls.filter((c) => c.startsWith("provision")).sort()).toEqual(["provision a g1", "provision b g1", "provision c g1"]);
    // The launch that ran is the one the gateway holds: a supervisor proving the recorded launch is let in.
    for (const s of await lc.read.list()) expect(await lc.expectedLaunch(s.id)).toEqual({ generation: 1, nonce: s.runtime!.nonce });
  });

  it("a row another gateway wrote for this host is launched here; one for another host is not", async () => {
    const { lc, store, driver } = await start("h1");
    const spec = { env: {}, resources: { memoryMb: 64, cpus: 1, pids: 64 } };
    await store.createSandbox({ id: "sbx_00000000000000a1", name: "for-h1", spec, policy: defaultPolicy(), host: "h1" });
    await store.createSandbox({ id: "sbx_00000000000000a2", name: "for-h2", spec, policy: defaultPolicy(), host: "h2" });
    await eventually(async () => ((await store.get("for-h1"))?.phase === "Ready" ? true : undefined), 10_000, "for-h1 Ready");
    await lc.idle();
    expect(driver.calls.filter((c) => c.startsWith("provision"))).toEqual(["provision for-h1 g1"]);
    expect((await store.get("for-h2"))?.phase).toBe("Provisioning");
  });
});
