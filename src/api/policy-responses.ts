// Answer schemas of a sandbox's policy (revisions, checks, reviews: diff, replay,
// suggest), of policy proposals and of the audit trail the reviews read. Split from
// responses.ts by resource; responses.ts re-exports everything here. Contract only: zod
// and pure vocabulary.

import { z } from "zod";
import { HTTP_METHODS, PROTOCOLS } from "../policy/index.js";
import { TLS_MODES } from "../policy/schema.js";
import { PROPOSAL_STATES } from "../policy/proposals.js";
import { AUDIT_DECISIONS } from "./schemas.js";
import { BoundaryHealth } from "./sandbox-responses.js";
import { Phase, Time, count, nullableString, seqCursor } from "./vocabulary.js";

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
