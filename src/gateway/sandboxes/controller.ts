// The only writer of lifecycle state: every phase change is computed by the pure
// state machine for a given generation and written as a compare-and-set on
// (id, generation, phase). User intents that are refused throw an ApiError; runtime
// observations that are stale or lost a race are dropped (logged, not an error).

import type { Logger } from "pino";
import type { RuntimeRecord } from "../../driver/contract.js";
import { transition, type LifecycleState } from "../../lifecycle/machine.js";
import type { LifecycleEvent, Phase } from "../../lifecycle/phases.js";
import type { SandboxRecord, Store } from "../../store/contract.js";
import { ApiError } from "../errors.js";

const stateOf = (s: SandboxRecord): LifecycleState => ({ phase: s.phase, generation: s.generation, reason: s.reason });

export class LifecycleController {
  constructor(
    private readonly store: Store,
    private readonly log: Logger,
  ) {}

  /** A user intent on the sandbox as read: validated, then compare-and-set; throws ApiError when refused or lost. */
  async intent(s: SandboxRecord, event: LifecycleEvent, msg: string): Promise<SandboxRecord> {
    const t = transition(stateOf(s), event, s.generation, s.name);
    if (!t.ok) throw new ApiError(t.code, t.message);
    const after = await this.store.transition(s.id, {
      expect: { phase: s.phase, generation: s.generation },
      next: t.next,
      message: msg,
      // A new generation starts without a runtime.
      runtime: event.type === "start" ? null : undefined,
    });
    if (!after) {
      const now = await this.store.get(s.id);
      throw new ApiError("not_allowed", `sandbox "${s.name}" changed while ${event.type} was being applied (now ${now?.phase ?? "deleted"}); try again`);
    }
    return after;
  }

  /**
   * Apply an observation made for `generation` only if the sandbox is still at
   * that generation and in a phase the event is accepted from. Returns null when
   * the observation is stale or lost the race; that is not an error. `still` is asked
   * last, with nothing awaited between its answer and the write: false drops it.
   */
  async observe(id: string, generation: number, event: LifecycleEvent, msg: string, runtime?: null, still?: () => boolean): Promise<SandboxRecord | null> {
    const s = await this.store.get(id);
    if (!s) return null;
    const t = transition(stateOf(s), event, generation, s.name);
    if (!t.ok) {
      this.log.info({ sandboxId: id, generation, event: event.type, phase: s.phase, current: s.generation }, `observation dropped: ${t.message}`);
      return null;
    }
    // A generation that ends in Error or Completed owes the removal of its containers,
    // recorded in the same transaction: a crash right after cannot lose it.
    const owes = t.next.phase === "Error" || t.next.phase === "Completed";
    if (still && !still()) return null;
    return await this.store.transition(id, { expect: { phase: s.phase, generation }, next: t.next, message: msg, runtime, ...(owes ? { oweTeardown: generation } : {}) });
  }

  /** The containers of `generation` and older ones are gone. */
  async settleTeardown(id: string, generation: number): Promise<void> {
    await this.store.settleTeardown(id, generation);
  }

  /** Still the generation and phase a task was started for? */
  async isCurrent(id: string, generation: number, phase: Phase): Promise<boolean> {
    const s = await this.store.get(id);
    return !!s && s.generation === generation && s.phase === phase;
  }

  /** Record a generation's runtime, only while it is still that generation and phase. */
  async recordRuntime(id: string, expect: { phase: Phase; generation: number }, record: RuntimeRecord | null): Promise<boolean> {
    return await this.store.setRuntime(id, expect, record);
  }

  /** A progress or info line in the sandbox's event log. */
  async note(s: { id: string; name: string }, generation: number, msg: string): Promise<void> {
    await this.store.appendEvent({ id: s.id, name: s.name, generation }, "info", msg);
  }
}
