// One owner per running generation. A GenerationHandle holds everything live
// about one launch of a sandbox: its nonce and recorded runtime, its monitor
// subscription, its supervision through an outage (the Recovering record, a
// pending boundary loss, when it was last checked: supervision.ts decides with
// them), the policy its boundary must enforce, an owed teardown, and its timers.
// It is disposed as one, whatever ended the generation (stop, delete, a failure,
// a newer generation), so nothing of an old launch can act later.
//
// Generations keeps at most one handle per sandbox and settles handles on every
// committed phase change, so leaving the live phases always releases a launch.

import type { Logger } from "pino";
import type { RuntimeMonitor, RuntimeRecord } from "../../driver/contract.js";
import type { Phase } from "../../lifecycle/phases.js";
import type { BoundaryPending, Recovery } from "../../lifecycle/supervision.js";
import type { Policy } from "../../policy/index.js";
import type { BoundaryRegistry } from "../control/boundary.js";

/** Phases in which a launch may hold a control session. */
const SESSION_PHASES: ReadonlySet<Phase> = new Set(["Provisioning", "Ready", "Recovering"]);
/** Phases after which a generation's containers must still be removed (fail closed). */
const OWED_PHASES: ReadonlySet<Phase> = new Set(["Error", "Completed"]);

export type HandleState = "live" | "owed" | "disposed";

export class GenerationHandle {
  #state: HandleState = "live";
  #record: RuntimeRecord | null;
  #monitor: RuntimeMonitor | null = null;
  /** Pending sleeps: each is ended early with true (go on) or false (stop). */
  readonly #timers = new Map<NodeJS.Timeout, (goOn: boolean) => void>();
  /** Aborted once the generation is no longer live (ended or disposed): work waiting for it stops waiting. */
  readonly #over = new AbortController();
  /** While Recovering under this gateway's watch: since when, why, and the session up before. */
  #recovery: Recovery | null = null;
  /** A boundary loss the gateway reported while the runtime answers, until an inspect has weighed it. */
  boundaryPending: BoundaryPending | null = null;
  /** When it was last re-checked while Recovering (ms since the epoch). */
  lastCheck = 0;
  /** Its failure at a deadline is being committed: not twice. */
  failing = false;

  constructor(
    readonly sandboxId: string,
    readonly name: string,
    readonly generation: number,
    readonly nonce: string,
    record: RuntimeRecord | null,
    private readonly boundary: BoundaryRegistry | null,
    /** Told whenever the handle starts or stops holding a Recovering record. */
    private readonly onRecovery: (h: GenerationHandle, recovering: boolean) => void,
  ) {
    this.#record = record;
  }

  get recovery(): Recovery | null {
    return this.#recovery;
  }

