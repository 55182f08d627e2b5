// The control-session protocol between a supervisor and the gateway, shared by both
// sides. Transport: one WebSocket over TLS, one JSON object per text message. Every
// message is validated here; anything that does not parse closes the session.
// Kept dependency-light (zod/mini only: tree-shakable, no locale): the supervisor is
// bundled into one file, and classic zod cost it ~580 KB of source and ~5 MiB of memory.
import * as z from "zod/mini";

export const SUPERVISOR_PATH = "/v1/supervisor";
export const TOKEN_AUDIENCE = "sandgate-supervisor";
export const TOKEN_TYPE = "sandgate-launch+jwt";

/** Application close codes (4000-4999 are free for applications, RFC 6455 §7.4.2). */
export const CLOSE = {
  normal: 1000,
  goingAway: 1001,
  /** RFC 6455's "Try Again Later": the gateway holds as many sessions as it may. */
  tryAgainLater: 1013,
  malformed: 4400,
  refused: 4401,
  authTimeout: 4408,
  duplicate: 4409,
  superseded: 4410,
  idle: 4411,
} as const;

const revision = z.int().check(z.minimum(0), z.maximum(Number.MAX_SAFE_INTEGER));
const nullableRevision = z.nullable(revision);
const proxyState = z.enum(["listening", "not_listening"]);
const id = z.string().check(z.minLength(1), z.maxLength(200));

// ---- supervisor → gateway ----

export const helloMessage = z.strictObject({
  type: z.literal("hello"),
  /** The launch-scoped JWT; only sent after the gateway's certificate matched the pin. */
  token: z.string().check(z.minLength(1), z.maxLength(8192)),
  sandboxId: id,
  generation: revision,
  enforcedRevision: nullableRevision,
  proxy: proxyState,
  /** Gateway messages this supervisor understands beyond the first protocol ("hostAddresses"); absent: none. */
  accepts: z.optional(z.array(z.string().check(z.maxLength(64))).check(z.maxLength(16))),
});

export const ackMessage = z.strictObject({
  type: z.literal("ack"),
  /** The revision now enforced (may be higher than the push when the push was stale). */
  revision,
  /** False when the holder kept a newer revision than the one pushed. */
  applied: z.boolean(),
  /**
   * Open connections the supervisor closed because the revision now enforced does not allow
   * them, before sending this ack. Absent from supervisors that predate revocation.
   */
  closed: z.optional(z.int().check(z.minimum(0), z.maximum(Number.MAX_SAFE_INTEGER))),
});

export const heartbeatMessage = z.strictObject({
  type: z.literal("heartbeat"),
  enforcedRevision: nullableRevision,
  proxy: proxyState,
  lockdown: z.boolean(),
  /** Audit events dropped since start because the session was down or congested. */
  auditDropped: z.int().check(z.minimum(0)),
});

/** One egress decision of the proxy (the supervisor's AuditEvent). */
export const auditEventSchema = z.strictObject({
  type: z.literal("egress"),
  time: z.string().check(z.maxLength(64)),
  /** would_deny: let through by audit mode (enforcement: audit); reason and rule say what enforcing would have said. */
  decision: z.enum(["allow", "deny", "would_deny"]),
  /**
   * Absent: the decision (a request's record is sent once it completes, with its traffic).
   * "close": a tunnel or WebSocket allowed earlier has closed; the record carries its traffic.
   */
  activity: z.optional(z.literal("close")),
  reason: z.optional(z.string().check(z.maxLength(200))),
  rule: z.optional(z.string().check(z.maxLength(200))),
  host: z.string().check(z.maxLength(300)),
  port: z.int().check(z.minimum(0), z.maximum(65535)),
  /**
   * What the record is about: a request or tunnel (http, https, tcp), a name the workload's
   * resolver refused (dns; host is the name), or UDP the supervisor's namespace dropped (udp).
   */
  protocol: z.enum(["http", "https", "tcp", "dns", "udp"]),
  /** How the workload reached the supervisor: absent, through its proxy; "transparent", without knowing it (redirected). */
  via: z.optional(z.literal("transparent")),
  method: z.optional(z.string().check(z.maxLength(32))),
  path: z.optional(z.string().check(z.maxLength(8192))),
  address: z.optional(z.string().check(z.maxLength(64))),
  /** Repeats of this record (identical in every field but time and traffic) since `since`. */
  count: z.optional(z.int().check(z.minimum(1))),
  since: z.optional(z.string().check(z.maxLength(64))),
  /** Why all egress was denied, when a lockdown was the cause. */
  lockdown: z.optional(z.string().check(z.maxLength(200))),
  /** The policy revision that decided (absent when none was loaded). */
  revision: z.optional(z.int().check(z.minimum(0))),
  /** Bytes from the workload towards the origin, and back, on the workload's connection (summed over `count`). */
  bytesOut: z.optional(z.int().check(z.minimum(0))),
  bytesIn: z.optional(z.int().check(z.minimum(0))),
  /** From the request (or the tunnel's opening) to its end, in ms (summed over `count`). */
  durationMs: z.optional(z.int().check(z.minimum(0))),
  /** The HTTP status the workload got (requests only). */
  status: z.optional(z.int().check(z.minimum(100), z.maximum(599))),
});

