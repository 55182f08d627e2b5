// Request schemas of the gateway API, and the one place that turns a schema
// failure into a message naming the field and the problem.

import { z } from "zod";
import { PROCESS_LIMITS } from "../policy/index.js";
import { BY_MAX, PROPOSAL_STATES, REASON_MAX } from "../policy/proposals.js";
import { PHASES } from "../lifecycle/phases.js";
import { checkSandboxName } from "../lifecycle/spec.js";
import { LABELS_MAX, checkLabels, parseLabelPair } from "../lifecycle/labels.js";

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * `{"key": "value"}`, checked as given: z.record would silently drop a key such as
 * "__proto__" instead of refusing it.
 */
const Labels = z
  .custom<Record<string, string>>((v) => typeof v === "object" && v !== null && !Array.isArray(v), "must be an object of KEY: VALUE strings")
  .superRefine((v, ctx) => {
    const bad = checkLabels(v);
    if (bad) ctx.addIssue({ code: "custom", message: bad });
  })
  .meta({ type: "object", additionalProperties: { type: "string" }, description: "labels: at most 64 KEY: VALUE strings (README, `--label`)" });

/** `?label=key=value`, repeatable (every one must match); at most LABELS_MAX of them. */
const LabelSelectors = z
  .union([z.string(), z.array(z.string())])
  .transform((v, ctx) => {
    const all = typeof v === "string" ? [v] : v;
    if (all.length > LABELS_MAX) {
      ctx.addIssue({ code: "custom", message: `${all.length} label selectors; at most ${LABELS_MAX}` });
      return z.NEVER;
    }
    const pairs: (readonly [string, string])[] = [];
    for (const raw of all) {
      const p = parseLabelPair(raw);
      if (!p.ok) {
        ctx.addIssue({ code: "custom", message: `${p.error} (a selector is label=KEY=VALUE)` });
        return z.NEVER;
      }
      pairs.push(p.pair);
    }
    return pairs;
  })
  .describe("KEY=VALUE, repeatable: every one must match");

export const CreateSandboxBody = z
  .object({
    /** 1-63 lowercase letters, digits and '-', starting and ending with a letter or digit. */
    name: z.string().describe("1-63 characters: lowercase letters, digits and '-', starting and ending with a letter or digit"),
    /** The workload image (default: the gateway's workload image). */
    image: z.string().min(1).max(512).optional(),
    /** The workload's main process (default: an idle process). */
    command: z.array(z.string().min(1)).min(1).max(256).optional(),
    /** The workload's environment. */
    env: z
      .record(z.string().regex(ENV_NAME, "environment variable names are letters, digits and '_'"), z.string().max(32_768))
      .optional(),
    // Its size is checked in bytes by the route (413, POLICY_MAX_BYTES).
    /** The network policy: YAML text, or the parsed object (docs/policy.md); default: deny all egress. */
    policy: z.union([z.string(), z.record(z.string(), z.unknown())]).optional().describe("a policy (docs/policy.md) as YAML text or as an object; at most 1 MiB"),
    resources: z
      .object({
        memoryMb: z.number().int().min(PROCESS_LIMITS.memoryMb.min).max(PROCESS_LIMITS.memoryMb.max).optional(),
        cpus: z.number().min(PROCESS_LIMITS.cpus.min).max(PROCESS_LIMITS.cpus.max).optional(),
        pids: z.number().int().min(PROCESS_LIMITS.pids.min).max(PROCESS_LIMITS.pids.max).optional(),
      })
      .strict()
      .optional(),
    /** The workspace's size: "512M", "10G", "1GiB" or bytes (default 10G). */
    disk: z.union([z.string().max(64), z.number()]).optional().describe('the workspace size: "512M", "10G", "1GiB" or bytes; 16 MiB-16 TiB, default 10G'),
    labels: Labels.optional(),
    // --ttl and --idle-stop as seconds or "30m", "2h" (src/gateway/sandboxes/create-options.ts).
    /** The workload's working directory, exec's default (default /sandbox). */
    workdir: z.string().max(8192).optional().describe("the workload's working directory (absolute; default /sandbox)"),
    /** Stop each run this long after it began: seconds, or "90s", "30m", "8h", "7d". */
    ttl: z.union([z.string().max(64), z.number()]).optional().describe('stop each run this long after it began: seconds, or "90s", "30m", "8h", "7d"'),
    /** Stop after no exec, connect or egress for this long. */
    idleStop: z.union([z.string().max(64), z.number()]).optional().describe("stop after no exec, connect or egress for this long (as ttl)"),
    /** The host to run it on, in a fleet (default: the host of the gateway asked). */
    host: z.string().max(64).optional().describe("in a fleet (docs/fleet.md): the host to run it on, one a gateway drives now; default: the host of the gateway asked"),
  })
  .strict();
export type CreateSandboxBody = z.infer<typeof CreateSandboxBody>;

export const SetPolicyBody = z
  .object({
    policy: z.union([z.string(), z.record(z.string(), z.unknown())]),
    /** Seconds to wait for the supervisor to acknowledge the revision as enforced. */
    wait: z.number().min(0).max(600).optional().describe("seconds to wait for the supervisor to enforce it"),
  })
  .strict();

