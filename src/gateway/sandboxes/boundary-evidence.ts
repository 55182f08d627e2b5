// The gateway's own evidence about a generation's boundary: its control session (the
// runtime's evidence, identities, health and the exec probe, is the monitor's). Read by
// launches (readiness) and by supervision (re-verification after an outage).

import type { ReadinessCheck } from "../../driver/contract.js";
import type { BoundaryHealth } from "../control/boundary.js";
import type { ControlPlane } from "../control/control-plane.js";

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

/** The gateway's own evidence about a generation's boundary, as supervision reads it. */
export interface BoundaryEvidence {
  /** Its control session holds the boundary now (a readiness check named "control session"). */
  boundary(sandboxId: string, generation: number): ReadinessCheck;
  /**
   * The id of its authenticated control session, null when there is none (or the runtime has
   * no supervisors). One session keeps its id while it stays up; a reconnect is a new session
   * with a new id, so the same id before and after a runtime outage proves it never dropped.
   */
  liveSession(sandboxId: string, generation: number): string | null;
}

/** That evidence, read from the control plane (none: a runtime without supervisors). */
export function controlEvidence(control: ControlPlane | null): BoundaryEvidence {
  return { boundary: (id, generation) => sessionCheck(control, id, generation), liveSession: (id, generation) => liveSession(control, id, generation) };
}
