// Replaying recorded egress decisions against a candidate policy: which requests it
// would newly deny, and which it would newly allow. What makes tightening a policy
// safe. Pure: records come from the audit trail; address checks (which need DNS at
// the time of the request) are not replayed.
import { evaluate, type EgressRequest } from "./evaluate.js";
import type { Protocol } from "./schema.js";
import type { Policy } from "./schema.js";

/** One recorded decision (an audit record: repeats counted). */
export interface RecordedDecision {
  host: string;
  port: number;
  protocol: Protocol;
  method?: string;
  path?: string;
  /** would_deny: let through by audit mode, which the reason says why an enforcing policy would refuse. */
  decision: "allow" | "deny" | "would_deny";
  /** Why it was denied (or would be), when it was (lockdowns and unreachable names are skipped). */
  reason?: string;
  /** The checked address it went to, when the record has one (e.g. let through by audit mode). */
  address?: string;
  count: number;
  time: string;
}

export interface ReplayLine {
  request: string;
  count: number;
  lastSeen: string;
  /** The candidate's rule (allow) or reason (deny). */
  because: string;
}

export interface ReplayResult {
  /** Went through (allowed, or let through by audit mode); the candidate refuses it. */
  newlyDenied: ReplayLine[];
  /** Was refused; the candidate lets it through. */
  newlyAllowed: ReplayLine[];
  /** What the candidate lets through only in audit mode (it would deny it enforcing): its would-deny records. */
  wouldDeny: ReplayLine[];
  unchanged: { allowed: number; denied: number };
  /** Records that say nothing about the policy (lockdowns, no policy loaded, connections past the proxy's cap). */
  skipped: number;
}

// connection_limit: the proxy's cap on open connections refused them before any request was read.
const POLICY_SILENT = /^(lockdown_|policy_missing$|connection_limit$)/;

export const describeRequest = (r: { protocol: string; host: string; port: number; method?: string; path?: string }): string =>
  r.protocol === "http" ? `${r.method ?? "GET"} http://${r.host}:${r.port}${r.path ?? "/"}` : `${r.protocol} ${r.host}:${r.port}`;

export function replay(records: readonly RecordedDecision[], candidate: Policy): ReplayResult {
  const denied = new Map<string, ReplayLine>();
  const allowed = new Map<string, ReplayLine>();
  const flagged = new Map<string, ReplayLine>();
  const unchanged = { allowed: 0, denied: 0 };
  let skipped = 0;
  const add = (into: Map<string, ReplayLine>, key: string, r: RecordedDecision, because: string): void => {
    const line = into.get(key);
    if (line) {
      line.count += r.count;
      if (r.time > line.lastSeen) line.lastSeen = r.time;
    } else into.set(key, { request: key, count: r.count, lastSeen: r.time, because });
  };
  const why = (reason: string, rule: string | undefined): string => `${reason}${rule ? ` (rule ${rule})` : ""}`;
  for (const r of records) {
    if (r.decision === "deny" && r.reason !== undefined && POLICY_SILENT.test(r.reason)) {
      skipped += r.count;
      continue;
    }
    const req: EgressRequest = { host: r.host, port: r.port, protocol: r.protocol, ...(r.protocol === "http" ? { method: r.method ?? "GET", path: r.path ?? "/" } : {}) };
    const d = evaluate(candidate, req);
    const key = describeRequest(req);
    // What the traffic saw: a would-deny went through.
    const went = r.decision !== "deny";
    if (d.allow && d.wouldDeny !== undefined) add(flagged, key, r, `would deny: ${why(d.wouldDeny.reason, d.wouldDeny.rule)}`);
    if (d.allow === went) {
      if (went) unchanged.allowed += r.count;
      else unchanged.denied += r.count;
      continue;
    }
    if (d.allow) add(allowed, key, r, d.wouldDeny === undefined ? `rule ${d.rule}` : "audit mode");
    else add(denied, key, r, why(d.reason, d.rule));
  }
  const byCount = (a: ReplayLine, b: ReplayLine): number => b.count - a.count || a.request.localeCompare(b.request);
  return {
    newlyDenied: [...denied.values()].sort(byCount),
    newlyAllowed: [...allowed.values()].sort(byCount),
    wouldDeny: [...flagged.values()].sort(byCount),
    unchanged,
    skipped,
  };
}