/** A candidate policy to review against the active one; `since` narrows the audit window replayed. */
export const ReviewPolicyBody = z
  .object({ policy: z.union([z.string().max(1 << 20), z.record(z.string(), z.unknown())]), since: z.string().max(64).optional() })
  .strict();

// ---- policy proposals (an agent proposes, a person decides) ----

export const ProposeBody = z
  .object({
    policy: z.union([z.string(), z.record(z.string(), z.unknown())]),
    // Characters, checked exactly by the service; the schema only stops the absurd.
    reason: z.string().max(REASON_MAX * 4).optional().describe(`why, shown to the person deciding (at most ${REASON_MAX} characters)`),
    by: z.string().max(BY_MAX * 4).optional().describe(`who proposes, free text ("mcp", "cli:alice"; at most ${BY_MAX} characters); default "api"`),
  })
  .strict();

export const ApproveBody = z
  .object({
    by: z.string().max(BY_MAX * 4).optional(),
    wait: z.number().min(0).max(600).optional().describe("seconds to wait for the supervisor to enforce the new revision (as PUT policy)"),
  })
  .strict();

export const RejectBody = z.object({ by: z.string().max(BY_MAX * 4).optional(), reason: z.string().max(REASON_MAX * 4).optional() }).strict();

export const ProposalListQuery = z.object({ state: z.enum(PROPOSAL_STATES).optional() }).strict();
export const ProposalShowQuery = z.object({ since: z.string().max(64).optional().describe("an RFC 3339 time: replay only audit records from then on") }).strict();

export const SuggestQuery = z.object({ since: z.string().max(64).optional().describe("an RFC 3339 time: only audit records from then on") }).strict();

export const CheckPolicyBody = z.object({ url: z.string().min(1).max(8192), method: z.string().regex(/^[A-Za-z]+$/).optional() }).strict();

const seq = z.coerce.number().int().min(0).max(Number.MAX_SAFE_INTEGER);
const page = z.coerce.number().int().min(1).max(10_000);

/** A window of a log: after/before a sequence number, a page size, or the last N. */
export const EventsQuery = z.object({ after: seq.optional(), before: seq.optional(), limit: page.optional(), tail: page.optional() }).strict();

/**
 * The decisions an audit record can carry; `dropped` marks records the rate limit dropped,
 * `policy` a policy proposal or its decision (src/gateway/sandboxes/policy-proposals.ts).
 */
export const AUDIT_DECISIONS = ["allow", "deny", "would_deny", "dropped", "policy"] as const;

/** A window of the audit trail; `since` an RFC 3339 time; `format=ocsf` gives OCSF-shaped records. */
export const AuditQuery = z
  .object({
    after: seq.optional(),
    before: seq.optional(),
    limit: page.optional(),
    tail: page.optional(),
    decision: z.enum(AUDIT_DECISIONS).optional(),
    since: z.string().max(64).optional().describe("an RFC 3339 time"),
    format: z.enum(["ocsf"]).optional(),
  })
  .strict();

/** A query's whole number in [min, max]; the message names the value it got (z.coerce would say only "NaN"). */
export function wholeNumber(min: number, max: number) {
  return z.string().transform((v, ctx) => {
    const n = /^\d{1,16}$/.test(v) ? Number(v) : Number.NaN;
    if (n >= min && n <= max) return n;
    ctx.addIssue({ code: "custom", message: `must be a whole number from ${min} to ${max}; got ${JSON.stringify(v)}` });
    return z.NEVER;
  });
}

/** Sandboxes per page of GET /v1/sandboxes at most, and without `limit` (all of them up to this many). */
export const LIST_PAGE_MAX = 1000;

/**
 * A page of the sandbox list, in name order: `after` is the previous page's `next`
 * (a name: a deleted sandbox's still works), `view=lean` the list row without
 * spec, runtime, boundary or disk.
 */
export const ListQuery = z
  .object({
    limit: wholeNumber(1, LIST_PAGE_MAX).optional().describe(`sandboxes per page, 1-${LIST_PAGE_MAX} (default ${LIST_PAGE_MAX})`),
    after: z
      .string()
      .superRefine((v, ctx) => {
        const bad = checkSandboxName(v);
        if (bad) ctx.addIssue({ code: "custom", message: `the cursor is the \`next\` of a page, a sandbox name: ${bad}` });
      })
      .optional()
      .describe("the previous page's `next`"),
    phase: z.enum(PHASES).optional(),
    label: LabelSelectors.optional(),
    view: z.enum(["full", "lean"]).optional(),
  })
  .strict();

/** Preconditions of DELETE /v1/sandboxes/:name: `generation` the sandbox must still be at. */
export const DeleteQuery = z.object({ generation: wholeNumber(1, Number.MAX_SAFE_INTEGER).optional().describe("only if the sandbox is still at this generation") }).strict();

export const WatchQuery = z.object({ sandbox: z.string().min(1).optional().describe("only this sandbox (name or id)"), after: seq.optional().describe("resume after this event sequence number") }).strict();

