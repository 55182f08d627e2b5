// The sandbox lifecycle state machine: the single source of truth for what may
// happen to a sandbox. Pure: it computes the next state, callers persist it with
// a compare-and-set on (id, generation, phase) so that two writers never both win.

import type { EventType, LifecycleEvent, Phase, SandboxReason, UserEvent } from "./phases.js";

export interface LifecycleState {
  phase: Phase;
  generation: number;
  /** Error: why it failed; Stopping and Stopped: why the gateway stopped it on its own (else null). */
  reason: SandboxReason | null;
}

export type Transition =
  | { ok: true; next: LifecycleState; terminal: boolean }
  | { ok: false; code: "not_allowed" | "stale_generation"; message: string };

/** Phases each event is accepted from. Anything not listed is refused. */
const ACCEPTED_FROM: Record<EventType, readonly Phase[]> = {
  // user intents
  start: ["Stopped", "Completed", "Error"],
  stop: ["Provisioning", "Ready", "Recovering", "Error"],
  delete: ["Provisioning", "Ready", "Recovering", "Stopping", "Stopped", "Completed", "Error", "Deleting"],
  // the gateway's observations
  ready: ["Provisioning"],
  provisionFailed: ["Provisioning"],
  // Recovering → Recovering records a new cause without leaving recovery.
  contactLost: ["Ready", "Recovering"],
  recovered: ["Recovering"],
  // A failure can only be observed while the runtime is meant to be alive; once
  // a stop or delete has been persisted, a late failure is dropped, never applied.
  failed: ["Provisioning", "Ready", "Recovering"],
  // From Provisioning too: a workload that runs to its end before it was ever ready.
  completed: ["Provisioning", "Ready", "Recovering"],
  stopped: ["Stopping"],
  deleted: ["Deleting"],
};

export function isAccepted(phase: Phase, event: EventType): boolean {
  return ACCEPTED_FROM[event].includes(phase);
}

/** Phases a user intent may be asked of, e.g. for help text and error messages. */
export function describeAllowed(event: UserEvent): string {
  return joinOr(ACCEPTED_FROM[event]);
}

/**
 * Phases in which a sandbox's policy may change (`policy set`, an approved proposal).
 * Recovering too: the supervisor's control session needs no Docker, so a tighter revision
 * reaches it during an outage, and recovery returns the sandbox to Ready only once the
 * supervisor has acked the newest revision (src/gateway/sandboxes/recovery.ts). Not while
 * Stopping or Deleting: that generation is on its way out.
 */
const POLICY_CHANGE_FROM: readonly Phase[] = ["Provisioning", "Ready", "Recovering", "Stopped", "Completed", "Error"];

/** Why the policy of a sandbox in `phase` may not change, or null when it may. */
export function policyChangeRefused(phase: Phase, name = "sandbox"): string | null {
  if (POLICY_CHANGE_FROM.includes(phase)) return null;
  return `cannot change the policy of sandbox "${name}": it is ${phase}; policy changes are allowed from ${joinOr(POLICY_CHANGE_FROM)}`;
}

function joinOr(items: readonly string[]): string {
  if (items.length === 1) return items[0]!;
  return `${items.slice(0, -1).join(", ")} or ${items[items.length - 1]!}`;
}

function nextPhase(state: LifecycleState, event: LifecycleEvent): LifecycleState {
  const keep = { generation: state.generation, reason: null };
  switch (event.type) {
    case "start":
      // A new generation of the same sandbox: same id, name and workspace.
      return { phase: "Provisioning", generation: state.generation + 1, reason: null };
    case "stop":
      return { ...keep, phase: "Stopping", reason: event.reason ?? null };
    case "delete":
      return { ...keep, phase: "Deleting" };
    case "ready":
    case "recovered":
      return { ...keep, phase: "Ready" };
    case "provisionFailed":
      return { ...keep, phase: "Error", reason: { code: "ProvisioningFailed", detail: event.detail } };
    case "contactLost":
      return { ...keep, phase: "Recovering" };
    case "failed":
      return { ...keep, phase: "Error", reason: event.reason };
    case "completed":
      return { ...keep, phase: "Completed" };
    case "stopped":
      // Stopped says why the stop was made (a TTL, idle time), as Stopping did.
      return { ...keep, phase: "Stopped", reason: state.reason };
    case "deleted":
      return { ...keep, phase: "Deleting" };
  }
}

/**
 * Compute the transition for `event`, computed by the caller for `generation`.
 * `name` only shapes the refusal message.
 */
export function transition(
  state: LifecycleState,
  event: LifecycleEvent,
  generation: number,
  name = "sandbox",
): Transition {
  if (generation !== state.generation) {
    return {
      ok: false,
      code: "stale_generation",
      message: `${event.type} for sandbox "${name}" was computed for generation ${generation}, but it is at generation ${state.generation}`,
    };
  }
  if (!isAccepted(state.phase, event.type)) {
    return {
      ok: false,
      code: "not_allowed",
      message: `cannot ${event.type} sandbox "${name}": it is ${state.phase}; ${event.type} is allowed from ${joinOr(ACCEPTED_FROM[event.type])}`,
    };
  }
  return { ok: true, next: nextPhase(state, event), terminal: event.type === "deleted" };
}
