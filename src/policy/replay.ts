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
  decision: "allow" | "deny";
  /** Why it was denied, when it was (lockdowns and unreachable names are skipped). */
  reason?: string;
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
  newlyDenied: ReplayLine[];
  newlyAllowed: ReplayLine[];
  unchanged: { allowed: number; denied: number };
  /** Records that say nothing about the policy (lockdowns, no policy loaded). */
  skipped: number;
}

const POLICY_SILENT = /^(lockdown_|policy_missing$)/;

export const describeRequest = (r: { protocol: string; host: string; port: number; method?: string; path?: string }): string =>
  r.protocol === "http" ? `${r.method ?? "GET"} http://${r.host}:${r.port}${r.path ?? "/"}` : `${r.protocol} ${r.host}:${r.port}`;

export function replay(records: readonly RecordedDecision[], candidate: Policy): ReplayResult {
  const denied = new Map<string, ReplayLine>();
  const allowed = new Map<string, ReplayLine>();
  const result: ReplayResult = { newlyDenied: [], newlyAllowed: [], unchanged: { allowed: 0, denied: 0 }, skipped: 0 };
  for (const r of records) {
    if (r.decision === "deny" && r.reason !== undefined && POLICY_SILENT.test(r.reason)) {
      result.skipped += r.count;
      continue;
    }
    const req: EgressRequest = { host: r.host, port: r.port, protocol: r.protocol, ...(r.protocol === "http" ? { method: r.method ?? "GET", path: r.path ?? "/" } : {}) };
    const d = evaluate(candidate, req);
    const now = d.allow ? "allow" : "deny";
    if (now === r.decision) {
      if (now === "allow") result.unchanged.allowed += r.count;
      else result.unchanged.denied += r.count;
      continue;
    }
    const key = describeRequest(req);
    const into = now === "deny" ? denied : allowed;
    const line = into.get(key);
    if (line) {
      line.count += r.count;
      if (r.time > line.lastSeen) line.lastSeen = r.time;
    } else into.set(key, { request: key, count: r.count, lastSeen: r.time, because: d.allow ? `rule ${d.rule}` : `${d.reason}${d.rule ? ` (rule ${d.rule})` : ""}` });
  }
  const byCount = (a: ReplayLine, b: ReplayLine): number => b.count - a.count || a.request.localeCompare(b.request);
  result.newlyDenied = [...denied.values()].sort(byCount);
  result.newlyAllowed = [...allowed.values()].sort(byCount);
  return result;
}