/** An exec's command line: at most this many arguments and bytes (UTF-8, all arguments together). */
export const EXEC_ARGV_MAX_ARGS = 256;
export const EXEC_ARGV_MAX_BYTES = 8192;

/** Null when the command line is within the limits, else the message saying how far over it is. */
export function checkExecArgv(cmd: readonly string[]): string | null {
  const bytes = cmd.reduce((n, a) => n + Buffer.byteLength(a), 0);
  if (cmd.length <= EXEC_ARGV_MAX_ARGS && bytes <= EXEC_ARGV_MAX_BYTES) return null;
  return `cmd: the command line is ${bytes} bytes in ${cmd.length} arguments; the limit is ${EXEC_ARGV_MAX_BYTES} bytes and ${EXEC_ARGV_MAX_ARGS} arguments`;
}

/** The exec WebSocket's query (GET /v1/sandboxes/:name/exec); src/gateway/api/exec-options.ts checks the values. */
export const ExecQueryFull = z
  .object({
    cmd: z.union([z.string(), z.array(z.string())]).optional(),
    tty: z.enum(["0", "1"]).optional(),
    cols: z.coerce.number().int().min(1).max(1000).optional(),
    rows: z.coerce.number().int().min(1).max(1000).optional(),
    env: z.union([z.string(), z.array(z.string())]).optional(),
    workdir: z.string().max(8192).optional(),
    user: z.string().max(64).optional(),
    timeout: z.string().max(64).optional(),
  })
  .strict();

/** POST /v1/sandboxes/:name/execs: a detached command. */
export const DetachedExecBody = z
  .object({
    cmd: z.array(z.string()).min(1),
    env: z.record(z.string(), z.string()).optional(),
    workdir: z.string().max(8192).optional(),
    user: z.string().max(64).optional(),
    timeout: z.union([z.string().max(64), z.number()]).optional(),
  })
  .strict();

/** The port-forward WebSocket's query; src/gateway/api/port-forward-relay.ts parsePortQuery checks it (its own message names the value). */
export const PortForwardQuery = z.object({ port: z.string().regex(/^\d{1,5}$/).describe("a TCP port from 1 to 65535 inside the workload") }).strict();

/** Rows per page of GET /v1/stats at most, and without `limit`: each row is a runtime sample. */
export const STATS_PAGE_MAX = 100;

export const StatsQuery = z.object({ limit: wholeNumber(1, STATS_PAGE_MAX).optional(), after: ListQuery.shape.after }).strict();

/** Largest secret value accepted. */
export const MAX_SECRET_BYTES = 64 * 1024;
/** Longest wait for the supervisors' acks, in seconds. */
export const MAX_SECRET_WAIT_S = 300;

export const SetSecretBody = z
  .object({
    /** The value as text (UTF-8)... */
    value: z.string().min(1).max(MAX_SECRET_BYTES).optional(),
    /** ...or as base64, for binary values. */
    valueBase64: z.string().min(1).max(Math.ceil(MAX_SECRET_BYTES / 3) * 4).optional(),
    /** Seconds to wait for every running sandbox that uses it to acknowledge the new value. */
    wait: z.number({ error: `wait: expected seconds 0-${String(MAX_SECRET_WAIT_S)}` }).min(0, { error: `wait: expected seconds 0-${String(MAX_SECRET_WAIT_S)}` }).max(MAX_SECRET_WAIT_S, { error: `wait: expected seconds 0-${String(MAX_SECRET_WAIT_S)}` }).optional(),
  })
  .strict()
  .refine((b) => (b.value === undefined) !== (b.valueBase64 === undefined), { error: "give exactly one of value and valueBase64" });

export const LOG_TAIL_MAX = 1_000_000;

const flag = z.enum(["0", "1", "true", "false"]);

export const LogsQuery = z
  .object({
    follow: flag.optional(),
    tail: z
      .string()
      .regex(/^\d{1,7}$/, `must be a whole number from 0 to ${LOG_TAIL_MAX}`)
      .transform(Number)
      .refine((n) => n <= LOG_TAIL_MAX, `must be a whole number from 0 to ${LOG_TAIL_MAX}`)
      .optional(),
    since: z.string().max(64).optional(),
    stream: z.enum(["workload", "supervisor"]).optional(),
    generation: z.string().regex(/^(\d{1,9}|previous)$/, 'must be a generation number or "previous"').optional(),
  })
  .strict();

/** `sandbox cp`: the remote path, and a single-file upload's mode. */
export const FilesQuery = z
  .object({
    path: z.string({ error: "required, an absolute path inside /sandbox" }).max(16_384),
    mode: z.string().regex(/^0?[0-7]{3}$/, "expected octal permissions from 000 to 777, such as 644 or 0755").optional(),
  })
  .strict();

/** `resources.memoryMb: Too small: expected number to be >=16` style, one issue per line. */
export function formatZodError(err: z.ZodError): string {
  return err.issues
    .map((issue) => {
      const path = issue.path.map((p, i) => (typeof p === "number" ? `[${p}]` : i === 0 ? String(p) : `.${String(p)}`)).join("");
      return path ? `${path}: ${issue.message}` : issue.message;
    })
    .join("; ");
}
