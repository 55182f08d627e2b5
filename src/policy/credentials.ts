// Credentials the workload never holds: the words of the policy's `credentials` entries on an
// endpoint (placeholder bindings and injected headers), secret names, placeholders and header
// templates. Pure: validation returns the normal form or problems; values never pass here.
import { describeValue, unknownKeysMessage } from "./describe.js";
import { OVERRIDE_HEADERS } from "./override.js";
import { validatePathGlob } from "./paths.js";

/** A secret name: the same rule for the gateway's store, policies and placeholders. */
export const SECRET_NAME_RE = /^[a-z0-9][a-z0-9_-]{0,62}$/;
export const SECRET_NAME_RULE = "1-63 characters: lowercase letters, digits, '-' and '_', starting with a letter or digit";

export function checkSecretName(name: string): string | null {
  return SECRET_NAME_RE.test(name) ? null : `invalid secret name ${JSON.stringify(name.slice(0, 80))}: ${SECRET_NAME_RULE}`;
}

/** What the workload holds instead of a secret: `sandgate:secret:<name>`. */
export const PLACEHOLDER_PREFIX = "sandgate:secret:";
export const placeholderFor = (name: string): string => `${PLACEHOLDER_PREFIX}${name}`;

/** A placeholder for `secret` may be sent to this endpoint (optionally only on `paths`), and is swapped for the value. */
export interface PlaceholderBinding {
  readonly secret: string;
  /** Path globs; absent: every path the endpoint allows. */
  readonly paths?: readonly string[];
  /** Present: placeholders in request bodies are swapped too, for bodies up to maxBytes. */
  readonly body?: { readonly maxBytes: number };
}

/** A header the supervisor sets itself (replacing any the workload sent) on requests to this endpoint. */
export interface HeaderInjection {
  /** Lowercase header name. */
  readonly header: string;
  /** Template: `{{secret:NAME}}` stands for the value. */
  readonly value: string;
  readonly paths?: readonly string[];
}

export type Credential = PlaceholderBinding | HeaderInjection;

export const isHeaderInjection = (c: Credential): c is HeaderInjection => "header" in c;

/** Bounds, each with a one-line error when passed. */
export const CREDENTIAL_LIMITS = {
  perEndpoint: 16,
  /** Distinct secrets one policy may reference (what the gateway sends to its supervisor). */
  secretsPerPolicy: 32,
  bodyMaxBytes: 1024 * 1024,
  bodyDefaultBytes: 64 * 1024,
  headerValueChars: 8192,
} as const;

const TEMPLATE_TOKEN = /\{\{secret:([^{}]*)\}\}/g;

/** The secret names a header template refers to, in order (repeats kept). */
export function templateSecrets(template: string): string[] {
  return [...template.matchAll(TEMPLATE_TOKEN)].map((m) => m[1]!);
}

/** The secret names a credential refers to. */
export function credentialSecrets(c: Credential): string[] {
  return isHeaderInjection(c) ? templateSecrets(c.value) : [c.secret];
}

const TOKEN_RE = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$/;
// Framing, routing and hop-by-hop headers are the proxy's; override headers would change the method it checked.
const RESERVED_HEADERS = new Set(["host", "content-length", "transfer-encoding", "connection", "keep-alive", "te", "trailer", "upgrade", "expect", ...OVERRIDE_HEADERS]);

export interface CredentialIssue {
  path: (string | number)[];
  message: string;
}

export type CredentialCheck = { ok: true; value: Credential[] } | { ok: false; issues: CredentialIssue[] };

const BINDING_KEYS = ["secret", "paths", "body"];
const HEADER_KEYS = ["header", "value", "paths"];

function unknownKeys(entry: Record<string, unknown>, allowed: readonly string[]): string | null {
  const extra = Object.keys(entry).filter((k) => !allowed.includes(k));
  return extra.length === 0 ? null : unknownKeysMessage(extra, allowed);
}

function checkPaths(value: unknown, issues: CredentialIssue[], at: (string | number)[]): string[] | undefined {
  if (value === undefined) return undefined;
  if (!Array.isArray(value) || value.length === 0) {
    issues.push({ path: at, message: `expected a non-empty list of path globs, got ${describeValue(value)}` });
    return undefined;
  }
  const out: string[] = [];
  value.forEach((g: unknown, i) => {
    if (typeof g !== "string") return issues.push({ path: [...at, i], message: `expected a path glob starting with "/", got ${describeValue(g)}` });
    const checked = validatePathGlob(g);
    if (!checked.ok) return issues.push({ path: [...at, i], message: checked.error });
    if (!out.includes(g)) out.push(g);
    return undefined;
  });
  return out;
}

function checkBody(value: unknown, issues: CredentialIssue[], at: (string | number)[]): { maxBytes: number } | undefined {
  const L = CREDENTIAL_LIMITS;
  if (value === undefined || value === false) return undefined;
  if (value === true) return { maxBytes: L.bodyDefaultBytes };
  const range = `1-${String(L.bodyMaxBytes)}`;
  if (typeof value === "object" && value !== null && !Array.isArray(value)) {
    const o = value as Record<string, unknown>;
    const extra = unknownKeys(o, ["maxBytes"]);
    if (extra !== null) {
      issues.push({ path: at, message: extra });
      return undefined;
    }
    const n = o.maxBytes;
    if (typeof n === "number" && Number.isInteger(n) && n >= 1 && n <= L.bodyMaxBytes) return { maxBytes: n };
    issues.push({ path: [...at, "maxBytes"], message: n === undefined ? `required (bytes, ${range})` : `expected bytes ${range}, got ${describeValue(n)}` });
    return undefined;
  }
  issues.push({ path: at, message: `expected true, false or { maxBytes: ${range} }, got ${describeValue(value)}` });
  return undefined;
}

