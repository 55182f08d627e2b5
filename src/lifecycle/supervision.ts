// How a generation is supervised through a runtime outage, as one pure decision: the facts
// its runtime monitor proved (container verdicts, a lost channel, probe results), the
// generation's Recovering record and the clock → the next step. The generation's handle
// holds the record and carries the step out (src/gateway/sandboxes/supervision.ts); the
// monitor only reports facts. Every rule of a daemon restart is here: a lost channel never
// ends a sandbox, the boundary is judged before the workload, a boundary loss waits for the
// inspect that tells an exit from a live supervisor, the two deadlines, and when an unbroken
// control session stands in for the exec probe (docs/recovery.md;
// ../shared/reference/recovery-design-rules.md). Runtime-neutral: no Docker here.

import type { ErrorReason, Phase } from "./phases.js";

/** What one inspect of a container instance proved. Only Exited, InstanceChanged and Gone may end a sandbox. */
export type Verdict =
  | { kind: "Exited"; code: number; finishedAt: string; instance: { id: string; startedAt: string } }
  | { kind: "InstanceChanged"; detail: string }
  | { kind: "Gone"; detail: string }
  | { kind: "ChannelLost"; cause: string }
  /** Running, and exactly the expected instance. */
  | { kind: "Alive" };

export type VerdictKind = Verdict["kind"];

export interface RoleVerdicts {
  supervisor: Verdict;
  workload: Verdict;
}

/** Only these may end a sandbox. */
export function isTerminal(v: Verdict): v is Extract<Verdict, { kind: "Exited" | "InstanceChanged" | "Gone" }> {
  return v.kind === "Exited" || v.kind === "InstanceChanged" || v.kind === "Gone";
}

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

/** What the verdicts about a sandbox's two containers mean for it in `phase`. */
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

/** What was lost: the runtime (Docker stopped answering) or the boundary (the gateway's own evidence). */
export type LossCause = "runtime" | "boundary";

/** A generation's Recovering record: held by its handle, gone with it. */
export interface Recovery {
  /** When it entered Recovering (ms since the epoch). */
  since: number;
  cause: LossCause;
  /** The latest reason it is not yet re-verified, for the failure's detail at the deadline. */
  problem?: string;
  /** Runtime losses from Ready only: the id of the control session that was up just before. */
  session?: string;
}

/**
 * A generation that just went Ready → Recovering. The control session up while it was
 * still Ready is kept for a runtime loss only: if that very session is still up once both
 * instances check out unchanged, it stands in for the exec probe.
 */
export function entered(now: number, cause: LossCause, problem: string, session: string | null): Recovery {
  return { since: now, cause, problem, ...(cause === "runtime" && session !== null ? { session } : {}) };
}

/**
 * A generation found Recovering without a record of its own (adopted at gateway start):
 * its deadline runs from when it entered Recovering, and no session stands in for the probe.
 */
export function adopted(recoveringSince: number | undefined, now: number, cause: LossCause = "runtime", problem?: string): Recovery {
  return { since: recoveringSince ?? now, cause, ...(problem === undefined ? {} : { problem }) };
}

export interface Deadlines {
  /** How long a generation may stay Recovering without the runtime. */
  recoveryMs: number;
  /** How long it may stay Recovering after its boundary was lost, while the runtime answers. */
  boundaryMs: number;
}

/**
 * The failure owed at `now`, or null while there is time. A lost boundary has its own
 * (shorter) deadline while the runtime answers; without the runtime the runtime deadline
 * applies whatever the cause.
 */
export function overdue(r: Recovery, connected: boolean, now: number, d: Deadlines): Extract<ErrorReason, { code: "BoundaryUnhealthy" | "RuntimeUnavailable" }> | null {
  const deadlineMs = r.cause === "boundary" && connected ? d.boundaryMs : d.recoveryMs;
  if (now - r.since <= deadlineMs) return null;
  const seconds = Math.round(deadlineMs / 1000);
  return connected
    ? { code: "BoundaryUnhealthy", detail: `boundary not re-verified within ${seconds} s${r.problem ? ` (${r.problem})` : ""}` }
    : { code: "RuntimeUnavailable", detail: `Docker unreachable for more than ${seconds} s` };
}

/**
 * The control session that proves the workload unchanged without an exec probe: the one
 * up when the runtime was lost, if it is still that same session now; else null (the exec
 * probe runs). A boundary loss or an adopted generation has no such session.
 */
export function unbrokenSession(r: Recovery | null, liveSession: string | null): string | null {
  if (r?.session === undefined) return null;
  return liveSession === r.session ? r.session : null;
}

/** Whether a Recovering generation is due another check while the runtime answers. */
export function recheckDue(lastCheck: number, now: number, intervalMs: number): boolean {
  return now - lastCheck >= intervalMs;
}

/**
 * A boundary loss the gateway reported while the runtime answers: "reported" until an
 * inspect has been read, "confirming" while the supervisor is given a moment to be reaped
 * (a killed supervisor drops its session before Docker reports its exit).
 */
export interface BoundaryPending {
  problem: string;
  stage: "reported" | "confirming";
}

export type Step =
  | { do: "fail"; reason: FailureReason }
  | { do: "complete" }
  /** Ready → Recovering (nothing is stopped). */
  | { do: "lose"; cause: LossCause; problem: string }
  /** Re-verify: the runtime's probes, with the exec probe unless an unbroken session stands in. */
  | { do: "verify" }
  /** Inspect again after the attribution grace, the pending boundary loss kept as `boundary`. */
  | { do: "recheck"; boundary: BoundaryPending }
  | { do: "nothing" };

/**
 * The next step for a generation in `phase` whose two containers were just inspected, given
 * a boundary loss pending for it. The pending loss is consumed by every inspect: it acts
 * only when the inspect itself decides nothing (both instances alive, still Ready).
 */
export function onVerdicts(phase: Phase, v: RoleVerdicts, boundary: BoundaryPending | null): Step {
  const d = decide(phase, v);
  switch (d.action) {
    case "fail":
      return { do: "fail", reason: d.reason };
    case "complete":
      return { do: "complete" };
    case "lost":
      return { do: "lose", cause: "runtime", problem: d.cause };
    case "verify":
      return { do: "verify" };
    case "none":
      if (boundary === null) return { do: "nothing" };
      // First inspect after the report: look again after the grace. Still alive then: the
      // supervisor runs but cannot be shown to hold its boundary.
      if (boundary.stage === "reported") return { do: "recheck", boundary: { problem: boundary.problem, stage: "confirming" } };
      return { do: "lose", cause: "boundary", problem: `boundary unhealthy: ${boundary.problem}` };
  }
}
