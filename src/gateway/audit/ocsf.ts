// The audit trail in the shape of OCSF (Open Cybersecurity Schema Framework) 1.3 events,
// so a SIEM that reads OCSF takes Sandgate's records as they are: a request seen by the
// proxy (plain http, or inside a terminated https tunnel) is an HTTP Activity (4002); a
// tunnel or a refused connection is a Network Activity (4001). What OCSF has no field for
// (sandbox, generation, policy revision, the rule) is under `unmapped`, as OCSF says. A
// policy proposal and its decision (decision `policy`) is an API Activity (6003): who
// proposed or decided it is the actor. Pure.

import type { AuditRecord } from "../../store/contract.js";
import { VERSION } from "../../version.js";
import type { OcsfEvent } from "../../api/responses.js";

export const OCSF_VERSION = "1.3.0";

const CATEGORY_NETWORK = 4;
const CLASS_NETWORK_ACTIVITY = 4001;
const CLASS_HTTP_ACTIVITY = 4002;
const CATEGORY_APPLICATION = 6;
const CLASS_API_ACTIVITY = 6003;

/** API Activity activity_id per policy action: a proposal creates; an approval or a direct set updates the policy. */
const PROPOSAL_ACTIVITY: Record<string, [number, string]> = { proposed: [1, "Create"], approved: [3, "Update"], rejected: [99, "Other"], superseded: [99, "Other"], set: [3, "Update"] };

/** Network Activity activity_id. */
const NET = { open: 1, close: 2, refuse: 5, other: 99 } as const;
/** HTTP Activity activity_id by method (99: other). */
const HTTP_ACTIVITY: Record<string, number> = { CONNECT: 1, DELETE: 2, GET: 3, HEAD: 4, OPTIONS: 5, POST: 6, PUT: 7, TRACE: 8 };

/** action_id, disposition_id and severity_id per decision. */
const OUTCOME = {
  allow: { action: "Allowed", action_id: 1, disposition: "Allowed", disposition_id: 1, severity: "Informational", severity_id: 1, status: "Success", status_id: 1 },
  would_deny: { action: "Allowed", action_id: 1, disposition: "Logged", disposition_id: 17, severity: "Low", severity_id: 2, status: "Success", status_id: 1 },
  deny: { action: "Denied", action_id: 2, disposition: "Blocked", disposition_id: 2, severity: "Medium", severity_id: 3, status: "Failure", status_id: 2 },
} as const;

const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);
const num = (v: unknown): number | undefined => (typeof v === "number" && Number.isFinite(v) ? v : undefined);
/** Leaves out the keys whose value is undefined (OCSF omits what it does not know). */
type Defined<T> = { [K in keyof T as undefined extends T[K] ? never : K]: T[K] } & { [K in keyof T as undefined extends T[K] ? K : never]?: Exclude<T[K], undefined> };
const defined = <T extends Record<string, unknown>>(o: T): Defined<T> => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Defined<T>;

export interface OcsfContext {
  /** The sandbox's name, when known (its id is always in the record). */
  sandboxName?: string;
}

