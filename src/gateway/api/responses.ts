// Response schemas of the gateway API: the one source of the JSON shapes it answers with.
// The OpenAPI document (openapi.ts) is generated from them, the API tests validate every
// JSON answer against them (test/support/openapi-check.ts), and the TypeScript types of
// the API's own views are inferred from them. Objects are strict: a field the gateway
// sends is a field documented here. Contract only: imports nothing but pure vocabulary.

import { z } from "zod";
import { PHASES } from "../../lifecycle/phases.js";
import { HTTP_METHODS, PROTOCOLS } from "../../policy/index.js";
import { TLS_MODES } from "../../policy/schema.js";
import { PROPOSAL_STATES } from "../../policy/proposals.js";
import { FileStatView, TransferCounts } from "../../files/api.js";
import { AUDIT_DECISIONS } from "./schemas.js";
import { API_ERRORS, type ApiErrorCode } from "../../util/errors.js";

// ---- vocabulary ----

/** An RFC 3339 time, as the gateway writes them (UTC, `Z`). */
export const Time = z.iso.datetime({ offset: true });
const count = z.number().int().min(0);
const nullableString = z.string().nullable();

/** Every error code, with the HTTP status it is answered with: the one list's (src/util/errors.ts ERRORS). Codes are stable API. */
export { API_ERRORS, type ApiErrorCode };
const API_ERROR_CODES = Object.keys(API_ERRORS) as [ApiErrorCode, ...ApiErrorCode[]];

/** Every error answer: a stable code and one line for people. */
export const ApiErrorBody = z
  .strictObject({ error: z.strictObject({ code: z.enum(API_ERROR_CODES), message: z.string() }) })
  .describe("An error: `code` is stable (one per HTTP status family, see the status), `message` one line naming the value and what is allowed.");
export type ApiErrorBody = z.infer<typeof ApiErrorBody>;

// ---- sandboxes ----

const Phase = z.enum(PHASES);

/** Why a sandbox is in Error, or why the gateway stopped it (src/lifecycle/phases.ts SandboxReason). */
export const SandboxReason = z.union([
  z.strictObject({ code: z.enum(["ProvisioningFailed", "SupervisorReplaced", "WorkloadReplaced", "BoundaryUnhealthy", "RuntimeUnavailable", "TtlExpired", "IdleTimeout"]), detail: z.string() }),
  z.strictObject({ code: z.enum(["SupervisorExited", "WorkloadExited"]), exitCode: z.number().int(), detail: z.string().optional() }),
  z.strictObject({ code: z.enum(["SupervisorMissing", "WorkloadMissing"]), detail: z.string().optional() }),
]);

export const SandboxSpecView = z.strictObject({
  image: z.string().optional().describe("absent: the locally built default workload image"),
  command: z.array(z.string()).optional().describe("absent: an idle process that keeps the sandbox up"),
  env: z.record(z.string(), z.string()),
  resources: z.strictObject({ memoryMb: z.number(), cpus: z.number(), pids: z.number().int() }),
  diskBytes: count.optional().describe("the workspace's size; absent only for sandboxes created before workspaces had one"),
  workdir: z.string().optional(),
  ttlSeconds: z.number().min(0).optional().describe("each generation is stopped this long after its launch (reason TtlExpired)"),
  idleStopSeconds: z.number().min(0).optional().describe("stopped after no exec, connect or egress for this long (reason IdleTimeout)"),
});

const ContainerIdentityView = z.strictObject({ id: z.string(), name: z.string(), imageId: z.string(), startedAt: z.string(), pid: z.number().int() });

export const RuntimeView = z
  .strictObject({ generation: z.number().int(), nonce: z.string(), workload: ContainerIdentityView, supervisor: ContainerIdentityView, proxyUrl: z.string() })
  .describe("The containers of the generation last launched.");