export const auditMessage = z.strictObject({
  type: z.literal("audit"),
  event: auditEventSchema,
});

/** The secrets message of this version is installed (the values replaced whole). */
export const secretsAckMessage = z.strictObject({
  type: z.literal("secretsAck"),
  version: revision,
});

export const supervisorMessage = z.discriminatedUnion("type", [helloMessage, ackMessage, heartbeatMessage, auditMessage, secretsAckMessage]);

// ---- gateway → supervisor ----

export const welcomeMessage = z.strictObject({
  type: z.literal("welcome"),
  sessionId: id,
  sandboxId: id,
  generation: revision,
});

export const policyMessage = z.strictObject({
  type: z.literal("policy"),
  revision,
  /** Validated again by the supervisor with policyFromObject before it is installed. */
  policy: z.record(z.string(), z.unknown()),
});

/** Deny all egress and close every connection, for good: the sandbox failed, completed, stops or is deleted. */
export const lockdownMessage = z.strictObject({
  type: z.literal("lockdown"),
  reason: z.string().check(z.minLength(1), z.maxLength(200)),
});

/**
 * Every address of the gateway's host, whole (not a diff): sent after welcome and whenever
 * they change, only to a supervisor whose hello accepts "hostAddresses".
 */
export const hostAddressesMessage = z.strictObject({
  type: z.literal("hostAddresses"),
  addresses: z.array(z.string().check(z.maxLength(64))).check(z.maxLength(4096)),
});

/** What a supervisor lists in hello.accepts to be sent hostAddresses messages. */
export const ACCEPTS_HOST_ADDRESSES = "hostAddresses";

/** Secrets one sandbox may hold: its policy's bound (CREDENTIAL_LIMITS.secretsPerPolicy). */
export const MAX_WIRE_SECRETS = 32;

/**
 * The values of every secret the sandbox's policy references, whole (a secret left out is
 * dropped): sent before each policy push, after each welcome, and when one changes; only to
 * a supervisor whose hello accepts "secrets". Versions only move forward; acked with
 * secretsAck. Never logged: it is the one message that carries values.
 */
export const secretsMessage = z.strictObject({
  type: z.literal("secrets"),
  version: revision,
  /** Name → the value, base64 (values are 1 to 64 KiB). */
  secrets: z
    .record(z.string().check(z.regex(/^[a-z0-9][a-z0-9_-]{0,62}$/)), z.string().check(z.minLength(1), z.maxLength(Math.ceil((64 * 1024) / 3) * 4)))
    .check(z.refine((r) => Object.keys(r).length <= MAX_WIRE_SECRETS, { error: `at most ${String(MAX_WIRE_SECRETS)} secrets` })),
});

/** What a supervisor lists in hello.accepts to be sent secrets messages. */
export const ACCEPTS_SECRETS = "secrets";

export const gatewayMessage = z.discriminatedUnion("type", [welcomeMessage, policyMessage, lockdownMessage, hostAddressesMessage, secretsMessage]);

