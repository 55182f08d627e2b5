// Recovery as the runtime monitor sees the gateway: a MonitorSink. The monitor
// proves facts about containers; this applies them through the lifecycle
// controller (machine + compare-and-set, serialized with the sandbox's other
// lifecycle work) and adds the gateway's own evidence about the boundary. What
// a failure then owes (lockdown, teardown) follows from the committed phase
// change, in the generation's handle and LifecycleTasks.

import type { Logger } from "pino";
import type { MonitorSink, ReadinessCheck } from "../../driver/contract.js";
import type { Store } from "../../store/contract.js";
import type { KeyedSerial } from "../../util/keyed-serial.js";
import type { BoundaryHealth } from "../control/boundary.js";
import type { ControlPlane } from "../control/control-plane.js";
import type { LifecycleController } from "./controller.js";
import { errorMessage } from "../../util/error-message.js";

export interface RecoveryDeps {
  store: Store;
  controller: LifecycleController;
  control: ControlPlane | null;
  serial: KeyedSerial;
  log: Logger;
  /** Docker answers again: retry owed teardowns now. */
  reconnected: () => void;
}

/**
 * The problem, when the boundary health of a Ready generation says its boundary
 * is not in place; null while it is, or while only a policy push is in flight.
 */
export function boundaryFailure(h: BoundaryHealth, generation: number): string | null {
  if (h.session === "down") return h.problem ?? "no control session";
  if (h.generation !== generation) return `session of generation ${String(h.generation)}, launch is generation ${generation}`;
  if (h.problem === "heartbeat stale" || h.problem === "supervisor in lockdown" || h.problem === "proxy not listening") return h.problem;
  return null;
}

/** The control session's proof for one generation, as a readiness check. */
export function sessionCheck(control: ControlPlane | null, sandboxId: string, generation: number): ReadinessCheck {
  if (!control) return { name: "control session", ok: true, detail: "runtime without supervisors" };
  const h = control.boundary.health(sandboxId);
  if (h.healthy && h.generation === generation) return { name: "control session", ok: true };
  return { name: "control session", ok: false, detail: h.problem ?? `session of generation ${h.generation ?? "none"}, launch is generation ${generation}` };
}

/** The id of the live control session of this generation, null when there is none (or it is another generation's). */
export function liveSession(control: Pick<ControlPlane, "boundary"> | null, sandboxId: string, generation: number): string | null {
  const s = control?.boundary.liveSession(sandboxId);
  return s?.generation === generation ? s.sessionId : null;
}

export function recoverySink(d: RecoveryDeps): MonitorSink {
  return {
    current: (id) => {
      const s = d.store.get(id);
      return s ? { phase: s.phase, generation: s.generation } : null;
    },
    apply: async (id, generation, event, msg) => {
      let applied = false;
      await d.serial.run(
        id,
        async () => {
          // The monitor's checks ran before this turn of the queue: a policy revision accepted
          // since (policy set while Recovering) is not in force until the supervisor acks it.
          // Ready only with the boundary's evidence holding now; the monitor checks again.
          if (event.type === "recovered") {
            const session = sessionCheck(d.control, id, generation);
            if (!session.ok) {
              d.log.info({ sandboxId: id, generation, problem: session.detail }, "not re-verified at the commit; still Recovering");
              return;
            }
          }
          applied = d.controller.observe(id, generation, event, msg) !== null;
        },
        (err) => d.log.error({ sandboxId: id, err: errorMessage(err) }, "monitor observation failed"),
      );
      return applied;
    },
    boundary: (id, generation) => sessionCheck(d.control, id, generation),
    liveSession: (id, generation) => liveSession(d.control, id, generation),
    reconnected: () => d.reconnected(),
    recoveringSince: (id) => {
      const at = d.store.enteredPhaseAt(id, "Recovering");
      return at === null ? undefined : Date.parse(at);
    },
  };
}