export const BoundaryHealth = z
  .strictObject({
    sandboxId: z.string(),
    session: z.enum(["up", "down"]),
    /** Generation of the live session, null when down. */
    generation: z.number().int().nullable(),
    /** Last sign of life: a heartbeat or a WebSocket ping of the session. */
    lastHeartbeatAt: Time.nullable(),
    /** Revision the supervisor acknowledged / reports enforcing in this session; null before its first ack. */
    enforcedRevision: z.number().int().nullable(),
    desiredRevision: z.number().int().nullable(),
    proxy: z.enum(["listening", "not_listening"]).nullable(),
    lockdown: z.boolean().nullable(),
    healthy: z.boolean(),
    /** Why not healthy; null when healthy. */
    problem: nullableString,
  })
  .describe("The supervisor's control session and what it enforces; null where the runtime has no supervisors.");
export type BoundaryHealth = z.infer<typeof BoundaryHealth>;

export const DiskView = z
  .strictObject({
    limitBytes: count,
    /** Null when the workspace is not mounted (e.g. after a host restart, until the next start). */
    usedBytes: count.nullable(),
    /** What the filesystem holds at most (the limit less its own metadata); null when not mounted. */
    capacityBytes: count.nullable(),
  })
  .describe("The workspace (/sandbox): its limit, and what it uses while mounted.");
export type DiskView = z.infer<typeof DiskView>;

/** What --ttl and --idle-stop look at, for `sandbox get`. */
export const ExpiryView = z.strictObject({
  /** When the current generation's TTL runs out, or null. */
  ttlDeadline: Time.nullable(),
  /** The last exec, connect or egress seen (or the launch), or null when none is known. */
  lastActivityAt: Time.nullable(),
  /** Exec and connect sessions open now. */
  openSessions: count,
});
export type ExpiryView = z.infer<typeof ExpiryView>;

const sandboxHead = {
  id: z.string(),
  name: z.string(),
  phase: Phase,
  generation: z.number().int(),
  reason: SandboxReason.nullable(),
  reasonText: nullableString.describe("the reason as one line for people"),
  labels: z.record(z.string(), z.string()),
};

export const SandboxView = z
  .strictObject({
    ...sandboxHead,
    spec: SandboxSpecView,
    runtime: RuntimeView.nullable(),
    boundary: BoundaryHealth.nullable(),
    disk: DiskView.nullable(),
    createdAt: Time,
    updatedAt: Time,
  })
  .describe("A sandbox: its phase and why, what it was created with, its containers, boundary and workspace.");
export type SandboxView = z.infer<typeof SandboxView>;

/** `sandbox get`: the view with its workspace usage and expiry. */
export const SandboxDetailView = SandboxView.extend({ expiry: ExpiryView });
export type SandboxDetailView = z.infer<typeof SandboxDetailView>;

export const SandboxSummaryView = z
  .strictObject({
    ...sandboxHead,
    workload: nullableString.describe("the live generation's workload container id; null once it has ended"),
    supervisor: nullableString.describe("the live generation's supervisor container id; null once it has ended"),
    createdAt: Time,
    updatedAt: Time,
  })
  .describe("A list row (`view=lean`): what `sandbox list` shows.");
export type SandboxSummaryView = z.infer<typeof SandboxSummaryView>;

const next = nullableString.describe("the cursor of the following page (pass it as `after`); null on the last page");
export const SandboxPage = z.union([
  z.strictObject({ sandboxes: z.array(SandboxView), next }),
  z.strictObject({ sandboxes: z.array(SandboxSummaryView), next }),
]);

export const EventView = z
  .strictObject({
    seq: z.number().int(),
    sandboxId: z.string(),
    sandboxName: z.string(),
    generation: z.number().int(),
    kind: z.enum(["phase", "deleted", "info"]),
    oldPhase: Phase.nullable(),
    newPhase: Phase.nullable(),
    reason: SandboxReason.nullable(),
    reasonText: nullableString,
    message: nullableString,
    data: z.unknown().describe("kind-specific detail, or null"),
    time: Time,
  })
  .describe("One entry of a sandbox's event log.");
export type EventView = z.infer<typeof EventView>;

const seqCursor = z.number().int().nullable().describe("the sequence number to pass as `after` for the following page; null when this page reached the end");
export const EventsPage = z.strictObject({ events: z.array(EventView), next: seqCursor });

// ---- policies ----

