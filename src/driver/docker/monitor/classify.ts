// Failure classification: what a Docker answer proves about one container
// instance. Pure. Only Exited, InstanceChanged and Gone may end a sandbox;
// anything that does not prove a fact about the instance is ChannelLost.
// See docs/recovery.md and ../shared/reference/recovery-design-rules.md.

import type { EngineResult } from "../engine/result.js";
import type { ContainerInspect, WaitResponse } from "../engine/types.js";
import { describe } from "../engine/result.js";

/** The instance we trust: id + StartedAt (+ pid), compared for equality only. */
export interface ExpectedInstance {
  id: string;
  startedAt: string;
  pid?: number;
  /** Labels that must match exactly (generation, nonce, role, sandbox). */
  labels?: Record<string, string>;
}

export type Verdict =
  | { kind: "Exited"; code: number; finishedAt: string; instance: { id: string; startedAt: string } }
  | { kind: "InstanceChanged"; detail: string }
  | { kind: "Gone"; detail: string }
  | { kind: "ChannelLost"; cause: string }
  /** Running, and exactly the expected instance. */
  | { kind: "Alive" };

export type VerdictKind = Verdict["kind"];

/** Docker's zero time: a container that was created but never started. */
export const NEVER_STARTED = "0001-01-01T00:00:00Z";

const isNeverStarted = (startedAt: string | undefined): boolean =>
  !startedAt || startedAt === NEVER_STARTED || startedAt.startsWith("0001-01-01");

/**
 * Classify an inspect of the expected container. A 404 is Gone; any failure to
 * get a well-formed answer is ChannelLost; a different instance (id, start time,
 * pid, labels) is InstanceChanged; same instance not running is Exited.
 */
export function classifyInspect(r: EngineResult<ContainerInspect>, expected: ExpectedInstance): Verdict {
  if (r.kind === "transport") return { kind: "ChannelLost", cause: describe(r) };
  if (r.kind === "docker") {
    if (r.status === 404) return { kind: "Gone", detail: `container ${expected.id.slice(0, 12)} no longer exists` };
    // 5xx and anything else unexpected prove nothing about the container.
    return { kind: "ChannelLost", cause: describe(r) };
  }
  const c = r.body as Partial<ContainerInspect> | undefined;
  const state = c?.State;
  if (!c || typeof c !== "object" || typeof c.Id !== "string" || !state || typeof state.Running !== "boolean" || typeof state.StartedAt !== "string") {
    return { kind: "ChannelLost", cause: "inspect answered without a usable container state" };
  }
  if (c.Id !== expected.id) return { kind: "InstanceChanged", detail: `container id is ${c.Id.slice(0, 12)}, not ${expected.id.slice(0, 12)}` };
  const labels = c.Config?.Labels ?? {};
  for (const [k, v] of Object.entries(expected.labels ?? {})) {
    if (labels[k] !== v) return { kind: "InstanceChanged", detail: `label ${k} is ${JSON.stringify(labels[k] ?? null)}, not ${JSON.stringify(v)}` };
  }
  if (isNeverStarted(state.StartedAt) || state.Status === "created") {
    // Not an exit. Our instance was started, so an unstarted one is not ours.
    return isNeverStarted(expected.startedAt)
      ? { kind: "ChannelLost", cause: "container not started yet" }
      : { kind: "InstanceChanged", detail: "container was re-created and never started" };
  }
  if (state.StartedAt !== expected.startedAt) {
    return { kind: "InstanceChanged", detail: `started at ${state.StartedAt}, not at the recorded ${expected.startedAt}` };
  }
  // Restarting: our process died and the daemon is bringing up another one, whatever Running says.
  if (state.Restarting === true || state.Status === "restarting") return { kind: "InstanceChanged", detail: "container is restarting" };
  if (state.Running) {
    if (expected.pid !== undefined && expected.pid > 0 && state.Pid !== expected.pid) {
      return { kind: "InstanceChanged", detail: `pid is ${state.Pid}, not the recorded ${expected.pid}` };
    }
    return { kind: "Alive" };
  }
  return { kind: "Exited", code: typeof state.ExitCode === "number" ? state.ExitCode : -1, finishedAt: state.FinishedAt ?? "", instance: { id: c.Id, startedAt: state.StartedAt } };
}

/**
 * Does a wait result claim an exit? Only HTTP 200 with JSON, Error null and
 * StatusCode >= 0 does; anything else (cut stream, partial or empty body,
 * StatusCode -1, an Error, a 5xx) is ChannelLost. A claim is never enough on
 * its own: the caller must confirm it with classifyWait(wait, inspect).
 */
export function waitClaimsExit(r: EngineResult<WaitResponse>): { claims: true; code: number } | { claims: false; cause: string } {
  if (r.kind !== "ok") return { claims: false, cause: describe(r) };
  if (r.status !== 200) return { claims: false, cause: `wait answered HTTP ${r.status}` };
  const body = r.body as Partial<WaitResponse> | undefined;
  if (!body || typeof body !== "object") return { claims: false, cause: "wait answered an empty or non-JSON body" };
  if (typeof body.StatusCode !== "number" || !Number.isInteger(body.StatusCode)) return { claims: false, cause: "wait body has no StatusCode" };
  if (body.Error !== null && body.Error !== undefined) return { claims: false, cause: `wait reported an error: ${body.Error.Message}` };
  if (body.StatusCode < 0) return { claims: false, cause: `wait answered StatusCode ${body.StatusCode}` };
  return { claims: true, code: body.StatusCode };
}

/**
 * A wait result plus the inspect of the same instance made after it. The exit
 * code comes from inspect (the daemon's record), never from the wait alone; a
 * wait that claims an exit while inspect shows the instance running is ignored.
 */
export function classifyWait(wait: EngineResult<WaitResponse>, inspect: EngineResult<ContainerInspect> | undefined, expected: ExpectedInstance): Verdict {
  const claim = waitClaimsExit(wait);
  if (!claim.claims) return { kind: "ChannelLost", cause: claim.cause };
  if (!inspect) return { kind: "ChannelLost", cause: "wait claimed an exit that was not confirmed by inspect" };
  return classifyInspect(inspect, expected);
}

/** Only these may end a sandbox. */
export function isTerminal(v: Verdict): v is Extract<Verdict, { kind: "Exited" | "InstanceChanged" | "Gone" }> {
  return v.kind === "Exited" || v.kind === "InstanceChanged" || v.kind === "Gone";
}
