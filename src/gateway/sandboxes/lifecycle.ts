// The sandbox lifecycle, assembled: controller, generation handles, the serial
// queue, runtime gate, tasks, supervision and the runtime monitor that reports
// to it, the read model and the service. The gateway process wires this to its API and
// control plane; unit tests wire it to a fake runtime.

import { hostname } from "node:os";
import type { Logger } from "pino";
import { RECOVERY_DEADLINE_DEFAULT_S, type ComputeDriver, type RuntimeMonitor } from "../../driver/contract.js";
import { LIVE_PHASES, describeReason } from "../../lifecycle/phases.js";
import type { Store } from "../../store/contract.js";
import { KeyedSerial } from "../../util/keyed-serial.js";
import type { ControlPlane } from "../control/control-plane.js";
import { ActivityTracker } from "./activity.js";
import { adoptAll } from "./adoption.js";
import { LifecycleController } from "./controller.js";
import { DetachedExecs } from "./detached-execs.js";
import { ExecService } from "./exec-service.js";
import { ExpirySweeper } from "./expiry-sweeper.js";
import { Generations } from "./generations.js";
import { everyHost, type HostScope } from "./host-scope.js";
import { SandboxReadModel } from "./read-model.js";
import type { BoundaryHealth } from "../control/boundary.js";
import { boundaryFailure, controlEvidence, type BoundaryEvidence } from "./boundary-evidence.js";
import { RuntimeGate } from "./runtime-gate.js";
import { SandboxService, type ServiceOptions } from "./service.js";
import { Supervision } from "./supervision.js";
import { LifecycleTasks } from "./tasks.js";

export interface Lifecycle {
  service: SandboxService;
  /** Exec as users ask for it: user, environment, timeout, detached commands. */
  execs: ExecService;
  /** Exec, connect and egress seen, for --idle-stop. */
  activity: ActivityTracker;
  read: SandboxReadModel;
  runtime: RuntimeGate;
  monitor: RuntimeMonitor | null;
  /** Generations through runtime outages: the monitor's facts, the handles' records, the deadlines. */
  supervision: Supervision;
  /** The monitor's counters and supervision's (for `gateway status` and /metrics); null without a monitor. */
  monitorMetrics(): object | null;
  /** The launch a supervisor of this sandbox must prove it belongs to, or null. */
  expectedLaunch(sandboxId: string): Promise<{ generation: number; nonce: string } | null>;
  /** Finish what a previous gateway left, adopt running sandboxes, start monitoring. */
  resume(): Promise<void>;
  /** The per-sandbox queue every lifecycle step runs in (one at a time per sandbox). */
  serial: Pick<KeyedSerial, "run">;
  /** Resolves when no lifecycle work is queued or running. */
  idle(): Promise<void>;
  pending(): { tasks: number; checks: number; timers: number };
  close(): Promise<void>;
}

