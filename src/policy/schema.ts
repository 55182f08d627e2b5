// The policy format: zod schemas that validate user input and transform it into the one
// normal form (Policy) that evaluation, storage and hashing use. Error messages are written
// for the person editing the file: each names the path, what was expected and what was found.
// zod/mini (functional API, tree-shakable, no locale): the supervisor bundles this module,
// and classic zod cost it ~580 KB of source and ~5 MiB of memory. Every issue is worded
// here, so the messages are the same in the supervisor and in the gateway.
import * as z from "zod/mini";
import { formatCidr, parseCidr } from "./cidr.js";
import { validateHostPattern } from "./hosts.js";
import { validatePathGlob } from "./paths.js";
import { describeValue, unknownKeysMessage } from "./describe.js";
import { CREDENTIAL_LIMITS, credentialSecrets, validateCredentials, type Credential } from "./credentials.js";

export { describeValue };

export const PROTOCOLS = ["http", "https", "tcp"] as const;
export type Protocol = (typeof PROTOCOLS)[number];

export const HTTP_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE"] as const;
export type HttpMethod = (typeof HTTP_METHODS)[number];

/** An L7 rule: a request passes when its method AND path are allowed; an absent list allows any. */
export interface HttpRule {
  readonly methods?: readonly HttpMethod[];
  readonly paths?: readonly string[];
}

export interface Endpoint {
  /** Normal form: lowercase, no trailing dot, canonical IP text; "*." prefix for wildcards. */
  readonly host: string;
  /** Sorted, unique, non-empty. */
  readonly ports: readonly number[];
  readonly protocol: Protocol;
  /** For http, and https terminated in the boundary; absent means any method and path. */
  readonly rules?: readonly HttpRule[];
  /**
   * https only: "terminate" ends the workload's TLS in the supervisor so each request is
   * seen (required for rules); "passthrough" tunnels it blind. Absent: terminate when the
   * endpoint has rules, else passthrough (tlsMode).
   */
  readonly tls?: TlsMode;
  /** Canonical CIDRs this endpoint may resolve into despite the private-address rule. */
  readonly allowPrivate: readonly string[];
  /** Secrets the supervisor swaps in (placeholder bindings) or adds (headers): https, terminated only. */
  readonly credentials?: readonly Credential[];
}

export const TLS_MODES = ["terminate", "passthrough"] as const;
export type TlsMode = (typeof TLS_MODES)[number];

/** Whether the supervisor terminates an https endpoint's TLS (never for other protocols). */
export function tlsMode(e: Endpoint): TlsMode | null {
  if (e.protocol !== "https") return null;
  return e.tls ?? (e.rules !== undefined || e.credentials !== undefined ? "terminate" : "passthrough");
}

/**
 * "audit": what the entry (or the whole policy) would deny is let through and recorded as
 * "would deny". Absent means enforce; the boundary's own checks (addresses, lockdown,
 * credentials, TLS) are enforced either way.
 */
export const ENFORCEMENT_MODES = ["enforce", "audit"] as const;
export type Enforcement = (typeof ENFORCEMENT_MODES)[number];

export interface NetworkRule {
  readonly name: string;
  readonly endpoints: readonly Endpoint[];
  /** "audit": this rule's method and path refusals are let through as "would deny". */
  readonly enforcement?: "audit";
}

export interface DenyEntry {
  readonly name?: string;
  readonly host: string;
  /** Absent: every port. */
  readonly ports?: readonly number[];
  /** Absent: every protocol. */
  readonly protocol?: Protocol;
  /** "audit": a match is recorded as "would deny" and the rules decide. */
  readonly enforcement?: "audit";
}

export interface ProcessLimits {
  readonly memoryMb?: number;
  readonly cpus?: number;
  readonly pids?: number;
}

export interface Policy {
  readonly version: 1;
  /** enforcement "audit": every denial of the rules is let through as "would deny" (absent: enforce). */
  readonly network: { readonly rules: readonly NetworkRule[]; readonly deny: readonly DenyEntry[]; readonly enforcement?: "audit" };
  /** Fixed at sandbox creation. */
  readonly filesystem: { readonly readOnly: readonly string[]; readonly readWrite: readonly string[] };
  /** Fixed at sandbox creation. */
  readonly process: { readonly user?: string; readonly limits: ProcessLimits };
}