function checkTemplate(value: unknown, issues: CredentialIssue[], at: (string | number)[]): string | undefined {
  if (typeof value !== "string") {
    issues.push({ path: at, message: `expected a header value like "Bearer {{secret:NAME}}", got ${describeValue(value)}` });
    return undefined;
  }
  const n = issues.length;
  if (value.length > CREDENTIAL_LIMITS.headerValueChars) issues.push({ path: at, message: `longer than ${String(CREDENTIAL_LIMITS.headerValueChars)} characters` });
  // Printable ASCII, space and tab: a header value never carries a line break.
  else if (/[^\t\x20-\x7e]/.test(value)) issues.push({ path: at, message: "a header value holds printable ASCII, spaces and tabs only" });
  else {
    const names = templateSecrets(value);
    const rest = value.replace(TEMPLATE_TOKEN, "");
    if (rest.includes("{{") || rest.includes("}}")) issues.push({ path: at, message: `${describeValue(value)}: the only template is {{secret:NAME}}` });
    else if (names.length === 0) issues.push({ path: at, message: `${describeValue(value)}: name the secret it carries with {{secret:NAME}}` });
    for (const name of names) {
      const bad = checkSecretName(name);
      if (bad !== null) issues.push({ path: at, message: bad });
    }
  }
  return issues.length === n ? value : undefined;
}

/**
 * An endpoint's `credentials` list, for an endpoint of `protocol` with `tls` as written.
 * Credentials need a request the supervisor reads and an origin it verifies: https,
 * terminated. Over plain http the value would cross the network in clear text.
 */
export function validateCredentials(value: unknown, protocol: string, tls: string | undefined): CredentialCheck {
  const issues: CredentialIssue[] = [];
  if (protocol !== "https") {
    return { ok: false, issues: [{ path: [], message: `credentials need protocol https (the supervisor terminates TLS and verifies the origin), not ${protocol}${protocol === "http" ? ": over plain http the secret would cross the network in clear text" : ""}` }] };
  }
  if (tls === "passthrough") {
    return { ok: false, issues: [{ path: [], message: "credentials need tls: terminate; through a tls: passthrough tunnel the supervisor cannot see a placeholder" }] };
  }
  if (!Array.isArray(value) || value.length === 0) return { ok: false, issues: [{ path: [], message: `expected a non-empty list of credentials, got ${describeValue(value)}` }] };
  if (value.length > CREDENTIAL_LIMITS.perEndpoint) return { ok: false, issues: [{ path: [], message: `at most ${String(CREDENTIAL_LIMITS.perEndpoint)} credentials per endpoint, got ${String(value.length)}` }] };
  const out: Credential[] = [];
  const headersSeen = new Set<string>();
  value.forEach((entry: unknown, i) => {
    if (typeof entry !== "object" || entry === null || Array.isArray(entry)) {
      issues.push({ path: [i], message: `expected a mapping with "secret" (a placeholder binding) or "header" and "value" (a header the supervisor sets), got ${describeValue(entry)}` });
      return;
    }
    const e = entry as Record<string, unknown>;
    const n = issues.length;
    if ("header" in e) {
      const extra = unknownKeys(e, HEADER_KEYS);
      if (extra !== null) issues.push({ path: [i], message: extra });
      const h = e.header;
      let header: string | undefined;
      if (typeof h !== "string" || !TOKEN_RE.test(h)) issues.push({ path: [i, "header"], message: `expected a header name (letters, digits and !#$%&'*+.^_\`|~-), got ${describeValue(h)}` });
      else if (RESERVED_HEADERS.has(h.toLowerCase()) || h.toLowerCase().startsWith("proxy-")) issues.push({ path: [i, "header"], message: `${JSON.stringify(h)} is the proxy's own header; it cannot be set` });
      else if (headersSeen.has(h.toLowerCase())) issues.push({ path: [i, "header"], message: `${JSON.stringify(h)} is set twice on this endpoint` });
      else header = h.toLowerCase();
      if (header !== undefined) headersSeen.add(header);
      const template = checkTemplate(e.value, issues, [i, "value"]);
      const paths = checkPaths(e.paths, issues, [i, "paths"]);
      if (issues.length === n) out.push({ header: header!, value: template!, ...(paths !== undefined && { paths }) });
      return;
    }
    const extra = unknownKeys(e, BINDING_KEYS);
    if (extra !== null) issues.push({ path: [i], message: extra });
    const s = e.secret;
    if (typeof s !== "string") issues.push({ path: [i, "secret"], message: s === undefined ? 'required (a secret name; or "header" and "value")' : `expected a secret name, got ${describeValue(s)}` });
    else {
      const bad = checkSecretName(s);
      if (bad !== null) issues.push({ path: [i, "secret"], message: bad });
    }
    const paths = checkPaths(e.paths, issues, [i, "paths"]);
    const body = checkBody(e.body, issues, [i, "body"]);
    if (issues.length === n) out.push({ secret: s as string, ...(paths !== undefined && { paths }), ...(body !== undefined && { body }) });
  });
  return issues.length === 0 ? { ok: true, value: out } : { ok: false, issues };
}
