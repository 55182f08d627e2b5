// The gateway's side of a runtime monitor, and the one place a daemon restart is read. The
// monitor reports facts (the channel up or down, the verdicts of an inspect, probe results)
// through report(); the generation's handle holds the Recovering record and the pending
// boundary loss; the pure decision (src/lifecycle/supervision.ts) turns facts, record and
// clock into the next step; and this carries it out: every phase change through the
// lifecycle controller (machine + compare-and-set, in the sandbox's serial queue), the
// monitor told what to do next in report()'s answer. The clock is here too: deadlines, and
// re-checks of Recovering generations while Docker answers.

import type { Logger } from "pino";
import type { MonitorFact, MonitorSink, MonitorStep, ReadinessCheck, RuntimeMonitor } from "../../driver/contract.js";
import type { LifecycleEvent, Phase } from "../../lifecycle/phases.js";
import { adopted, entered, onVerdicts, overdue, recheckDue, unbrokenSession, type Deadlines, type LossCause, type RoleVerdicts } from "../../lifecycle/supervision.js";
import type { Store } from "../../store/contract.js";
import { errorMessage } from "../../util/error-message.js";
import type { KeyedSerial } from "../../util/keyed-serial.js";
import type { BoundaryEvidence } from "./boundary-evidence.js";
import type { LifecycleController } from "./controller.js";
import type { GenerationHandle, Generations } from "./generations.js";
import { InFlight } from "../../util/in-flight.js";

export interface SupervisionDeps {
  store: Store;
  controller: LifecycleController;
  generations: Generations;
  serial: KeyedSerial;
  log: Logger;
  /** The gateway's own evidence about a generation's boundary (its control session). */
  evidence: BoundaryEvidence;
  deadlines: Deadlines;
  /** How often a Recovering generation is re-checked while Docker answers (default 1 s). */
  retryIntervalMs?: number;
  /** Docker answers again: teardowns owed to it are retried now. */
  reconnected: () => void;
}

const NOTHING: MonitorStep = { do: "nothing" };

export class Supervision implements MonitorSink {
  #monitor: RuntimeMonitor | null = null;
  /** The monitor's channel, as last reported; unknown until its first attempt. */
  #channel: "unknown" | "up" | "down" = "unknown";
  #timer: NodeJS.Timeout | undefined;
  #closed = false;
  #ticking = false;
  /** Deadline failures being committed (close() waits for them). */
  readonly #work = new InFlight();
  readonly #m = { recoveringMsTotal: 0, recovered: 0 };

  constructor(private readonly d: SupervisionDeps) {}

  /** The monitor this supervises through (null: a runtime that cannot be watched). */
  attach(monitor: RuntimeMonitor | null): void {
    this.#monitor = monitor;
  }

  /** Whether a monitor watches this runtime at all. */
  get active(): boolean {
    return this.#monitor !== null;
  }