// ---- error wording ----

interface IssueLike {
  readonly input?: unknown;
}

/** Error map: "required (what)" when missing, else "expected what, got found". */
const expected =
  (what: string) =>
  (iss: IssueLike): string =>
    iss.input === undefined ? `required (${what})` : `expected ${what}, got ${describeValue(iss.input)}`;

// Stryker disable all: a safety net no schema below reaches today (each words its own
// issues, and mapping() words invalid_type exactly as this would), so no test can tell.
const TYPE_WORDS: Record<string, string> = {
  string: "a string",
  number: "a number",
  boolean: "true or false",
  array: "a list",
  object: "a mapping",
};

/** Fallback wording for issues no schema below words itself. */
function fallbackError(iss: z.core.$ZodRawIssue): string | undefined {
  switch (iss.code) {
    case "invalid_type":
      return expected(TYPE_WORDS[iss.expected] ?? iss.expected)(iss);
    case "too_small":
      if (iss.origin === "array") return `expected at least ${String(iss.minimum)} entr${iss.minimum === 1 ? "y" : "ies"}, got none`;
      return undefined;
    default:
      return undefined;
  }
}
// Stryker restore all

/** A strict mapping whose unknown-key error offers the likely key and lists the keys that are allowed. */
function mapping<Shape extends z.core.$ZodLooseShape>(shape: Shape) {
  const allowed = Object.keys(shape);
  return z.strictObject(shape, {
    error: (iss) => {
      if (iss.code === "unrecognized_keys") return unknownKeysMessage(iss.keys, allowed);
      if (iss.code === "invalid_type") return expected("a mapping")(iss);
      return undefined;
    },
  });
}

/** `schema`, then `fn` on what it produced (classic zod's `.transform`). */
function then<S extends z.ZodMiniType, O>(schema: S, fn: (value: z.output<S>, ctx: z.core.ParsePayload) => O) {
  return z.pipe(schema, z.transform(fn));
}

const list = <T extends z.ZodMiniType>(item: T, what: string) =>
  z.array(item, { error: expected(`a list of ${what}`) }).check(z.minLength(1, { error: `expected at least one of ${what}, got an empty list` }));

// A schema's own error also words the issues of its checks (int, min, max, positive...).
function intIn(lo: number, hi: number) {
  return z.int({ error: expected(`${String(lo)}-${String(hi)}`) }).check(z.minimum(lo), z.maximum(hi));
}

type Problem = { message: string; input: unknown; path?: (string | number)[] };

/** Reports one problem, in our own words, from a transform. */
function report(ctx: z.core.ParsePayload, problem: Problem): void {
  // Stryker disable next-line StringLiteral: validatePolicyValue reports path and message, never the code
  ctx.issues.push({ code: "custom", ...problem });
}

/** A string checked by a validator that returns the normal form or an error. */
function checkedString(what: string, check: (s: string) => { ok: true; value: string } | { ok: false; error: string }) {
  return then(z.string({ error: expected(what) }), (s, ctx) => {
    const result = check(s);
    if (result.ok) return result.value;
    report(ctx, { message: result.error, input: s });
    return z.NEVER;
  });
}

const uniqueSorted = (xs: readonly number[]): number[] => [...new Set(xs)].sort((a, b) => a - b);
const unique = <T>(xs: readonly T[]): T[] => [...new Set(xs)];

// ---- pieces ----

const portSchema = intIn(1, 65535);
const portsSchema = list(portSchema, "ports");
const hostSchema = checkedString("a host name", (s) => validateHostPattern(s));
const protocolSchema = z.enum(PROTOCOLS, { error: expected(`one of ${PROTOCOLS.join(", ")}`) });

const methodSchema = z.enum(HTTP_METHODS, {
  error: (iss) => {
    const input = iss.input;
    if (typeof input === "string" && (HTTP_METHODS as readonly string[]).includes(input.toUpperCase())) {
      return `methods are uppercase: write ${JSON.stringify(input.toUpperCase())}, got ${JSON.stringify(input)}`;
    }
    return expected(`one of ${HTTP_METHODS.join(", ")}`)(iss);
  },
});