  /** Enter (or adopt) Recovering; a disposed handle acts no more. Set and cleared only here, so Generations' set of recovering handles cannot drift. */
  recover(r: Recovery): void {
    if (this.#state === "disposed") return;
    this.#recovery = r;
    this.onRecovery(this, true);
  }

  clearRecovery(): void {
    if (this.#recovery === null) return;
    this.#recovery = null;
    this.onRecovery(this, false);
  }

  get state(): HandleState {
    return this.#state;
  }

  get over(): AbortSignal {
    return this.#over.signal;
  }

  get record(): RuntimeRecord | null {
    return this.#record;
  }

  /** The identities this generation started with (persisted by the caller first). */
  recorded(record: RuntimeRecord): void {
    if (this.#state === "live") this.#record = record;
  }

  /** The policy this generation's supervisor must enforce; pushed to its session when live. */
  desire(policy: Policy, revision: number): boolean {
    if (this.#state !== "live") return false;
    return this.boundary?.setDesired(this.sandboxId, this.generation, policy, revision) ?? false;
  }

  /** Whether its runtime monitor watches it now. */
  get watched(): boolean {
    return this.#monitor !== null;
  }

  /** Start watching the runtime; the subscription ends with the handle. */
  watch(monitor: RuntimeMonitor | null): void {
    if (this.#state !== "live" || !monitor || !this.#record) return;
    this.#monitor = monitor;
    monitor.arm({ sandboxId: this.sandboxId, name: this.name, generation: this.generation, record: this.#record });
  }

  /**
   * A pause that ends early when the handle's state changes: resolves true to go
   * on (the timer ran out, or kick()), false when the work it paces is over.
   */
  sleep(ms: number): Promise<boolean> {
    if (this.#state === "disposed") return Promise.resolve(false);
    const state = this.#state;
    return new Promise((resolve) => {
      const t = setTimeout(() => {
        this.#timers.delete(t);
        resolve(this.#state === state);
      }, ms);
      this.#timers.set(t, (goOn) => resolve(goOn && this.#state === state));
    });
  }

  /** End pending sleeps now, to go on at once (e.g. Docker answers again). */
  kick(): void {
    this.#wakeTimers(true);
  }

  /**
   * The generation failed or completed. Its boundary is locked down first (over
   * the control session: that needs no Docker), it is no longer watched, and its
   * containers are owed a teardown until one succeeds.
   */
  end(reason: string): void {
    if (this.#state !== "live") return;
    this.#state = "owed";
    this.#unwatch();
    this.boundary?.lockdown(this.sandboxId, reason);
    this.#wakeTimers(false);
    this.#over.abort();
  }

  /**
   * Everything of this generation goes: monitor subscription, timers, and its
   * session (locked down and closed; forgotten with its desired policy on delete;
   * kept as it is when the gateway itself shuts down, so supervisors ride out a
   * gateway restart).
   */
  dispose(why: string, session: "lockdown" | "forget" | "keep" = "lockdown"): void {
    if (this.#state === "disposed") return;
    this.#state = "disposed";
    this.#unwatch();
    if (session === "forget") this.boundary?.forget(this.sandboxId, why);
    else if (session === "lockdown") this.boundary?.lockdown(this.sandboxId, why);
    this.#wakeTimers(false);
    this.#over.abort();
  }

  get timers(): number {
    return this.#timers.size;
  }

  #wakeTimers(goOn: boolean): void {
    for (const [t, wake] of this.#timers) {
      clearTimeout(t);
      wake(goOn);
    }
    this.#timers.clear();
  }

  #unwatch(): void {
    this.#monitor?.disarm(this.sandboxId);
    this.#monitor = null;
    this.clearRecovery();
    this.boundaryPending = null;
  }
}

export class Generations {
  readonly #handles = new Map<string, GenerationHandle>();
  /** The handles holding a Recovering record: the supervision clock walks these, not every handle. */
  readonly #recovering = new Set<GenerationHandle>();
  readonly #onRecovery = (h: GenerationHandle, recovering: boolean): void => {
    if (recovering) this.#recovering.add(h);
    else this.#recovering.delete(h);
  };

  constructor(
    private readonly boundary: BoundaryRegistry | null,
    private readonly log: Logger,
  ) {}

  /** A new launch: any older handle of the sandbox is disposed first. */
  open(s: { id: string; name: string; generation: number }, nonce: string, record: RuntimeRecord | null = null): GenerationHandle {
    const old = this.#handles.get(s.id);
    if (old && old.generation > s.generation) throw new Error(`generation ${s.generation} of ${s.id} is older than its handle's ${old.generation}`);
    old?.dispose("superseded");
    const h = new GenerationHandle(s.id, s.name, s.generation, nonce, record, this.boundary, this.#onRecovery);
    this.#handles.set(s.id, h);
    return h;
  }

  get(sandboxId: string, generation?: number): GenerationHandle | undefined {
    const h = this.#handles.get(sandboxId);
    return h && h.state !== "disposed" && (generation === undefined || h.generation === generation) ? h : undefined;
  }

  /** The launch a supervisor of this sandbox must prove it belongs to, given the sandbox's phase and generation. */
  expectedLaunch(sandboxId: string, current: { phase: Phase; generation: number } | null): { generation: number; nonce: string } | null {
    if (!current || !SESSION_PHASES.has(current.phase)) return null;
    const h = this.get(sandboxId, current.generation);
    return h?.state === "live" ? { generation: h.generation, nonce: h.nonce } : null;
  }

  /** The live handles a runtime monitor watches. */
  watched(): GenerationHandle[] {
    return [...this.#handles.values()].filter((h) => h.state === "live" && h.watched);
  }

  /** The handles with a Recovering record: O(recovering), so the idle clock is flat in N. */
  recovering(): GenerationHandle[] {
    return [...this.#recovering];
  }

  /** Wake every owed teardown's pause: the runtime answers again. */
  kickOwed(): void {
    for (const h of this.#handles.values()) if (h.state === "owed") h.kick();
  }

  /** Called for every committed phase change: a generation that left the live phases is released. */
  settle(sandboxId: string, generation: number, phase: Phase | null): void {
    const h = this.#handles.get(sandboxId);
    if (!h || h.generation > generation) return;
    if (phase === null) {
      h.dispose("sandbox_deleted", "forget");
    } else if (h.generation < generation) {
      h.dispose("superseded");
    } else if (OWED_PHASES.has(phase)) {
      h.end(phase === "Error" ? "sandbox_failed" : "sandbox_completed");
    } else if (phase === "Deleting") {
      h.dispose("sandbox_deleting", "forget");
    } else if (!SESSION_PHASES.has(phase)) {
      h.dispose("sandbox_stopping");
    } else {
      return;
    }
    if (h.state === "disposed" && this.#handles.get(sandboxId) === h) this.#handles.delete(sandboxId);
    this.log.debug({ sandboxId, generation, phase, handle: h.state }, "generation settled");
  }

  /** The owed teardown of a generation is done. */
  tornDown(sandboxId: string, generation: number): void {
    const h = this.#handles.get(sandboxId);
    if (h?.generation !== generation) return;
    h.dispose("torn down");
    this.#handles.delete(sandboxId);
  }

  /** Timers still pending in live handles (leak checks). */
  timers(): number {
    let n = 0;
    for (const h of this.#handles.values()) n += h.timers;
    return n;
  }

  closeAll(): void {
    for (const h of this.#handles.values()) h.dispose("gateway shutting down", "keep");
    this.#handles.clear();
  }
}