export type HelloMessage = z.infer<typeof helloMessage>;
export type AckMessage = z.infer<typeof ackMessage>;
export type HeartbeatMessage = z.infer<typeof heartbeatMessage>;
export type AuditMessage = z.infer<typeof auditMessage>;
export type WireAuditEvent = z.infer<typeof auditEventSchema>;
export type SupervisorMessage = z.infer<typeof supervisorMessage>;
export type WelcomeMessage = z.infer<typeof welcomeMessage>;
export type PolicyMessage = z.infer<typeof policyMessage>;
export type LockdownMessage = z.infer<typeof lockdownMessage>;
export type HostAddressesMessage = z.infer<typeof hostAddressesMessage>;
export type SecretsMessage = z.infer<typeof secretsMessage>;
export type SecretsAckMessage = z.infer<typeof secretsAckMessage>;
export type GatewayMessage = z.infer<typeof gatewayMessage>;

export type Parsed<T> = { ok: true; message: T } | { ok: false; error: string };

const SIZE_UNITS: Record<string, string> = { string: "characters", array: "items" };
const typeName = (v: unknown): string => (v === undefined ? "undefined" : z.util.parsedType(v));

/**
 * Words the issues of the messages above (parsed from JSON) as zod's English locale does.
 * zod/mini loads no locale, and the gateway (which also loads classic zod) has English:
 * with this map a malformed message is described alike in the supervisor and the gateway.
 */
function wireError(iss: z.core.$ZodRawIssue): string {
  switch (iss.code) {
    case "invalid_type":
      return `Invalid input: expected ${iss.expected}, received ${typeName(iss.input)}`;
    case "invalid_value":
      return iss.values.length === 1 ? `Invalid input: expected ${z.util.stringifyPrimitive(iss.values[0])}` : `Invalid option: expected one of ${z.util.joinValues(iss.values, "|")}`;
    case "too_big":
    case "too_small": {
      const big = iss.code === "too_big";
      const adj = iss.exact ? "exactly " : big ? (iss.inclusive ? "<=" : "<") : iss.inclusive ? ">=" : ">";
      const bound = String(big ? iss.maximum : iss.minimum);
      const unit = SIZE_UNITS[iss.origin];
      return `Too ${big ? "big" : "small"}: expected ${iss.origin} to ${unit === undefined ? `be ${adj}${bound}` : `have ${adj}${bound} ${unit}`}`;
    }
    case "invalid_format":
      return iss.format === "regex" ? `Invalid string: must match pattern ${String(iss.pattern)}` : `Invalid ${iss.format}`;
    case "unrecognized_keys":
      return `Unrecognized key${iss.keys.length > 1 ? "s" : ""}: ${z.util.joinValues(iss.keys, ", ")}`;
    case "invalid_key":
      return `Invalid key in ${iss.origin}`;
    case "invalid_union": {
      // A discriminated union names the values of the discriminator it knows.
      const options: unknown[] = "options" in iss && Array.isArray(iss.options) ? iss.options : [];
      return options.length > 0 ? `Invalid discriminator value. Expected ${options.map((o) => `'${String(o)}'`).join(" | ")}` : "Invalid input";
    }
    default:
      return "Invalid input";
  }
}

function parseWith<T>(schema: z.ZodMiniType<T>, data: unknown): Parsed<T> {
  let text: string;
  if (typeof data === "string") text = data;
  else if (Buffer.isBuffer(data)) text = data.toString("utf8");
  else return { ok: false, error: "expected a text message" };
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return { ok: false, error: "not JSON" };
  }
  const result = schema.safeParse(raw, { error: wireError });
  if (result.success) return { ok: true, message: result.data };
  const issue = result.error.issues[0];
  return { ok: false, error: issue === undefined ? "invalid message" : `${issue.path.join(".") || "(root)"}: ${issue.message}` };
}

export const parseSupervisorMessage = (data: unknown): Parsed<SupervisorMessage> => parseWith(supervisorMessage, data);
export const parseGatewayMessage = (data: unknown): Parsed<GatewayMessage> => parseWith(gatewayMessage, data);

/** Canonical pin form: "sha256:" + 64 lowercase hex digits. Accepts Node's "AB:CD:…" form too. */
export function normalizeFingerprint(text: string): string | null {
  const hex = text.trim().toLowerCase().replace(/^sha256:/, "").replaceAll(":", "");
  return /^[0-9a-f]{64}$/.test(hex) ? `sha256:${hex}` : null;
}
