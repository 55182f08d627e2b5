// The gateway side of monitoring: what a runtime monitor may read and do.
// Every write through it is a compare-and-set on (sandbox, generation, phase).

import type { ReadinessReport } from "./contract.js";
import type { LifecycleEvent, Phase } from "../lifecycle/phases.js";

/** What the monitor needs from the gateway; every write there is a compare-and-set. */
export interface MonitorSink {
  current(sandboxId: string): { phase: Phase; generation: number } | null;
  /** Apply an observation for `generation`; false when it was stale or lost the race. */
  apply(sandboxId: string, generation: number, event: LifecycleEvent, message: string): Promise<boolean>;
  /** Full readiness evidence: identities, supervisor boundary, workload exec probe. */
  verify(sandboxId: string, generation: number): Promise<ReadinessReport>;
  /** Fail closed: remove the generation's containers. */
  teardown(sandboxId: string, generation: number): Promise<void>;
  /** Sandboxes that failed while Docker was unreachable and still have containers to remove. */
  owedTeardowns(): { sandboxId: string; generation: number }[];
  /** When the sandbox entered Recovering (ms since epoch), carried over gateway restarts. */
  recoveringSince(sandboxId: string): number | undefined;
}