const Protocol = z.enum(PROTOCOLS);
const auditOnly = z.literal("audit").optional();
const HttpRuleView = z.strictObject({ methods: z.array(z.enum(HTTP_METHODS)).optional(), paths: z.array(z.string()).optional() });
const CredentialView = z.union([
  z.strictObject({ secret: z.string(), paths: z.array(z.string()).optional(), body: z.strictObject({ maxBytes: count }).optional() }),
  z.strictObject({ header: z.string(), value: z.string(), paths: z.array(z.string()).optional() }),
]);
const EndpointView = z.strictObject({
  host: z.string(),
  ports: z.array(z.number().int()),
  protocol: Protocol,
  rules: z.array(HttpRuleView).optional(),
  tls: z.enum(TLS_MODES).optional(),
  allowPrivate: z.array(z.string()),
  credentials: z.array(CredentialView).optional(),
});
export const NetworkRuleView = z
  .strictObject({ name: z.string(), endpoints: z.array(EndpointView), enforcement: auditOnly })
  .describe("A network rule in normal form (docs/policy.md).");
const DenyEntryView = z.strictObject({ name: z.string().optional(), host: z.string(), ports: z.array(z.number().int()).optional(), protocol: Protocol.optional(), enforcement: auditOnly });

export const PolicyView = z
  .strictObject({
    version: z.literal(1),
    network: z.strictObject({ rules: z.array(NetworkRuleView), deny: z.array(DenyEntryView), enforcement: auditOnly }),
    filesystem: z.strictObject({ readOnly: z.array(z.string()), readWrite: z.array(z.string()) }),
    process: z.strictObject({ user: z.string().optional(), limits: z.strictObject({ memoryMb: z.number().optional(), cpus: z.number().optional(), pids: z.number().int().optional() }) }),
  })
  .describe("A policy in normal form, as the gateway enforces it (docs/policy.md).");

export const PolicyRevisionView = z.strictObject({
  sandbox: z.string(),
  revision: z.number().int(),
  hash: z.string(),
  createdAt: Time,
  policy: PolicyView,
  source: nullableString.describe("the YAML text the revision was given as (comments kept); null when it came as JSON"),
  boundary: BoundaryHealth.nullable(),
});

export const SetPolicyResult = z.strictObject({
  revision: z.number().int(),
  pushed: z.boolean().describe("sent to a live supervisor session"),
  phase: Phase.describe(
    "the sandbox's phase when the revision was accepted. Recovering: the supervisor enforces it once it acknowledges it (its control session needs no Docker), and the sandbox is Ready again only after that",
  ),
  enforced: z.boolean().nullable().describe("with `wait`: whether the supervisor acknowledged it in time; null without"),
  connectionsClosed: count.nullable().describe("with `wait`: open connections the revision no longer allows, closed; null when unknown"),
  boundary: BoundaryHealth.nullable(),
});

const DenyReason = z.enum(["no_matching_rule", "explicit_deny", "method_not_allowed", "path_not_allowed", "method_override_not_allowed"]);
export const CheckPolicyResult = z.strictObject({
  revision: z.number().int(),
  request: z.strictObject({ host: z.string(), port: z.number().int(), protocol: Protocol, method: z.string().optional(), path: z.string().optional(), methodOverrides: z.array(z.string()).optional() }),
  decision: z.union([
    z.strictObject({
      allow: z.literal(true),
      rule: z.string(),
      allowPrivate: z.array(z.string()),
      terminate: z.literal(true).optional(),
      wouldDeny: z.strictObject({ reason: DenyReason, rule: z.string().optional(), policyWide: z.literal(true).optional() }).optional(),
    }),
    z.strictObject({ allow: z.literal(false), reason: DenyReason, rule: z.string().optional() }),
  ]),
});

export const PolicyDiffResult = z.strictObject({
  revision: z.number().int(),
  changes: z.array(
    z.strictObject({
      kind: z.enum(["rule added", "rule removed", "rule changed", "deny added", "deny removed", "enforcement changed", "fixed section changed", "section changed"]),
      name: z.string(),
      lines: z.array(z.string()),
    }),
  ),
});