const pathGlobSchema = checkedString('a path glob starting with "/"', (s) => {
  const checked = validatePathGlob(s);
  return checked.ok ? { ok: true, value: s } : checked;
});

const cidrSchema = checkedString('an address range like "10.0.0.0/8"', (s) => {
  const parsed = parseCidr(s);
  return parsed.ok ? { ok: true, value: formatCidr(parsed.cidr) } : { ok: false, error: `${JSON.stringify(s)}: ${parsed.error}` };
});

const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;
const nameSchema = z
  .string({ error: expected("a name") })
  .check(z.regex(NAME_RE, { error: (iss) => `expected a name of letters, digits, ".", "_", "-" (at most 63, starting with a letter or digit), got ${describeValue(iss.input)}` }));

const httpRuleSchema = then(mapping({
  methods: z.optional(list(methodSchema, "methods")),
  paths: z.optional(list(pathGlobSchema, "paths")),
}), (r, ctx): HttpRule => {
  if (r.methods === undefined && r.paths === undefined) {
    report(ctx, { message: 'give "methods", "paths" or both', input: r });
    return z.NEVER;
  }
  return {
    ...(r.methods !== undefined && { methods: unique(r.methods).sort() }),
    ...(r.paths !== undefined && { paths: unique(r.paths) }),
  };
});

type PortFields = { port?: number | undefined; ports?: number[] | undefined };

/** Resolves `port` xor `ports`; pushes an issue and returns null when both are given. */
function portsOf(e: PortFields, ctx: z.core.ParsePayload): number[] | undefined | null {
  if (e.port !== undefined && e.ports !== undefined) {
    report(ctx, { message: 'give either "port" or "ports", not both', input: e, path: ["ports"] });
    return null;
  }
  if (e.port !== undefined) return [e.port];
  return e.ports === undefined ? undefined : uniqueSorted(e.ports);
}

const endpointSchema = then(mapping({
  host: hostSchema,
  port: z.optional(portSchema),
  ports: z.optional(portsSchema),
  protocol: protocolSchema,
  rules: z.optional(list(httpRuleSchema, "L7 rules")),
  tls: z.optional(z.enum(TLS_MODES, { error: expected(`one of ${TLS_MODES.join(", ")}`) })),
  allowPrivate: z.optional(z.array(cidrSchema, { error: expected("a list of address ranges") })),
  credentials: z.optional(z.unknown()),
}), (e, ctx): Endpoint => {
  const ports = portsOf(e, ctx);
  if (ports === undefined) {
    report(ctx, { message: 'required (1-65535; or "ports": a list)', input: undefined, path: ["port"] });
  }
  let bad = false;
  if (e.rules !== undefined && e.protocol === "tcp") {
    report(ctx, { message: "L7 rules (methods, paths) need protocol http or https; with protocol tcp the proxy cannot see requests", input: e.rules, path: ["rules"] });
    bad = true;
  }
  if (e.tls !== undefined && e.protocol !== "https") {
    report(ctx, { message: `tls applies to protocol https only, not ${e.protocol}`, input: e.tls, path: ["tls"] });
    bad = true;
  }
  if (e.rules !== undefined && e.tls === "passthrough") {
    report(ctx, { message: "L7 rules need tls: terminate; with tls: passthrough the proxy cannot see requests", input: e.rules, path: ["rules"] });
    bad = true;
  }
  let credentials: Credential[] | undefined;
  if (e.credentials !== undefined) {
    const checked = validateCredentials(e.credentials, e.protocol, e.tls);
    if (checked.ok) credentials = checked.value;
    else for (const issue of checked.issues) report(ctx, { message: issue.message, input: e.credentials, path: ["credentials", ...issue.path] });
    bad ||= !checked.ok;
  }
  if (ports == null || bad) return z.NEVER;
  return {
    host: e.host,
    ports,
    protocol: e.protocol,
    ...(e.rules !== undefined && { rules: e.rules }),
    ...(e.tls !== undefined && { tls: e.tls }),
    allowPrivate: unique(e.allowPrivate ?? []),
    ...(credentials !== undefined && { credentials }),
  };
});

