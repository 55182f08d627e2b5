// The control-session protocol between a supervisor and the gateway, shared by both
// sides. Transport: one WebSocket over TLS, one JSON object per text message. Every
// message is validated here; anything that does not parse closes the session.
// Kept dependency-light (zod only): the supervisor is bundled into one file.
import { z } from "zod";

export const SUPERVISOR_PATH = "/v1/supervisor";
export const TOKEN_AUDIENCE = "sandgate-supervisor";
export const TOKEN_TYPE = "sandgate-launch+jwt";

/** Application close codes (4000-4999 are free for applications, RFC 6455 §7.4.2). */
export const CLOSE = {
  normal: 1000,
  goingAway: 1001,
  malformed: 4400,
  refused: 4401,
  authTimeout: 4408,
  duplicate: 4409,
  superseded: 4410,
  idle: 4411,
} as const;

const revision = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);
const nullableRevision = revision.nullable();
const proxyState = z.enum(["listening", "not_listening"]);
const id = z.string().min(1).max(200);

// ---- supervisor → gateway ----

export const helloMessage = z.strictObject({
  type: z.literal("hello"),
  /** The launch-scoped JWT; only sent after the gateway's certificate matched the pin. */
  token: z.string().min(1).max(8192),
  sandboxId: id,
  generation: revision,
  enforcedRevision: nullableRevision,
  proxy: proxyState,
  /** Gateway messages this supervisor understands beyond the first protocol ("hostAddresses"); absent: none. */
  accepts: z.array(z.string().max(64)).max(16).optional(),
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
  closed: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
});

export const heartbeatMessage = z.strictObject({
  type: z.literal("heartbeat"),
  enforcedRevision: nullableRevision,
  proxy: proxyState,
  lockdown: z.boolean(),
  /** Audit events dropped since start because the session was down or congested. */
  auditDropped: z.number().int().min(0),
});

/** One egress decision of the proxy (the supervisor's AuditEvent). */
export const auditEventSchema = z.strictObject({
  type: z.literal("egress"),
  time: z.string().max(64),
  /** would_deny: let through by audit mode (enforcement: audit); reason and rule say what enforcing would have said. */
  decision: z.enum(["allow", "deny", "would_deny"]),
  /**
   * Absent: the decision (a request's record is sent once it completes, with its traffic).
   * "close": a tunnel or WebSocket allowed earlier has closed; the record carries its traffic.
   */
  activity: z.literal("close").optional(),
  reason: z.string().max(200).optional(),
  rule: z.string().max(200).optional(),
  host: z.string().max(300),
  port: z.number().int().min(0).max(65535),
  protocol: z.enum(["http", "https", "tcp"]),
  method: z.string().max(32).optional(),
  path: z.string().max(8192).optional(),
  address: z.string().max(64).optional(),
  /** Repeats of this decision (same decision, host, port, protocol, reason, rule) since `since`. */
  count: z.number().int().min(1).optional(),
  since: z.string().max(64).optional(),
  /** Why all egress was denied, when a lockdown was the cause. */
  lockdown: z.string().max(200).optional(),
  /** The policy revision that decided (absent when none was loaded). */
  revision: z.number().int().min(0).optional(),
  /** Bytes from the workload towards the origin, and back, on the workload's connection (summed over `count`). */
  bytesOut: z.number().int().min(0).optional(),
  bytesIn: z.number().int().min(0).optional(),
  /** From the request (or the tunnel's opening) to its end, in ms (summed over `count`). */
  durationMs: z.number().int().min(0).optional(),
  /** The HTTP status the workload got (requests only). */
  status: z.number().int().min(100).max(599).optional(),
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
  reason: z.string().min(1).max(200),
});

/**
 * Every address of the gateway's host, whole (not a diff): sent after welcome and whenever
 * they change, only to a supervisor whose hello accepts "hostAddresses".
 */
export const hostAddressesMessage = z.strictObject({
  type: z.literal("hostAddresses"),
  addresses: z.array(z.string().max(64)).max(4096),
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
    .record(z.string().regex(/^[a-z0-9][a-z0-9_-]{0,62}$/), z.string().min(1).max(Math.ceil((64 * 1024) / 3) * 4))
    .refine((r) => Object.keys(r).length <= MAX_WIRE_SECRETS, { error: `at most ${String(MAX_WIRE_SECRETS)} secrets` }),
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

function parseWith<T>(schema: z.ZodType<T>, data: unknown): Parsed<T> {
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
  const result = schema.safeParse(raw);
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