export const AuditWindow = z
  .strictObject({
    /** Records read (after `since`), of at most MAX_REPLAY_RECORDS. */
    records: count,
    /** Requests they stand for (repeats counted). */
    requests: count,
    from: Time.nullable(),
    to: Time.nullable(),
    /** True when older records exist that were not read. */
    truncated: z.boolean(),
  })
  .describe("The audit records a review read.");
export type AuditWindow = z.infer<typeof AuditWindow>;

const ReplayLine = z.strictObject({ request: z.string(), count, lastSeen: Time, because: z.string() });
export const PolicyReplayResult = z.strictObject({
  revision: z.number().int(),
  window: AuditWindow,
  newlyDenied: z.array(ReplayLine),
  newlyAllowed: z.array(ReplayLine),
  wouldDeny: z.array(ReplayLine),
  unchanged: z.strictObject({ allowed: count, denied: count }),
  skipped: count,
});

export const PolicySuggestResult = z.strictObject({
  revision: z.number().int(),
  window: AuditWindow,
  rules: z.array(NetworkRuleView),
  covers: count.describe("denied requests the rules cover (repeats counted), refused name lookups included"),
  fromLookups: z.array(z.string()).describe("names whose rule comes only from a refused lookup (dns_denied): suggested as https on 443, a guess to check"),
  privateHosts: z.array(z.string()).describe("hosts whose rule allows (allowPrivate) the private address the audit trail saw them at: review"),
  yaml: z.string().describe("the sandbox's policy with the rules added: a whole document for policy validate and policy set; empty when none"),
  rulesYaml: z.string().describe("the rules alone, as YAML to paste under network.rules; empty when none"),
});

// ---- policy proposals ----

export const ProposalView = z.strictObject({
  id: z.string(),
  sandbox: z.string(),
  state: z.enum(PROPOSAL_STATES),
  stale: z.boolean().describe("pending, but the active revision is no longer its base: approving it would be refused"),
  baseRevision: z.number().int(),
  revision: z.number().int().nullable().describe("the revision its approval made"),
  proposedBy: z.string(),
  reason: nullableString,
  createdAt: Time,
  decidedAt: Time.nullable(),
  decidedBy: nullableString,
  decisionNote: nullableString.describe("why it was rejected or superseded"),
  hash: z.string(),
});
export type ProposalView = z.infer<typeof ProposalView>;
export const ProposalList = z.strictObject({ proposals: z.array(ProposalView) });
export const ProposalDetail = ProposalView.extend({
  policy: z.union([z.string(), z.record(z.string(), z.unknown())]).describe("the policy as proposed: YAML text, or an object"),
  activeRevision: z.number().int(),
  diff: PolicyDiffResult,
  replay: PolicyReplayResult,
});
export const ApproveResult = z.strictObject({ proposal: ProposalView, ...SetPolicyResult.shape });

// ---- audit ----

export const AuditRecordView = z
  .strictObject({
    seq: z.number().int(),
    sandboxId: z.string(),
    generation: z.number().int(),
    time: Time,
    decision: z.string().describe(`one of ${AUDIT_DECISIONS.join(", ")} (dropped: records the rate limit dropped, counted)`),
    count,
    event: z.record(z.string(), z.unknown()).describe("the supervisor's record: destination, rule, reason, bytes each way (docs/policy.md)"),
  })
  .describe("One egress decision (repeats aggregated into `count`).");

export const OcsfEvent = z
  .looseObject({ class_uid: z.number().int(), category_uid: z.number().int(), activity_id: z.number().int(), type_uid: z.number().int(), time: z.number(), count: z.number().int(), metadata: z.looseObject({ version: z.string() }) })
  .describe("An OCSF 1.3 event: HTTP Activity (4002) or Network Activity (4001) for egress, API Activity (6003) for a policy proposal and its decision; sandbox, generation and rule under `unmapped`.");
export type OcsfEvent = z.infer<typeof OcsfEvent>;

export const AuditPage = z.union([
  z.strictObject({ audit: z.array(AuditRecordView), next: seqCursor }),
  z.strictObject({ audit: z.array(OcsfEvent), next: seqCursor }),
]);

// ---- secrets ----