const enforcementSchema = z.enum(ENFORCEMENT_MODES, { error: expected(`one of ${ENFORCEMENT_MODES.join(", ")}`) });
/** Normal form: "audit" kept, "enforce" (the default) left out, so both spellings hash alike. */
const withEnforcement = (mode: Enforcement | undefined): { enforcement?: "audit" } => (mode === "audit" ? { enforcement: "audit" } : {});

const networkRuleSchema = then(mapping({
  name: nameSchema,
  endpoints: list(endpointSchema, "endpoints"),
  enforcement: z.optional(enforcementSchema),
}), (r): NetworkRule => ({ name: r.name, endpoints: r.endpoints, ...withEnforcement(r.enforcement) }));

const denySchema = then(mapping({
  name: z.optional(nameSchema),
  host: hostSchema,
  port: z.optional(portSchema),
  ports: z.optional(portsSchema),
  protocol: z.optional(protocolSchema),
  enforcement: z.optional(enforcementSchema),
}), (d, ctx): DenyEntry => {
  const ports = portsOf(d, ctx);
  if (ports === null) return z.NEVER;
  return {
    ...(d.name !== undefined && { name: d.name }),
    host: d.host,
    ...(ports !== undefined && { ports }),
    ...(d.protocol !== undefined && { protocol: d.protocol }),
    ...withEnforcement(d.enforcement),
  };
});

const networkSchema = then(mapping({
  rules: z.optional(z.array(networkRuleSchema, { error: expected("a list of rules") })),
  deny: z.optional(z.array(denySchema, { error: expected("a list of deny entries") })),
  enforcement: z.optional(enforcementSchema),
}), (n, ctx): Policy["network"] => {
  const rules = n.rules ?? [];
  const deny = n.deny ?? [];
  // One namespace: a decision reports a rule or deny name, which must say which entry decided.
  const seen = new Map<string, string>();
  const claim = (name: string, where: (string | number)[]) => {
    const prior = seen.get(name);
    const shown = where.map((p) => (typeof p === "number" ? `[${String(p)}]` : `.${p}`)).join("").slice(1);
    if (prior !== undefined) {
      report(ctx, { message: `duplicate name ${JSON.stringify(name)} (also used by network.${prior})`, input: name, path: where });
    } else {
      seen.set(name, shown);
    }
  };
  rules.forEach((r, i) => claim(r.name, ["rules", i, "name"]));
  deny.forEach((d, i) => d.name !== undefined && claim(d.name, ["deny", i, "name"]));
  // Every referenced value goes to the supervisor: a bound on what one policy pulls in.
  const secrets = new Set(rules.flatMap((r) => r.endpoints.flatMap((e) => (e.credentials ?? []).flatMap(credentialSecrets))));
  if (secrets.size > CREDENTIAL_LIMITS.secretsPerPolicy) {
    report(ctx, { message: `at most ${String(CREDENTIAL_LIMITS.secretsPerPolicy)} distinct secrets per policy, got ${String(secrets.size)}`, input: n.rules, path: ["rules"] });
  }
  return { rules, deny, ...withEnforcement(n.enforcement) };
});

const MAX_PATH = 4096;
const fsPathSchema = checkedString("an absolute path", (s) => {
  const shown = JSON.stringify(s);
  if (!s.startsWith("/")) return { ok: false, error: `${shown}: expected an absolute path (starting with "/")` };
  if (s.length > MAX_PATH) return { ok: false, error: `${shown}: longer than ${String(MAX_PATH)} characters` };
  // ":" and "," separate fields in Docker mount specifications; control characters have no business here.
  if (/[\u0000-\u001f\u007f:,]/.test(s)) return { ok: false, error: `${shown}: contains a control character, ":" or ","` };
  const segments = s.split("/").filter((seg) => seg !== "");
  if (segments.some((seg) => seg === "." || seg === "..")) return { ok: false, error: `${shown}: "." and ".." segments are not allowed` };
  return { ok: true, value: `/${segments.join("/")}` };
});

