// What the verdicts about a sandbox's two containers mean for the sandbox. Pure.

import type { ErrorReason, Phase } from "../../../lifecycle/phases.js";
import type { Verdict } from "./classify.js";

export type FailureReason = Exclude<ErrorReason, { code: "ProvisioningFailed" | "BoundaryUnhealthy" | "RuntimeUnavailable" }>;

export type Decision =
  /** Proven failure: Error with this reason, then stop the workload. */
  | { action: "fail"; reason: FailureReason }
  /** The workload exited 0. */
  | { action: "complete" }
  /** Contact lost: Recovering, nothing is stopped. */
  | { action: "lost"; cause: string }
  /** Both instances alive: a Recovering sandbox must now prove its boundary. */
  | { action: "verify" }
  | { action: "none" };

export interface RoleVerdicts {
  supervisor: Verdict;
  workload: Verdict;
}

function failureOf(role: "supervisor" | "workload", v: Verdict): FailureReason | null {
  if (v.kind === "Exited") {
    return role === "supervisor"
      ? { code: "SupervisorExited", exitCode: v.code, detail: `finished at ${v.finishedAt}` }
      : { code: "WorkloadExited", exitCode: v.code, detail: `finished at ${v.finishedAt}` };
  }
  if (v.kind === "InstanceChanged") return { code: role === "supervisor" ? "SupervisorReplaced" : "WorkloadReplaced", detail: v.detail };
  if (v.kind === "Gone") return { code: role === "supervisor" ? "SupervisorMissing" : "WorkloadMissing", detail: v.detail };
  return null;
}

export function decide(phase: Phase, v: RoleVerdicts): Decision {
  // The boundary first: without its supervisor a workload must not live on.
  const sup = failureOf("supervisor", v.supervisor);
  if (sup) return { action: "fail", reason: sup };
  if (v.workload.kind === "Exited" && v.workload.code === 0) return { action: "complete" };
  const work = failureOf("workload", v.workload);
  if (work) return { action: "fail", reason: work };
  if (v.supervisor.kind === "ChannelLost") return { action: "lost", cause: v.supervisor.cause };
  if (v.workload.kind === "ChannelLost") return { action: "lost", cause: v.workload.cause };
  return phase === "Recovering" ? { action: "verify" } : { action: "none" };
}
