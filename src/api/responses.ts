// Response schemas of the gateway API: the one source of the JSON shapes it answers with.
// The OpenAPI document (openapi.ts) is generated from them, the API tests validate every
// JSON answer against them (test/support/openapi-check.ts), and the TypeScript types of
// the API's own views are inferred from them. Objects are strict: a field the gateway
// sends is a field documented here. Contract only: imports nothing but pure vocabulary.
//
// Split by resource: the shared words and the error body (vocabulary.ts), sandboxes and
// their events (sandbox-responses.ts), policies, proposals and audit
// (policy-responses.ts); here secrets, stats, execs, files and the gateway's status, and
// the document's named components. Everything is re-exported from here: importers (the
// gateway, the SDK's types, the tests) name this one module.

import { z } from "zod";
import { FileStatView, TransferCounts } from "../files/api.js";
import { BoundaryHealth, DiskView, EventView, RuntimeView, SandboxReason, SandboxSpecView, SandboxSummaryView, SandboxView } from "./sandbox-responses.js";
import { AuditRecordView, AuditWindow, NetworkRuleView, OcsfEvent, PolicyDiffResult, PolicyReplayResult, PolicyView, ProposalView } from "./policy-responses.js";
import { ApiErrorBody, Phase, Time, count, next, nullableString } from "./vocabulary.js";

export { API_ERRORS, ApiErrorBody, Time, type ApiErrorCode } from "./vocabulary.js";
export * from "./sandbox-responses.js";
export * from "./policy-responses.js";

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
    settings: z.record(z.string(), z.string()).optional().describe("every setting as resolved at start (flag, else environment, else default), by name, as docs/configuration.md lists them"),
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

export const HostView = z
  .strictObject({
    host: z.string(),
    self: z.boolean().describe("the host of the gateway that answered"),
    driven: z.boolean().describe("a gateway drives the host now (it holds the host's lease)"),
    lease: z
      .strictObject({ gatewayId: z.string(), pid: z.number().int(), epoch: z.number().int(), since: z.string() })
      .nullable()
      .describe("who took the host's lease last and at which epoch (null: nobody has, or the store is the embedded one)"),
    live: count.describe("its sandboxes in a live phase (Provisioning, Ready, Recovering)"),
    total: count.describe("all its sandboxes"),
  })
  .describe("A host of the fleet: its lease and its sandboxes.");
export type HostView = z.infer<typeof HostView>;

export const FleetView = z
  .strictObject({
    store: z.enum(["sqlite", "postgres"]).describe("sqlite: the embedded store, one host; postgres: a fleet's"),
    host: z.string().describe("the host of the gateway that answered (--host-name)"),
    hosts: z.array(HostView).describe("every host with a lease or a sandbox, by name"),
  })
  .describe("The fleet's hosts as the store knows them (`sandgate fleet status`, docs/fleet.md).");
export type FleetView = z.infer<typeof FleetView>;

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
