// The vocabulary of a sandbox's life: phases, the reasons an Error carries, and
// the events that may move a sandbox between phases. Pure data, no I/O.

export const PHASES = [
  "Provisioning",
  "Ready",
  "Recovering",
  "Stopping",
  "Stopped",
  "Completed",
  "Error",
  "Deleting",
] as const;
export type Phase = (typeof PHASES)[number];

/** Phases in which the current generation's containers exist (or are being made). */
export const LIVE_PHASES: readonly Phase[] = ["Provisioning", "Ready", "Recovering"];

/** Why a sandbox is in Error. Codes are stable API; `detail` is for humans. */
export type ErrorReason =
  | { code: "ProvisioningFailed"; detail: string }
  | { code: "SupervisorExited"; exitCode: number; detail?: string }
  | { code: "SupervisorReplaced"; detail: string }
  | { code: "SupervisorMissing"; detail?: string }
  | { code: "WorkloadExited"; exitCode: number; detail?: string }
  | { code: "WorkloadReplaced"; detail: string }
  | { code: "WorkloadMissing"; detail?: string }
  | { code: "BoundaryUnhealthy"; detail: string }
  | { code: "RuntimeUnavailable"; detail: string };
export type ErrorCode = ErrorReason["code"];

/**
 * Why the gateway stopped a sandbox on its own (carried by Stopping and Stopped): its
 * --ttl ran out, or it was idle (no exec, connect or egress) for its --idle-stop.
 */
export type StopReason = { code: "TtlExpired"; detail: string } | { code: "IdleTimeout"; detail: string };
export type StopCode = StopReason["code"];

/** What a sandbox's `reason` can hold: why it is in Error, or why the gateway stopped it. */
export type SandboxReason = ErrorReason | StopReason;

/** One line a human can read, e.g. `SupervisorExited (exit code 137)`. */
export function describeReason(reason: SandboxReason): string {
  const code = "exitCode" in reason ? `${reason.code} (exit code ${reason.exitCode})` : reason.code;
  return reason.detail ? `${code}: ${reason.detail}` : code;
}

/**
 * Events are either user intents (start, stop, delete) or observations made by
 * the gateway about the runtime. Every event names the generation it was
 * computed for: the machine rejects one aimed at another generation.
 */
export type LifecycleEvent =
  | { type: "start" }
  | { type: "stop"; reason?: StopReason }
  | { type: "delete" }
  | { type: "ready" }
  | { type: "provisionFailed"; detail: string }
  | { type: "contactLost"; cause: string }
  | { type: "recovered" }
  | { type: "failed"; reason: Exclude<ErrorReason, { code: "ProvisioningFailed" }> }
  | { type: "completed" }
  | { type: "stopped" }
  | { type: "deleted" };
export type EventType = LifecycleEvent["type"];

export const EVENT_TYPES: readonly EventType[] = [
  "start",
  "stop",
  "delete",
  "ready",
  "provisionFailed",
  "contactLost",
  "recovered",
  "failed",
  "completed",
  "stopped",
  "deleted",
];

/** Events a user may ask for through the API; the rest are the gateway's own. */
export const USER_EVENTS = ["start", "stop", "delete"] as const;
export type UserEvent = (typeof USER_EVENTS)[number];
