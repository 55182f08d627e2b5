// The runtime work behind lifecycle intents: launch a generation, stop it, delete
// the sandbox, and pick up what a previous gateway left. Each runs in the
// sandbox's serial queue; each result is applied only if the sandbox is still at
// the generation and phase the work was started for.

import { randomBytes } from "node:crypto";
import type { Logger } from "pino";
import type { ComputeDriver, LaunchRequest, ReadinessReport, RuntimeRecord } from "../../driver/contract.js";
import type { Policy } from "../../policy/index.js";
import type { SandboxRecord, Store } from "../../store/contract.js";
import type { KeyedSerial } from "../../util/keyed-serial.js";
import { Limiter } from "../../util/limiter.js";
import { DEFAULT_LAUNCH_CONCURRENCY } from "./launch-limits.js";
import type { ControlPlane } from "../control/control-plane.js";
import type { LifecycleController } from "./controller.js";
import type { GenerationHandle, Generations } from "./generations.js";
import { sessionCheck } from "./boundary-evidence.js";
import type { Supervision } from "./supervision.js";
import { errorMessage } from "../../util/error-message.js";

export interface TaskDeps {
  store: Store;
  controller: LifecycleController;
  driver: ComputeDriver;
  control: ControlPlane | null;
  generations: Generations;
  /** Watches Ready generations through runtime outages. */
  supervision: Supervision;
  serial: KeyedSerial;
  log: Logger;
  /** How long readiness evidence may take to appear after the containers start. */
  readyTimeoutMs: number;
  /** Launches (provision, start, readiness) at once; more wait their turn in order (default DEFAULT_LAUNCH_CONCURRENCY). */
  launchConcurrency?: number;
}

const newNonce = (): string => randomBytes(12).toString("hex");

/** The policy revision a sandbox enforces: the highest one recorded. */
export async function activePolicy(store: Store, sandboxId: string): Promise<{ revision: number; policy: Policy }> {
  const p = await store.policy(sandboxId);
  if (!p) throw new Error(`sandbox ${sandboxId} has no policy revision`);
  return { revision: p.revision, policy: p.policy };
}

export class LifecycleTasks {
  #closed = false;
  readonly #sleeps = new Set<() => void>();
  readonly #launches: Limiter;

  constructor(private readonly d: TaskDeps) {
    this.#launches = new Limiter(d.launchConcurrency ?? DEFAULT_LAUNCH_CONCURRENCY);
  }

  /** Launches running and waiting for their turn. */
  get launches(): { active: number; waiting: number; max: number } {
    return this.#launches.load;
  }

  /** Launch the sandbox's current generation (it is Provisioning). */
  launch(s: SandboxRecord): void {
    // Once per generation: a create and the handoff of its own event (lifecycle.ts) may both ask.
    if (this.d.generations.get(s.id, s.generation) !== undefined) return;
    const handle = this.d.generations.open(s, newNonce());
    // Queued now, in the caller's turn, so that it runs before a stop or delete asked after it.
    void this.d.serial.run(
      s.id,
      async () => {
        const req: LaunchRequest = { sandboxId: s.id, name: s.name, generation: s.generation, nonce: handle.nonce, spec: s.spec, policy: await activePolicy(this.d.store, s.id) };
        await this.#queued(s, req, handle);
      },
      (err) => this.d.log.error({ err, sandboxId: s.id, generation: s.generation }, "launch task failed"),
    );
  }