export const SecretInfo = z.strictObject({ name: z.string(), version: z.number().int(), bytes: count, createdAt: Time, updatedAt: Time });
export type SecretInfo = z.infer<typeof SecretInfo>;

/** One place a secret is bound, in one sandbox's active policy. */
export const BoundIn = z.strictObject({
  sandbox: z.string(),
  rule: z.string(),
  host: z.string(),
  ports: z.array(z.number().int()),
  paths: z.array(z.string()).nullable(),
  form: z.enum(["placeholder", "header"]),
});
export type BoundIn = z.infer<typeof BoundIn>;

export const Delivery = z.strictObject({
  /** Running sandboxes it was sent to. */
  pushed: z.array(z.string()),
  /** With a wait: those whose supervisor acked it in time, and those that did not. */
  acknowledged: z.array(z.string()).nullable(),
  pending: z.array(z.string()).nullable(),
});
export type Delivery = z.infer<typeof Delivery>;

const usedBy = z.array(z.string()).describe("the sandboxes whose active policy references it");
export const SetSecretResult = SecretInfo.pick({ name: true, version: true, bytes: true }).extend({ usedBy, bindings: z.array(BoundIn), ...Delivery.shape });
export const SecretList = z.strictObject({ secrets: z.array(SecretInfo.extend({ usedBy, bindings: z.array(BoundIn) })) });
export const DeleteSecretResult = z.strictObject({ name: z.string(), deleted: z.literal(true), usedBy, pushed: z.array(z.string()) });

// ---- stats ----

export const EgressTotalsView = z.strictObject({
  bytesOut: count,
  bytesIn: count,
  allowed: count.describe("let through: allowed, and would_deny (audit mode)"),
  denied: count,
  wouldDeny: count.describe("the part of `allowed` that enforcing would have denied"),
  dropped: count.describe("decisions the audit rate limit dropped: not in the counts above"),
  since: Time.nullable().describe("the oldest record summed (null: none)"),
});

export const StatsView = z
  .strictObject({
    id: z.string(),
    name: z.string(),
    phase: Phase,
    generation: z.number().int(),
    /** When the runtime's sample was taken (as the gateway asked for it). */
    time: Time,
    /** Percent of one CPU (200 = two cores busy); null when not measured. */
    cpuPercent: z.number().nullable(),
    memory: z.strictObject({ usedBytes: count, limitBytes: count.nullable() }).nullable(),
    pids: z.strictObject({ current: count, limit: count.nullable() }).nullable(),
    disk: DiskView.nullable(),
    egress: EgressTotalsView,
    dropped: z
      .strictObject({ icmp: count, other: count, forward: count })
      .nullable()
      .describe("packets of the workload its supervisor's namespace dropped since it started (ICMP, other non-TCP/UDP protocols, anything to be forwarded); null where the runtime has no transparent path"),
    /** Why the runtime's figures are missing, when they are (a page row whose sample failed). */
    error: nullableString,
  })
  .describe("What a Ready sandbox uses now.");
export type StatsView = z.infer<typeof StatsView>;

export const StatsPage = z.strictObject({ stats: z.array(StatsView), next });

// ---- execs ----

export const DETACHED_STATES = ["starting", "running", "exited", "unknown"] as const;
export type DetachedState = (typeof DETACHED_STATES)[number];

export const DetachedExecView = z
  .strictObject({
    id: z.string(),
    sandbox: z.string(),
    generation: z.number().int(),
    cmd: z.array(z.string()),
    /** exited: exitCode is the command's (124 when its --timeout ended it); unknown: `error` says why. */
    state: z.enum(DETACHED_STATES),
    exitCode: z.number().int().nullable(),
    timedOut: z.boolean(),
    startedAt: Time,
    endedAt: Time.nullable(),
    error: nullableString,
  })
  .describe("A detached exec (`exec --detach`) and how it ended.");
export type DetachedExecView = z.infer<typeof DetachedExecView>;

export const ExecList = z.strictObject({ execs: z.array(DetachedExecView) });

// ---- files ----

export const UploadResult = TransferCounts.extend({ ok: z.literal(true) }).describe("What an upload wrote.");
export { FileStatView };