export function createLifecycle(d: {
  store: Store;
  driver: ComputeDriver;
  control: ControlPlane | null;
  log: Logger;
  options?: ServiceOptions;
  /** The gateway's evidence about boundaries (default: read from `control`). */
  evidence?: BoundaryEvidence;
  /** Which sandboxes this gateway drives (default: every one, as on the embedded store). */
  scope?: HostScope;
}): Lifecycle {
  const { store, driver, control, log } = d;
  const activity = new ActivityTracker();
  const generations = new Generations(control?.boundary ?? null, log);
  const controller = new LifecycleController(store, log);
  const serial = new KeyedSerial();
  const runtime = new RuntimeGate(driver, control, log);
  const scope = d.scope ?? everyHost(hostname());
  const read = new SandboxReadModel(store, control, driver, activity, scope);
  const supervision = new Supervision({
    store,
    controller,
    generations,
    serial,
    log: log.child({ component: "supervision" }),
    evidence: d.evidence ?? controlEvidence(control),
    deadlines: { recoveryMs: d.options?.recoveryDeadlineMs ?? RECOVERY_DEADLINE_DEFAULT_S * 1000, boundaryMs: d.options?.boundaryDeadlineMs ?? 30_000 },
    ...(d.options?.recoveryRetryMs === undefined ? {} : { retryIntervalMs: d.options.recoveryRetryMs }),
    reconnected: () => tasks.kickTeardowns(),
  });
  const monitor = driver.watch(supervision);
  supervision.attach(monitor);
  const tasks: LifecycleTasks = new LifecycleTasks({ store, controller, driver, control, generations, supervision, serial, log, readyTimeoutMs: d.options?.readyTimeoutMs ?? 30_000, ...(d.options?.launchConcurrency === undefined ? {} : { launchConcurrency: d.options.launchConcurrency }) });
  // Every committed phase change settles its generation's handle, whoever made it;
  // an Error or Completed generation then owes (and gets) its teardown.
  const unsubscribe = store.onEvent((e) => {
    if (e.kind !== "phase" && e.kind !== "deleted") return;
    // A sandbox another host's gateway created for this host: launched here, where its containers go.
    if (scope.shared && e.oldPhase === null && e.newPhase === "Provisioning") {
      handoff(e.sandboxId, e.generation).catch((err: unknown) => log.error({ sandboxId: e.sandboxId, err }, "taking over a sandbox created for this host failed"));
    }
    if (e.kind === "deleted") execs.detached.forget(e.sandboxId);
    try {
      generations.settle(e.sandboxId, e.generation, e.newPhase);
      if (e.newPhase === "Error" || e.newPhase === "Completed") tasks.teardown(e.sandboxId, e.generation);
    } catch (err) {
      log.error({ sandboxId: e.sandboxId, err }, "settling a generation failed");
    }
  });
  const handoff = async (id: string, generation: number): Promise<void> => {
    const s = await store.get(id);
    // Launched once: a create of this gateway's own is already launching (its handle is open).
    if (!s || !scope.drives(s) || s.phase !== "Provisioning" || s.generation !== generation || s.runtime !== null || generations.get(id) !== undefined) return;
    log.info({ sandboxId: id, name: s.name }, "launching a sandbox another gateway created for this host");
    tasks.launch(s);
  };
  // The boundary's health drives the lifecycle: a Ready sandbox whose supervisor is
  // running but cannot be shown to hold its boundary goes Recovering at once.
  const onBoundary = async (h: BoundaryHealth): Promise<void> => {
    const s = await store.get(h.sandboxId);
    // A launch waiting for its evidence looks again as soon as the session proves its part.
    if (s?.phase === "Provisioning" && h.healthy && h.generation === s.generation) generations.get(s.id, s.generation)?.kick();
    if (s?.phase !== "Ready") return;
    const problem = boundaryFailure(h, s.generation);
    if (problem !== null) supervision.boundaryLost(s.id, s.generation, problem);
  };
  const offBoundary = control?.boundary.onChange((h) => {
    onBoundary(h).catch((err: unknown) => log.error({ sandboxId: h.sandboxId, err }, "acting on a boundary change failed"));
  });
  const service = new SandboxService({ store, driver, control, controller, generations, tasks, runtime, read, log });
  const execs: ExecService = new ExecService({ service, read, store, driver, activity, log, detached: new DetachedExecs(d.options?.detachedExecs) });
  // --ttl and --idle-stop: a stop with its reason, through the same intent path as a user's stop.
  const sweeper = new ExpirySweeper({
    store,
    activity,
    log,
    drives: (s) => scope.drives(s),
    expire: async (id, generation, reason) => {
      const s = await store.get(id);
      // Another host's sandbox expires by its own gateway's sweeper.
      if (!s || !scope.drives(s) || s.generation !== generation || !LIVE_PHASES.includes(s.phase)) return false;
      try {
        tasks.stop(await controller.intent(s, { type: "stop", reason }, `stopped by the gateway: ${describeReason(reason)}`));
        return true;
      } catch (err) {
        log.info({ sandboxId: id, generation, err: (err as Error).message }, "expiry stop lost a race; looking again later");
        return false;
      }
    },
  });
  return {
    service,
    execs,
    activity,
    read,
    runtime,
    monitor,
    supervision,
    monitorMetrics: () => (monitor === null ? null : { ...monitor.metrics(), ...supervision.metrics() }),
    expectedLaunch: async (id) => {
      const s = await store.get(id);
      return generations.expectedLaunch(id, s && { phase: s.phase, generation: s.generation });
    },
    resume: async () => {
      await adoptAll({ store, scope, controller, generations, supervision, tasks, log });
      await sweeper.start();
    },
    serial,
    idle: () => serial.idle(),
    pending: () => {
      const m = monitor?.pending() ?? { checks: 0, timers: 0 };
      const sv = supervision.pending();
      return { tasks: serial.size, checks: m.checks + sv.checks, timers: m.timers + sv.timers + generations.timers() + sweeper.timers + execs.timers };
    },
    close: async () => {
      await sweeper.close();
      execs.close();
      service.close();
      tasks.close();
      await supervision.close();
      await monitor?.close();
      await runtime.close();
      await serial.idle();
      generations.closeAll();
      unsubscribe();
      offBoundary?.();
    },
  };
}
