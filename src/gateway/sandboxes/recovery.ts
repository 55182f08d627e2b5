// Recovery as the runtime monitor sees the gateway: a MonitorSink. The monitor
// proves facts about containers; this applies them through the lifecycle
// controller (machine + compare-and-set, serialized with the sandbox's other
// lifecycle work), adds the gateway's own evidence about the boundary, and
// carries out fail-closed teardowns.

import type { Logger } from "pino";
import type { ComputeDriver, MonitorSink, ReadinessCheck } from "../../driver/contract.js";
import type { Store } from "../../store/store.js";
import type { KeyedSerial } from "../../util/keyed-serial.js";
import type { ControlPlane } from "../control/control-plane.js";
import type { LifecycleController } from "./controller.js";
import type { Generations } from "./generations.js";

export interface RecoveryDeps {
  store: Store;
  controller: LifecycleController;
  driver: ComputeDriver;
  generations: Generations;
  control: ControlPlane | null;
  serial: KeyedSerial;
  log: Logger;
}

const message = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/** The control session's proof for one generation, as a readiness check. */
export function sessionCheck(control: ControlPlane | null, sandboxId: string, generation: number): ReadinessCheck {
  if (!control) return { name: "control session", ok: true, detail: "runtime without supervisors" };
  const h = control.boundary.health(sandboxId);
  if (h.healthy && h.generation === generation) return { name: "control session", ok: true };
  return { name: "control session", ok: false, detail: h.problem ?? `session of generation ${h.generation ?? "none"}, launch is generation ${generation}` };
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
          applied = d.controller.observe(id, generation, event, msg) !== null;
        },
        (err) => d.log.error({ sandboxId: id, err: message(err) }, "monitor observation failed"),
      );
      return applied;
    },
    boundary: (id, generation) => sessionCheck(d.control, id, generation),
    teardown: (id, generation) =>
      d.serial.run(
        id,
        async () => {
          await d.driver.stop(id, generation);
          const s = d.store.get(id);
          if (s && s.generation === generation && (s.phase === "Error" || s.phase === "Completed")) d.controller.recordRuntime(id, { phase: s.phase, generation }, null);
          d.generations.tornDown(id, generation);
          d.log.info({ sandboxId: id, generation }, "workload stopped (fail closed)");
        },
        (err) => {
          throw err;
        },
      ),
    owedTeardowns: () => d.generations.owed(),
    recoveringSince: (id) => {
      const at = d.store.enteredPhaseAt(id, "Recovering");
      return at === null ? undefined : Date.parse(at);
    },
  };
}