// ---- the gateway ----

const loose = z.looseObject({});
/** One listener's connection bounds (src/util/connection-bounds.ts). */
export const ConnectionStatsView = z
  .strictObject({
    open: z.strictObject({ unauthenticated: count, authenticated: count }),
    limits: z.strictObject({ headerTimeoutMs: count, idleTimeoutMs: count, maxAuthenticated: count, maxUnauthenticated: count }),
    accepted: count,
    closed: z.strictObject({ header_timeout: count, handshake_timeout: count, idle: count, evicted: count, refused_full: count }).describe("connections these bounds closed, by reason"),
  })
  .describe("A listener's connections: open by pool (not yet authenticated, authenticated), its limits, accepted since start, and what its bounds closed.");
/** An object of counters whose fields are the runtime's own (ComputeDriver's monitor). */
const counters = z.custom<object>((v) => typeof v === "object" && v !== null && !Array.isArray(v), "expected an object").meta({ type: "object" });
export const StatusView = z
  .strictObject({
    version: z.string(),
    pid: z.number().int(),
    startedAt: Time,
    uptimeSeconds: count,
    driver: z.string(),
    supervisorLimits: z.strictObject({ cpus: z.number(), memoryMb: z.number() }).optional(),
    originCa: z
      .strictObject({ path: z.string(), certificates: count, subjects: z.array(z.string()) })
      .nullable()
      .describe("the CAs supervisors trust for origins besides the system roots (gateway start --origin-ca, SANDGATE_ORIGIN_CA), as read at start; a sandbox takes them when it starts"),
    runtime: z.strictObject({ ready: z.boolean(), problem: nullableString }),
    api: z
      .looseObject({ listeners: z.array(z.string()), connections: z.array(ConnectionStatsView.extend({ url: z.string() })) })
      .describe("where the API listens (the home's socket first; https:// ones serve the home's api-cert.pem), and each listener's connections (open by pool, limits, closed by reason)"),
    supervisorEndpoint: z
      .looseObject({ url: nullableString, connections: ConnectionStatsView.optional() })
      .nullable()
      .describe("where supervisors reach the gateway, its session counters and its connections (an established session is an authenticated connection); null where the runtime has no supervisors"),
    sandboxes: z.record(z.string(), count).describe("sandboxes by phase"),
    monitor: counters.nullable().describe("the runtime monitor's counters"),
    audit: loose.describe("the audit trail's counters and limits"),
    watch: z.strictObject({ streams: count, overflows: count }),
    portForward: z.strictObject({ open: count, refusedAtLimit: count }),
    logs: loose.nullable().describe("log streams open, opened, refused, and their limits"),
    execs: z.strictObject({ detachedHeld: count, detachedPerSandbox: count, timeoutTimers: count }),
    files: loose.describe("file transfers active, and their limits"),
    proposals: z.strictObject({ limits: z.strictObject({ pending: count, kept: count }) }).describe("the bounds of policy proposals per sandbox"),
  })
  .describe("The gateway's version, readiness and counters (`gateway status`). Nested counters may gain fields.");
export type StatusView = z.infer<typeof StatusView>;

/** Named in the document's components (#/components/schemas/NAME) and referenced wherever used. */
export const SCHEMA_COMPONENTS = {
  ApiError: ApiErrorBody,
  Sandbox: SandboxView,
  SandboxSummary: SandboxSummaryView,
  SandboxReason,
  SandboxSpec: SandboxSpecView,
  Runtime: RuntimeView,
  BoundaryHealth,
  Disk: DiskView,
  Event: EventView,
  Policy: PolicyView,
  NetworkRule: NetworkRuleView,
  PolicyDiff: PolicyDiffResult,
  PolicyReplay: PolicyReplayResult,
  PolicyProposal: ProposalView,
  AuditWindow,
  AuditRecord: AuditRecordView,
  OcsfEvent,
  SecretBinding: BoundIn,
  Stats: StatsView,
  DetachedExec: DetachedExecView,
  FileStat: FileStatView,
  ConnectionStats: ConnectionStatsView,
} as const;