  /**
   * A launch waits its turn (the sandbox stays Provisioning and says so); a stop or delete
   * meanwhile ends the generation's handle, and the launch leaves the line without running.
   */
  async #queued(s: SandboxRecord, req: LaunchRequest, handle: GenerationHandle): Promise<void> {
    const { active, waiting, max } = this.#launches.load;
    if (active >= max) await this.d.controller.note(s, req.generation, `waiting to launch: ${waiting} ahead, ${max} at once (gateway start --launch-concurrency)`);
    await this.#launches.runUnlessAborted(handle.over, () => this.#launch(s, req, handle));
  }

  async #launch(s: SandboxRecord, req: LaunchRequest, handle: GenerationHandle): Promise<void> {
    const { sandboxId: id, generation } = req;
    const { controller, driver, control } = this.d;
    if (!await controller.isCurrent(id, generation, "Provisioning")) return;
    // The driver reports progress without waiting; a note that cannot be written is only logged.
    const progress = (msg: string): void => {
      controller.note(s, generation, msg).catch((err: unknown) => this.d.log.warn({ sandboxId: id, err: errorMessage(err) }, "a progress note was not written"));
    };
    try {
      // A new generation never shares containers with an older one.
      if (generation > 1) {
        await driver.stop(id, generation - 1);
        await controller.settleTeardown(id, generation - 1);
      }
      if (control) {
        req.control = await control.launchControl(req);
        req.network = control.launchNetwork();
        handle.desire(req.policy.policy, req.policy.revision);
      }
      await driver.provision(req, progress);
      if (!await controller.isCurrent(id, generation, "Provisioning")) return;
      const record = await driver.start(req, progress);
      // Persist the identities before trusting them: recovery re-verifies against these.
      if (!await controller.recordRuntime(id, { phase: "Provisioning", generation }, record)) return;
      handle.recorded(record);
      await controller.note(s, generation, "verifying readiness");
      const report = await this.#waitReady(req, record, handle);
      if (report.exited) {
        await this.#exitedEarly(id, generation, report.exited);
        return;
      }
      if (!report.ready) {
        const failed = report.checks.filter((c) => !c.ok).map((c) => `${c.name}: ${c.detail ?? "failed"}`);
        throw new Error(`not ready after ${this.d.readyTimeoutMs} ms (${failed.join("; ")})`);
      }
      if (await controller.observe(id, generation, { type: "ready" }, "readiness verified")) {
        this.d.log.info({ sandboxId: id, generation, record }, "sandbox ready");
        await this.d.supervision.watch(handle);
      }
    } catch (err) {
      const detail = errorMessage(err);
      // Error owes the teardown of whatever this launch made (retried until done);
      // an aborted launch is cleaned up by the stop or delete that aborted it.
      const failed = await controller.observe(id, generation, { type: "provisionFailed", detail }, detail);
      this.d.log.warn({ sandboxId: id, generation, err: detail }, failed ? "provisioning failed" : "provisioning aborted");
    }
  }

  /** The workload ran to its end before it was ever ready: Completed (exit 0) or Error(WorkloadExited), as soon as seen. */
  async #exitedEarly(id: string, generation: number, exited: { exitCode: number; output: string[] }): Promise<void> {
    const tail = exited.output.length > 0 ? `; last output: ${exited.output.join(" | ")}` : "; no output";
    // The failure's message is its reason's detail, not a second wording of it (events show both).
    const detail = `exited during start-up${tail}`;
    const done =
      exited.exitCode === 0
        ? await this.d.controller.observe(id, generation, { type: "completed" }, `workload exited 0 during start-up${tail}`)
        : await this.d.controller.observe(id, generation, { type: "failed", reason: { code: "WorkloadExited", exitCode: exited.exitCode, detail } }, detail);
    this.d.log.info({ sandboxId: id, generation, exitCode: exited.exitCode, applied: done !== null }, "workload exited during start-up");
  }

  /** Readiness evidence from the runtime, plus the boundary's own proof when supervisors report in. */
  async #evidence(req: LaunchRequest, record: RuntimeRecord): Promise<ReadinessReport> {
    const report = await this.d.driver.verify(req, record);
    if (!this.d.control) return report;
    const session = sessionCheck(this.d.control, req.sandboxId, req.generation);
    return { ...report, ready: report.ready && session.ok, checks: [...report.checks, session] };
  }

  async #waitReady(req: LaunchRequest, record: RuntimeRecord, handle: GenerationHandle): Promise<ReadinessReport> {
    const deadline = Date.now() + this.d.readyTimeoutMs;
    for (let delay = 50; ; delay = Math.min(delay * 2, 500)) {
      const report = await this.#evidence(req, record);
      if (report.ready || report.exited || Date.now() + delay > deadline || !await this.d.controller.isCurrent(req.sandboxId, req.generation, "Provisioning")) return report;
      if (!(await handle.sleep(delay))) return report;
    }
  }

  /** Carry out a persisted stop (the sandbox is Stopping). */
  stop(s: SandboxRecord): void {
    const { id, generation } = s;
    const { controller, driver } = this.d;
    void this.d.serial.run(
      id,
      async () => {
        if (!await controller.isCurrent(id, generation, "Stopping")) return;
        await this.#untilDone(s, "stop", () => driver.stop(id, generation), () => controller.isCurrent(id, generation, "Stopping"));
        await controller.settleTeardown(id, generation);
        await controller.observe(id, generation, { type: "stopped" }, "containers removed; workspace kept", null);
      },
      async (err) => {
        this.d.log.error({ sandboxId: id, generation, err: errorMessage(err) }, "stop failed; sandbox stays Stopping");
        await controller.note(s, generation, `stop failed: ${errorMessage(err)}`);
      },
    );
  }

  /** Carry out a persisted delete (the sandbox is Deleting). */
  delete(s: SandboxRecord): void {
    const { id, generation } = s;
    const { controller, driver } = this.d;
    void this.d.serial.run(
      id,
      async () => {
        if (!await controller.isCurrent(id, generation, "Deleting")) return;
        await this.#untilDone(s, "delete", () => driver.remove(id), () => controller.isCurrent(id, generation, "Deleting"));
        await this.d.store.deleteSandbox(id, { generation });
        this.d.log.info({ sandboxId: id, name: s.name }, "sandbox deleted");
      },
      async (err) => {
        this.d.log.error({ sandboxId: id, generation, err: errorMessage(err) }, "delete failed; sandbox stays Deleting");
        await controller.note(s, generation, `delete failed: ${errorMessage(err)}`);
      },
    );
  }

  /**
   * Fail closed: remove the containers of a generation that ended in Error or
   * Completed (and of any older one), whatever step its launch reached, retrying
   * with capped backoff until it is done, the gateway closes, or a newer intent
   * (start, stop, delete) takes the sandbox over.
   */
  teardown(id: string, generation: number): void {
    const handle = this.d.generations.get(id, generation);
    if (!handle || handle.state !== "owed") return;
    const { store, controller, driver, serial, log } = this.d;
    const attempt = async (): Promise<boolean> => {
      const s = await store.get(id);
      if (!s || s.generation !== generation || s.teardownOwed === null || s.teardownOwed > generation || handle.state !== "owed") return true;
      await driver.stop(id, generation);
      await controller.settleTeardown(id, generation);
      this.d.generations.tornDown(id, generation);
      log.info({ sandboxId: id, generation }, "containers removed (fail closed)");
      return true;
    };
    void (async () => {
      for (let n = 0; !this.#closed; n++) {
        let done = false;
        await serial.run(
          id,
          async () => {
            done = await attempt();
          },
          async (err) => {
            if (n === 0) await controller.note({ id, name: handle.name }, generation, `teardown is waiting for the runtime: ${errorMessage(err)}`);
            log.warn({ sandboxId: id, generation, attempt: n, err: errorMessage(err) }, "teardown failed; retrying");
          },
        );
        if (done || !(await handle.sleep(Math.min(5000, 200 * 2 ** n)))) return;
      }
    })();
  }

  /** The runtime answers again: owed teardowns retry now. */
  kickTeardowns(): void {
    this.d.generations.kickOwed();
  }

  /**
   * A persisted stop or delete is carried out even if the runtime is away for a
   * while: retry with capped backoff while the intent still stands.
   */
  async #untilDone(s: SandboxRecord, what: string, work: () => Promise<void>, stillWanted: () => Promise<boolean>): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      try {
        await work();
        return;
      } catch (err) {
        if (this.#closed || !(await stillWanted())) throw err;
        if (attempt === 0) await this.d.controller.note(s, s.generation, `${what} is waiting for the runtime: ${errorMessage(err)}`);
        this.d.log.warn({ sandboxId: s.id, attempt, err: errorMessage(err) }, `${what} failed; retrying`);
        await this.#sleep(Math.min(5000, 200 * 2 ** attempt));
      }
    }
  }

  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const wake = (): void => {
        clearTimeout(t);
        this.#sleeps.delete(wake);
        resolve();
      };
      const t = setTimeout(wake, ms);
      this.#sleeps.add(wake);
    });
  }

  close(): void {
    this.#closed = true;
    for (const wake of [...this.#sleeps]) wake();
  }
}