const filesystemSchema = then(mapping({
  readOnly: z.optional(z.array(fsPathSchema, { error: expected("a list of paths") })),
  readWrite: z.optional(z.array(fsPathSchema, { error: expected("a list of paths") })),
}), (f, ctx): Policy["filesystem"] => {
  const readOnly = unique(f.readOnly ?? []);
  const readWrite = unique(f.readWrite ?? []);
  const ro = new Set(readOnly);
  readWrite.forEach((p, i) => {
    if (ro.has(p)) report(ctx, { message: `${JSON.stringify(p)} is listed in both readOnly and readWrite`, input: p, path: ["readWrite", i] });
  });
  return { readOnly, readWrite };
});

const USER_RE = /^(0|[1-9][0-9]{0,9})(:(0|[1-9][0-9]{0,9}))?$/;
const MAX_ID = 2 ** 31 - 1;
const userSchema = checkedString('"uid" or "uid:gid"', (s) => {
  if (!USER_RE.test(s) || s.split(":").some((id) => Number(id) > MAX_ID)) {
    return { ok: false, error: `expected numeric "uid" or "uid:gid" (ids up to ${String(MAX_ID)}), got ${JSON.stringify(s)}` };
  }
  return { ok: true, value: s };
});

/**
 * The allowed range of each process limit, the same for a policy's
 * `process.limits` and the API's `resources` (a smaller value starts a workload
 * that cannot run: runc refuses a tiny CPU quota, a few pids cannot start a shell).
 */
export const PROCESS_LIMITS = {
  memoryMb: { min: 16, max: 1024 * 1024 },
  cpus: { min: 0.01, max: 256 },
  pids: { min: 16, max: 1_000_000 },
} as const;

const L = PROCESS_LIMITS;
const cpusError = expected(`a number of CPUs from ${String(L.cpus.min)} to ${String(L.cpus.max)}`);
const processSchema = then(mapping({
  user: z.optional(userSchema),
  limits: z.optional(mapping({
    memoryMb: z.optional(intIn(L.memoryMb.min, L.memoryMb.max)),
    cpus: z.optional(z.number({ error: cpusError }).check(z.minimum(L.cpus.min), z.maximum(L.cpus.max))),
    pids: z.optional(intIn(L.pids.min, L.pids.max)),
  })),
}), (p): Policy["process"] => {
  const l = p.limits ?? {};
  return {
    ...(p.user !== undefined && { user: p.user }),
    limits: {
      ...(l.memoryMb !== undefined && { memoryMb: l.memoryMb }),
      ...(l.cpus !== undefined && { cpus: l.cpus }),
      ...(l.pids !== undefined && { pids: l.pids }),
    },
  };
});

export const policySchema = then(mapping({
  version: z.literal(1, { error: expected("1 (the only policy format version)") }),
  network: z.optional(networkSchema),
  filesystem: z.optional(filesystemSchema),
  process: z.optional(processSchema),
}), (p): Policy => ({
  version: 1,
  network: p.network ?? { rules: [], deny: [] },
  filesystem: p.filesystem ?? { readOnly: [], readWrite: [] },
  process: p.process ?? { limits: {} },
}));

/** "network.rules[2].endpoints[0].port"; the document root is "policy". */
export function formatIssuePath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const key of path) {
    if (typeof key === "number") out += `[${String(key)}]`;
    else if (typeof key === "string" && /^[A-Za-z_][A-Za-z0-9_]*$/.test(key)) out += out === "" ? key : `.${key}`;
    else out += `[${JSON.stringify(String(key))}]`;
  }
  return out === "" ? "policy" : out;
}

export type SchemaResult = { ok: true; policy: Policy } | { ok: false; issues: { path: PropertyKey[]; message: string }[] };

export function validatePolicyValue(value: unknown): SchemaResult {
  // Stryker disable next-line ObjectLiteral: fallbackError is unreachable today (see there)
  const result = policySchema.safeParse(value, { error: fallbackError });
  if (result.success) return { ok: true, policy: result.data };
  return { ok: false, issues: result.error.issues.map((i) => ({ path: i.path, message: i.message })) };
}