/** One audit record as an OCSF event (a plain JSON object: one line of the trail). */
export function toOcsf(r: AuditRecord, ctx: OcsfContext = {}): OcsfEvent {
  const e = r.event;
  const time = Date.parse(r.time);
  const metadata = { version: OCSF_VERSION, uid: String(r.seq), product: { name: "Sandgate", vendor_name: "Sandgate", version: VERSION }, log_name: "egress" };
  const sandbox = defined({ sandbox_id: r.sandboxId, sandbox_name: ctx.sandboxName, generation: r.generation, policy_revision: num(e.revision) });
  const base = { category_uid: CATEGORY_NETWORK, time: Number.isFinite(time) ? time : 0, count: r.count, metadata };

  if (r.decision === "policy") return proposalEvent(r, { ...base, category_uid: CATEGORY_APPLICATION, metadata: { ...metadata, log_name: "policy" } }, sandbox);

  if (r.decision === "dropped" || (r.decision !== "allow" && r.decision !== "deny" && r.decision !== "would_deny")) {
    return {
      ...base,
      class_uid: CLASS_NETWORK_ACTIVITY,
      activity_id: NET.other,
      activity_name: "Other",
      type_uid: CLASS_NETWORK_ACTIVITY * 100 + NET.other,
      severity_id: 2,
      severity: "Low",
      message: `${r.count} egress records dropped by the gateway's audit rate limit`,
      status_detail: str(e.reason) ?? r.decision,
      unmapped: { ...sandbox, decision: r.decision },
    };
  }

  const decision = r.decision;
  const host = str(e.host);
  const port = num(e.port);
  const protocol = str(e.protocol);
  const method = str(e.method);
  const path = str(e.path);
  const reason = str(e.reason);
  const rule = str(e.rule);
  const closing = e.activity === "close";
  // A request the proxy saw: http, or https with a method (terminated). A CONNECT or raw tunnel is not.
  const isRequest = method !== undefined && !closing;
  const outcome = OUTCOME[decision];
  const dst = defined({ hostname: host, ip: str(e.address), port });
  const traffic =
    num(e.bytesOut) === undefined && num(e.bytesIn) === undefined
      ? undefined
      : { bytes_out: num(e.bytesOut) ?? 0, bytes_in: num(e.bytesIn) ?? 0, bytes: (num(e.bytesOut) ?? 0) + (num(e.bytesIn) ?? 0) };
  const since = str(e.since) === undefined ? undefined : Date.parse(str(e.since)!);

  let classUid: number;
  let activityId: number;
  let activityName: string;
  if (isRequest) {
    classUid = CLASS_HTTP_ACTIVITY;
    activityId = HTTP_ACTIVITY[method] ?? 99;
    activityName = activityId === 99 ? "Other" : method.charAt(0) + method.slice(1).toLowerCase();
  } else {
    classUid = CLASS_NETWORK_ACTIVITY;
    [activityId, activityName] = closing ? [NET.close, "Close"] : decision === "deny" ? [NET.refuse, "Refuse"] : [NET.open, "Open"];
  }
  const target = isRequest ? `${method} ${protocol ?? "http"}://${host ?? "?"}:${port ?? "?"}${path ?? ""}` : `${protocol ?? "?"} ${host ?? "?"}:${port ?? "?"}`;
  const verb = closing ? "closed" : decision === "would_deny" ? "allowed by audit mode, would deny" : decision === "deny" ? "denied" : "allowed";

  return defined({
    ...base,
    class_uid: classUid,
    activity_id: activityId,
    activity_name: activityName,
    type_uid: classUid * 100 + activityId,
    ...outcome,
    message: `${target} ${verb}${reason !== undefined ? ` (${reason})` : ""}`,
    status_detail: reason,
    start_time: since !== undefined && Number.isFinite(since) ? since : undefined,
    duration: num(e.durationMs),
    dst_endpoint: dst,
    src_endpoint: defined({ uid: r.sandboxId, name: ctx.sandboxName }),
    connection_info: { protocol_name: "tcp", direction: "Outbound", direction_id: 2 },
    traffic,
    firewall_rule: rule === undefined ? undefined : { name: rule },
    http_request: isRequest ? { http_method: method, url: defined({ hostname: host, port, path, scheme: protocol }) } : undefined,
    http_response: num(e.status) === undefined ? undefined : { code: num(e.status) },
    unmapped: defined({ ...sandbox, decision, protocol, lockdown: str(e.lockdown) }),
  });
}

/** A policy record as an API Activity: a proposal's (proposed, approved, rejected, superseded) or a direct set. */
function proposalEvent(r: AuditRecord, base: { category_uid: number; time: number; count: number; metadata: OcsfEvent["metadata"] }, sandbox: Record<string, unknown>): OcsfEvent {
  const e = r.event;
  const action = str(e.action) ?? "?";
  const [activityId, activityName] = PROPOSAL_ACTIVITY[action] ?? [99, "Other"];
  const by = str(e.by);
  const failed = action === "rejected" || action === "superseded";
  const direct = str(e.type) === "policy_set";
  return defined({
    ...base,
    class_uid: CLASS_API_ACTIVITY,
    activity_id: activityId,
    activity_name: activityName,
    type_uid: CLASS_API_ACTIVITY * 100 + activityId,
    severity_id: action === "approved" ? 2 : 1,
    severity: action === "approved" ? "Low" : "Informational",
    status: failed ? "Failure" : "Success",
    status_id: failed ? 2 : 1,
    message: `${direct ? "policy" : `policy proposal ${str(e.proposal) ?? "?"}`} ${action}${by === undefined ? "" : ` by ${by}`}${num(e.revision) === undefined ? "" : `: revision ${num(e.revision)}`}`,
    status_detail: str(e.note) ?? str(e.reason),
    actor: by === undefined ? undefined : { user: { name: by } },
    api: { operation: direct ? "policy.set" : `policy.proposal.${action}`, service: { name: "sandgate" } },
    resources: [direct ? defined({ uid: num(e.revision) === undefined ? undefined : String(num(e.revision)), type: "policy_revision" }) : defined({ uid: str(e.proposal), type: "policy_proposal" })],
    unmapped: defined({ ...sandbox, decision: r.decision, action, base_revision: num(e.baseRevision), reason: str(e.reason), hash: str(e.hash) }),
  });
}