  /** Start the monitor and the clock (after the adoption at gateway start has watched its handles). */
  start(): void {
    if (!this.#monitor || this.#timer || this.#closed) return;
    this.#monitor.start();
    this.#timer = setInterval(() => {
      this.#tick().catch((err: unknown) => this.d.log.error({ err: errorMessage(err) }, "supervision tick failed"));
    }, Math.min(500, this.#retryMs));
  }

  /** Watch a generation that just became Ready, or is adopted Ready or Recovering at gateway start. */
  async watch(h: GenerationHandle): Promise<void> {
    if (!this.#monitor) return;
    h.watch(this.#monitor);
    if (!h.watched) return;
    // Adopted while Recovering: its deadline runs from when it entered Recovering.
    const s = await this.d.store.get(h.sandboxId);
    if (s?.phase === "Recovering" && s.generation === h.generation && h.recovery === null) {
      const since = await this.#recoveringSince(h.sandboxId);
      if (h.recovery === null) h.recover(adopted(since, Date.now()));
    }
    if (this.#channel === "down") this.#track(this.#lose(h, "the Docker events stream is down", "runtime"));
  }

  /**
   * The gateway's own evidence says the boundary of a Ready generation is not in place
   * (session lost, heartbeats stale, lockdown). A killed supervisor drops its session a
   * moment before Docker reports the exit: with Docker answering, the loss waits for an
   * inspect, so a proven exit is an Error at once and only a supervisor still running goes
   * Recovering, with the boundary's deadline.
   */
  boundaryLost(sandboxId: string, generation: number, problem: string): void {
    const h = this.d.generations.get(sandboxId, generation);
    if (!h?.watched || this.#closed) return;
    if (this.#channel !== "up") {
      this.#track(this.#lose(h, `boundary unhealthy: ${problem}`, "boundary"));
      return;
    }
    h.boundaryPending = { problem, stage: "reported" };
    this.#monitor?.check(sandboxId);
  }

  async report(f: MonitorFact): Promise<MonitorStep> {
    if (f.kind === "channel") {
      this.#channel = f.up ? "up" : "down";
      // Lost: every watched generation goes Recovering, nothing is stopped. Back: owed teardowns run.
      if (f.up) this.d.reconnected();
      else await Promise.all(this.d.generations.watched().map((h) => this.#lose(h, f.cause, "runtime")));
      return NOTHING;
    }
    const h = this.d.generations.get(f.sandboxId, f.generation);
    const s = await this.d.store.get(f.sandboxId);
    // Not the sandbox's current generation (a newer one, stopped, deleted): not ours to act on.
    if (!h || !s || s.generation !== f.generation) return { do: "stale" };
    return f.kind === "verdicts" ? this.#verdicts(h, s.phase, f.verdicts) : this.#probed(h, f.checks, f.exec);
  }

  async #verdicts(h: GenerationHandle, phase: Phase, verdicts: RoleVerdicts): Promise<MonitorStep> {
    const pending = h.boundaryPending;
    h.boundaryPending = null;
    const step = onVerdicts(phase, verdicts, pending);
    switch (step.do) {
      case "fail":
        await this.#end(h, { type: "failed", reason: step.reason }, `${step.reason.code}: proven by inspect`);
        return NOTHING;
      case "complete":
        await this.#end(h, { type: "completed" }, "workload exited 0");
        return NOTHING;
      case "lose":
        await this.#lose(h, step.problem, step.cause);
        return NOTHING;
      case "recheck":
        h.boundaryPending = step.boundary;
        return { do: "recheck" };
      case "verify": {
        // The gateway's own evidence first: while it fails, no probe is worth running.
        const own = this.d.evidence.boundary(h.sandboxId, h.generation);
        if (!own.ok) {
          this.#notYet(h, [own]);
          return NOTHING;
        }
        return { do: "probe", exec: this.#unbroken(h) === null };
      }
      case "nothing":
        return NOTHING;
    }
  }

  /** The runtime's probes are in: Ready again when they and the gateway's evidence hold. */
  async #probed(h: GenerationHandle, runtime: ReadinessCheck[], exec: boolean): Promise<MonitorStep> {
    const checks = [...runtime, this.d.evidence.boundary(h.sandboxId, h.generation)];
    // Without the exec probe, the session that stood in for it must still be the one up now.
    const session = exec ? null : this.#unbroken(h);
    if (!exec) checks.push(session !== null ? { name: "unbroken control session", ok: true, detail: `session ${session} up since before Recovering` } : { name: "unbroken control session", ok: false, detail: "the control session changed during the probes" });
    if (!checks.every((c) => c.ok)) {
      this.#notYet(h, checks);
      return NOTHING;
    }
    const evidence = exec ? "workload exec probe" : "unbroken control session";
    this.d.log.info({ sandboxId: h.sandboxId, generation: h.generation, evidence, checks }, `re-verified by ${evidence}`);
    const message = `re-verified: same instances, boundary healthy, ${exec ? "exec probe ok" : "unbroken control session (no exec probe)"}`;
    if (await this.#apply(h, { type: "recovered" }, message)) this.#settle(h, true);
    return NOTHING;
  }

  #unbroken(h: GenerationHandle): string | null {
    return unbrokenSession(h.recovery, this.d.evidence.liveSession(h.sandboxId, h.generation));
  }

  /** Not yet re-verified: what failed is the problem a deadline failure names. */
  #notYet(h: GenerationHandle, checks: ReadinessCheck[]): void {
    if (h.recovery) h.recovery.problem = checks.filter((c) => !c.ok).map((c) => `${c.name}: ${c.detail ?? "failed"}`).join("; ");
    this.d.log.info({ sandboxId: h.sandboxId, generation: h.generation, checks }, "not yet verified; still Recovering");
  }

  /** Ready → Recovering (nothing is stopped); a Recovering generation without a record gets one. */
  async #lose(h: GenerationHandle, problem: string, cause: LossCause): Promise<void> {
    const s = await this.d.store.get(h.sandboxId);
    if (!s || s.generation !== h.generation) return;
    // The session up while still Ready: if that very session is still up once both
    // instances check out unchanged, it stands in for the exec probe.
    const session = cause === "runtime" && s.phase === "Ready" ? this.d.evidence.liveSession(h.sandboxId, h.generation) : null;
    if (s.phase === "Ready" && (await this.#apply(h, { type: "contactLost", cause: problem }, problem))) {
      h.recover(entered(Date.now(), cause, problem, session));
      // Re-verification starts at once (and runs on every retry while Recovering).
      if (cause === "boundary" && this.#channel === "up") this.#monitor?.check(h.sandboxId);
    } else if (s.phase === "Recovering" && h.recovery === null && h.state === "live") {
      const since = await this.#recoveringSince(h.sandboxId);
      if (h.recovery === null) h.recover(adopted(since, Date.now(), cause, problem));
    }
  }

  /**
   * A proven failure, or a deadline: Error (or Completed). The committed phase change ends
   * the handle (lockdown over the control session, the monitor disarmed) and owes the
   * teardown, retried until Docker allows it.
   */
  async #end(h: GenerationHandle, event: LifecycleEvent, message: string): Promise<void> {
    if (await this.#apply(h, event, message)) this.#settle(h, false);
  }

  /** Apply an observation in the sandbox's serial queue; false when stale or it lost a race. */
  async #apply(h: GenerationHandle, event: LifecycleEvent, message: string): Promise<boolean> {
    let applied = false;
    const id = h.sandboxId;
    await this.d.serial.run(
      id,
      async () => {
        // The checks ran before this turn of the queue: a policy revision accepted since
        // (policy set while Recovering) is not in force until the supervisor acks it.
        // Ready only with the boundary's evidence holding at the write (asked right before
        // it); the next check looks again.
        const holds = (): boolean => {
          const own = this.d.evidence.boundary(id, h.generation);
          if (!own.ok) this.d.log.info({ sandboxId: id, generation: h.generation, problem: own.detail }, "not re-verified at the commit; still Recovering");
          return own.ok;
        };
        applied = (await this.d.controller.observe(id, h.generation, event, message, undefined, event.type === "recovered" ? holds : undefined)) !== null;
      },
      (err) => this.d.log.error({ sandboxId: id, err: errorMessage(err) }, "monitor observation failed"),
    );
    return applied;
  }

  #settle(h: GenerationHandle, recovered: boolean): void {
    const r = h.recovery;
    h.clearRecovery();
    h.boundaryPending = null;
    h.lastCheck = 0;
    if (r === null) return;
    this.#m.recoveringMsTotal += Date.now() - r.since;
    if (recovered) this.#m.recovered++;
  }

  /** Deadlines, and re-checks of Recovering generations while Docker answers: idle cost flat in N. */
  async #tick(): Promise<void> {
    // A tick that waits on the store is not overlapped by the next one.
    if (this.#ticking) return;
    this.#ticking = true;
    try {
      await this.#tickNow();
    } finally {
      this.#ticking = false;
    }
  }

  async #tickNow(): Promise<void> {
    const now = Date.now();
    const connected = this.#channel === "up";
    for (const h of this.d.generations.recovering()) {
      const s = await this.d.store.get(h.sandboxId);
      if (h.recovery === null) continue; // settled while the store answered
      if (!h.watched || !s || s.phase !== "Recovering" || s.generation !== h.generation) {
        this.#settle(h, false);
        continue;
      }
      const reason = overdue(h.recovery, connected, now, this.d.deadlines);
      if (reason !== null) {
        if (!h.failing) {
          h.failing = true;
          this.#track(this.#end(h, { type: "failed", reason }, reason.detail).finally(() => (h.failing = false)));
        }
        continue;
      }
      if (connected && recheckDue(h.lastCheck, now, this.#retryMs)) {
        h.lastCheck = now;
        this.#monitor?.check(h.sandboxId);
      }
    }
  }

  get #retryMs(): number {
    return this.d.retryIntervalMs ?? 1_000;
  }

  #track(p: Promise<void>): void {
    this.#work.track(p, (err) => this.d.log.error({ err: errorMessage(err) }, "supervision step failed"));
  }

  async #recoveringSince(sandboxId: string): Promise<number | undefined> {
    const at = await this.d.store.enteredPhaseAt(sandboxId, "Recovering");
    return at === null ? undefined : Date.parse(at);
  }

  /** Recovering now, and the recoveries ended so far (for `gateway status`). */
  metrics(): { recoveringNow: number; recoveringMsTotal: number; recovered: number } {
    const now = Date.now();
    const open = this.d.generations.recovering();
    return { recoveringNow: open.length, recoveringMsTotal: this.#m.recoveringMsTotal + open.reduce((n, h) => n + now - h.recovery!.since, 0), recovered: this.#m.recovered };
  }

  /** Steps still being committed and its clock (leak checks). */
  pending(): { checks: number; timers: number } {
    return { checks: this.#work.size, timers: this.#timer === undefined ? 0 : 1 };
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#work.idle();
  }
}
