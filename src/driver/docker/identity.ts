// Whether a container is the instance a sandbox generation recorded: the one
// definition, used by readiness, monitoring and recovery (docs/recovery.md,
// "Same instance"). Pure.
//
// Same instance = same container id, the labels of our launch (gateway, sandbox,
// generation, role, nonce), and the same State.StartedAt string; while running,
// also the same Pid. Start times are compared for equality only, never ordered,
// and RestartCount is never used. A container that is restarting, or that was
// never started, is not the instance we started.

import type { ContainerIdentity, Role, Watched } from "../contract.js";
import type { ContainerInspect } from "./engine/types.js";
import { LABEL } from "./objects.js";

/** Docker's zero time: a container that was created but never started. */
export const NEVER_STARTED = "0001-01-01T00:00:00Z";

export const isNeverStarted = (startedAt: string | undefined): boolean =>
  !startedAt || startedAt === NEVER_STARTED || startedAt.startsWith("0001-01-01");

/** The instance we trust: recorded identity plus the labels its launch gave it. */
export interface ExpectedInstance {
  id: string;
  startedAt: string;
  /** Recorded pid; 0 or absent when not known. */
  pid?: number;
  /** Labels that must match exactly. */
  labels: Record<string, string>;
}

export type InstanceCheck =
  /** Exactly the recorded instance, running. */
  | { kind: "running" }
  /** Exactly the recorded instance, no longer running. */
  | { kind: "exited"; exitCode: number; finishedAt: string }
  /** Another instance (or another container) than the one recorded. */
  | { kind: "other"; detail: string }
  /** Created and never started, while the record was never started either: nothing proven yet. */
  | { kind: "unstarted" }
  /** The answer has no usable container state: proves nothing. */
  | { kind: "unusable"; detail: string };

export function expectedInstance(gatewayId: string, w: Pick<Watched, "sandboxId" | "generation" | "record">, role: Role): ExpectedInstance {
  const id: ContainerIdentity = w.record[role];
  return {
    id: id.id,
    startedAt: id.startedAt,
    pid: id.pid,
    labels: {
      [LABEL.gateway]: gatewayId,
      [LABEL.sandbox]: w.sandboxId,
      [LABEL.generation]: String(w.generation),
      [LABEL.role]: role,
      [LABEL.nonce]: w.record.nonce,
    },
  };
}

/** The recorded identity of an inspected container (at start). */
export function identityOf(c: ContainerInspect): ContainerIdentity {
  return { id: c.Id, name: c.Name.replace(/^\//, ""), imageId: c.Image, startedAt: c.State.StartedAt, pid: c.State.Pid };
}

const short = (id: string): string => id.slice(0, 12);

/** Compare an inspect answer with the expected instance. */
export function checkInstance(body: unknown, expected: ExpectedInstance): InstanceCheck {
  const c = body as Partial<ContainerInspect> | undefined;
  const state = c?.State;
  if (!c || typeof c !== "object" || typeof c.Id !== "string" || !state || typeof state.Running !== "boolean" || typeof state.StartedAt !== "string") {
    return { kind: "unusable", detail: "inspect answered without a usable container state" };
  }
  if (c.Id !== expected.id) return { kind: "other", detail: `container id is ${short(c.Id)}, not ${short(expected.id)}` };
  const labels = c.Config?.Labels ?? {};
  for (const [k, v] of Object.entries(expected.labels)) {
    if (labels[k] !== v) return { kind: "other", detail: `label ${k} is ${JSON.stringify(labels[k] ?? null)}, not ${JSON.stringify(v)}` };
  }
  if (isNeverStarted(state.StartedAt) || state.Status === "created") {
    // Not an exit. Our instance was started, so an unstarted one is not ours.
    return isNeverStarted(expected.startedAt) ? { kind: "unstarted" } : { kind: "other", detail: "container was re-created and never started" };
  }
  if (state.StartedAt !== expected.startedAt) {
    return { kind: "other", detail: `started at ${state.StartedAt}, not at the recorded ${expected.startedAt}` };
  }
  // Restarting: our process died and the daemon is bringing up another one, whatever Running says.
  if (state.Restarting === true || state.Status === "restarting") return { kind: "other", detail: "container is restarting" };
  if (state.Running) {
    if (expected.pid !== undefined && expected.pid > 0 && state.Pid !== expected.pid) {
      return { kind: "other", detail: `pid is ${String(state.Pid)}, not the recorded ${expected.pid}` };
    }
    return { kind: "running" };
  }
  return { kind: "exited", exitCode: typeof state.ExitCode === "number" ? state.ExitCode : -1, finishedAt: state.FinishedAt ?? "" };
}

/** Readiness form: null when the container is the recorded instance and running, else why not. */
export function notRunningInstance(body: unknown, expected: ExpectedInstance): string | null {
  const r = checkInstance(body, expected);
  switch (r.kind) {
    case "running":
      return null;
    case "exited":
      return `not running (exited with code ${r.exitCode})`;
    case "unstarted":
      return "not started";
    case "other":
    case "unusable":
      return r.detail;
  }
}
