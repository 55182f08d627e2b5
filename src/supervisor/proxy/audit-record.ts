// The shape of the proxy's audit records: a decision on a target, what an exchange or a
// tunnel moved, a connection refused past the cap. Pure (the time and the revision are
// given); auditor.ts sends them.
import type { WouldDeny } from "../../policy/core.js";
import type { ClosedConnection } from "../../util/connection-bounds.js";
import type { Target } from "./target.js";
import type { Traffic } from "./traffic.js";
import { CONNECTION_LIMIT, type AuditEvent } from "./types.js";

/** What an audit event records: the decision, with the address when one was chosen. */
export type AuditedDecision =
  | { kind: "allow"; rule: string; address?: string; wouldDeny?: WouldDeny | undefined }
  | { kind: "deny"; reason: string; rule?: string; address?: string };

/** The record of a decision on `t`; `revision`: the policy's in force (none when no policy is loaded). */
export function decisionRecord(t: Target, o: AuditedDecision, revision: number | undefined, time: string): AuditEvent {
  const wouldDeny = o.kind === "allow" ? o.wouldDeny : undefined;
  const event: AuditEvent = {
    type: "egress",
    time,
    decision: wouldDeny !== undefined ? "would_deny" : o.kind,
    host: t.host,
    port: t.port,
    protocol: t.protocol,
  };
  if (o.kind === "deny") event.reason = o.reason;
  else if (wouldDeny !== undefined) event.reason = wouldDeny.reason;
  const rule = wouldDeny?.rule ?? o.rule;
  if (rule !== undefined) event.rule = rule;
  if (t.method !== "CONNECT") event.method = t.method;
  if (t.path !== undefined) event.path = t.path;
  if (t.via !== undefined) event.via = t.via;
  if (o.address !== undefined) event.address = o.address;
  if (revision !== undefined) event.revision = revision;
  return event;
}

/**
 * A request's record once its response is over: what it exchanged with the origin, its
 * status, and `upstream` (the reason) when the proxy answered for an origin it could not
 * reach or trust: allowed by the policy, yet not an exchange with the origin.
 */
export function exchangeRecord(event: AuditEvent, moved: { bytesOut: number; bytesIn: number }, durationMs: number, status: number, upstream?: string): AuditEvent {
  // Object.assign, not a spread with more properties: node 20's V8 takes a slow path there (~10 µs a record).
  const out = Object.assign({}, event, { bytesOut: moved.bytesOut, bytesIn: moved.bytesIn, durationMs, status });
  if (upstream !== undefined && event.reason === undefined) out.reason = upstream;
  return out;
}

/** A tunnel's (or WebSocket's) close record: its opening record with what it moved. */
export function closeRecord(event: AuditEvent, time: string, moved: Traffic): AuditEvent {
  return Object.assign({}, event, { time, activity: "close" as const }, moved);
}

/** A connection refused past the cap on the workload's open connections, at the proxy address it reached. */
export function connectionLimitRecord(at: ClosedConnection, time: string): AuditEvent {
  return { type: "egress", time, decision: "deny", reason: CONNECTION_LIMIT, host: at.localAddress ?? "", port: at.localPort ?? 0, protocol: "tcp" };
}
