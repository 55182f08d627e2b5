// One owner per running generation. A GenerationHandle holds everything live
// about one launch of a sandbox: its nonce and recorded runtime, its monitor
// subscription, the policy its boundary must enforce, an owed teardown, and its
// timers. It is disposed as one, whatever ended the generation (stop, delete, a
// failure, a newer generation), so nothing of an old launch can act later.
//
// Generations keeps at most one handle per sandbox and settles handles on every
// committed phase change, so leaving the live phases always releases a launch.

import type { Logger } from "pino";
import type { RuntimeMonitor, RuntimeRecord } from "../../driver/contract.js";
import type { Phase } from "../../lifecycle/phases.js";
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
  readonly #timers = new Map<NodeJS.Timeout, () => void>();

  constructor(
    readonly sandboxId: string,
    readonly name: string,
    readonly generation: number,
    readonly nonce: string,
    record: RuntimeRecord | null,
    private readonly boundary: BoundaryRegistry | null,
  ) {
    this.#record = record;
  }

  get state(): HandleState {
    return this.#state;
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

  /** Start watching the runtime; the subscription ends with the handle. */
  watch(monitor: RuntimeMonitor | null): void {
    if (this.#state !== "live" || !monitor || !this.#record) return;
    this.#monitor = monitor;
    monitor.arm({ sandboxId: this.sandboxId, name: this.name, generation: this.generation, record: this.#record });
  }

  /** A pause that ends early (resolving false) when the handle is disposed. */
  sleep(ms: number): Promise<boolean> {
    if (this.#state === "disposed") return Promise.resolve(false);
    return new Promise((resolve) => {
      const t = setTimeout(() => {
        this.#timers.delete(t);
        resolve(this.#state !== "disposed");
      }, ms);
      this.#timers.set(t, () => resolve(false));
    });
  }

  /**
   * The generation failed or completed: stop watching it and close its session;
   * its containers are still owed a teardown when it recorded any.
   */
  end(): void {
    if (this.#state !== "live") return;
    if (!this.#record) {
      this.dispose("ended before its containers were recorded");
      return;
    }
    this.#unwatch();
    this.boundary?.disconnect(this.sandboxId, "sandbox failed");
    this.#wakeTimers();
    this.#state = "owed";
  }

  /**
   * Everything of this generation goes: monitor subscription, timers, and its
   * session (closed; forgotten with its desired policy on delete; kept as it is
   * when the gateway itself shuts down, so supervisors ride out a restart).
   */
  dispose(why: string, session: "disconnect" | "forget" | "keep" = "disconnect"): void {
    if (this.#state === "disposed") return;
    this.#state = "disposed";
    this.#unwatch();
    if (session === "forget") this.boundary?.forget(this.sandboxId);
    else if (session === "disconnect") this.boundary?.disconnect(this.sandboxId, why);
    this.#wakeTimers();
  }

  get timers(): number {
    return this.#timers.size;
  }

  #wakeTimers(): void {
    for (const [t, wake] of this.#timers) {
      clearTimeout(t);
      wake();
    }
    this.#timers.clear();
  }

  #unwatch(): void {
    this.#monitor?.disarm(this.sandboxId);
    this.#monitor = null;
  }
}

export class Generations {
  readonly #handles = new Map<string, GenerationHandle>();

  constructor(
    private readonly boundary: BoundaryRegistry | null,
    private readonly log: Logger,
  ) {}

  /** A new launch: any older handle of the sandbox is disposed first. */
  open(s: { id: string; name: string; generation: number }, nonce: string, record: RuntimeRecord | null = null): GenerationHandle {
    const old = this.#handles.get(s.id);
    if (old && old.generation > s.generation) throw new Error(`generation ${s.generation} of ${s.id} is older than its handle's ${old.generation}`);
    old?.dispose("superseded by a newer launch");
    const h = new GenerationHandle(s.id, s.name, s.generation, nonce, record, this.boundary);
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

  /** Generations whose containers must still be removed. */
  owed(): { sandboxId: string; generation: number }[] {
    return [...this.#handles.values()].filter((h) => h.state === "owed").map((h) => ({ sandboxId: h.sandboxId, generation: h.generation }));
  }

  /** Called for every committed phase change: a generation that left the live phases is released. */
  settle(sandboxId: string, generation: number, phase: Phase | null): void {
    const h = this.#handles.get(sandboxId);
    if (!h || h.generation > generation) return;
    if (phase === null) {
      h.dispose("sandbox deleted", "forget");
    } else if (h.generation < generation) {
      h.dispose("superseded by a newer generation");
    } else if (OWED_PHASES.has(phase)) {
      h.end();
    } else if (phase === "Deleting") {
      h.dispose("sandbox deleting", "forget");
    } else if (!SESSION_PHASES.has(phase)) {
      h.dispose("sandbox stopping");
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
