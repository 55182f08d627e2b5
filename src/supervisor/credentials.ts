// Swapping placeholders (`sandgate:secret:NAME`) for secret values in a request the workload
// makes, where the policy binds that secret, and refusing them anywhere else. Pure: text in,
// text out or a refusal that names the secret and its bindings, never a value. Bytes are
// handled as latin1 strings (one char per byte), as Node hands header values over.
import { PLACEHOLDER_PREFIX, SECRET_NAME_RE, type CredentialScope, type SecretBinding } from "../policy/core.js";

export type CredentialRefusalReason = "credential_endpoint_mismatch" | "credential_unknown" | "credential_unusable";

/** Where in the request a placeholder was found. */
export type CredentialPlace = "url" | "header" | "body";

export interface CredentialRefusal {
  reason: CredentialRefusalReason;
  /** The name in the placeholder (or template), never a value. */
  secret: string;
  where: CredentialPlace;
  /** Where the policy lets this secret go. */
  bindings: SecretBinding[];
  message: string;
}

export type Rewrite<T> = { ok: true; value: T } | { ok: false; refusal: CredentialRefusal };

export interface SecretValues {
  get(name: string): Buffer | undefined;
}

export interface CredentialContext {
  scope: CredentialScope;
  /** Where the policy binds a secret (any endpoint). */
  bindings: (secret: string) => SecretBinding[];
  values: SecretValues;
}

/** Placeholders swapped in one part of a request at most; past it the request is refused. */
export const MAX_SUBSTITUTIONS = 64;

export interface FoundPlaceholder {
  start: number;
  end: number;
  name: string;
  /** Some character of it was percent-encoded (then the value is put in percent-encoded). */
  encoded: boolean;
}

// Each character of the prefix as itself (any case) or percent-encoded: "sandgate%3Asecret%3Agithub".
const PREFIX_RE = new RegExp(
  Array.from({ length: PLACEHOLDER_PREFIX.length }, (_, i) => `(?:${PLACEHOLDER_PREFIX.charAt(i)}|%${PLACEHOLDER_PREFIX.charCodeAt(i).toString(16)})`).join(""),
  "gi",
);
const NAME_CHAR = /[A-Za-z0-9_-]/;

function nameCharAt(text: string, j: number): { char: string; length: number } | null {
  const c = text[j];
  if (c === undefined) return null;
  if (NAME_CHAR.test(c)) return { char: c, length: 1 };
  if (c !== "%" || !/^[0-9A-Fa-f]{2}$/.test(text.slice(j + 1, j + 3))) return null;
  const decoded = String.fromCharCode(parseInt(text.slice(j + 1, j + 3), 16));
  return NAME_CHAR.test(decoded) ? { char: decoded, length: 3 } : null;
}

/** Every placeholder in `text`, in order; the name runs as far as name characters go. */
export function findPlaceholders(text: string): FoundPlaceholder[] {
  const found: FoundPlaceholder[] = [];
  PREFIX_RE.lastIndex = 0;
  for (let m = PREFIX_RE.exec(text); m !== null; m = PREFIX_RE.exec(text)) {
    let j = m.index + m[0].length;
    let name = "";
    let encoded = m[0].includes("%");
    for (let c = nameCharAt(text, j); c !== null; c = nameCharAt(text, j)) {
      name += c.char;
      encoded ||= c.length > 1;
      j += c.length;
    }
    found.push({ start: m.index, end: j, name, encoded });
    PREFIX_RE.lastIndex = j;
  }
  return found;
}

/** RFC 3986 unreserved bytes stay, every other byte is %HH. */
export function percentEncode(value: Buffer): string {
  let out = "";
  for (const b of value) {
    const c = String.fromCharCode(b);
    out += /[A-Za-z0-9\-._~]/.test(c) ? c : `%${b.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}

const shownBindings = (bs: readonly SecretBinding[]): string =>
  bs.length === 0 ? "none" : bs.map((b) => `${b.host}:${b.ports.join(",")}${b.paths === null ? "" : ` ${b.paths.join(",")}`} (rule ${b.rule}${b.form === "header" ? ", header" : ""})`).join("; ");

function refuse(reason: CredentialRefusalReason, secret: string, where: CredentialPlace, bindings: SecretBinding[], message: string): Rewrite<never> {
  return { ok: false, refusal: { reason, secret, where, bindings, message } };
}

/** The value for a placeholder of `name` found in `where`, or why it must not be swapped here. */
function valueFor(name: string, where: CredentialPlace, ctx: CredentialContext): Rewrite<Buffer> {
  const shown = JSON.stringify(name);
  // An invalid name can never be bound; the policy names only valid ones.
  const bindings = SECRET_NAME_RE.test(name) ? ctx.bindings(name) : [];
  if (bindings.length === 0) return refuse("credential_unknown", name, where, [], `the placeholder names secret ${shown}, which this sandbox's policy binds nowhere`);
  const here = ctx.scope.placeholders.get(name);
  if (here === undefined || (where === "body" && !here.body)) {
    const part = where === "body" && here !== undefined ? " in a request body (the binding does not opt in with body)" : "";
    return refuse("credential_endpoint_mismatch", name, where, bindings, `secret ${shown} may not be sent here${part}; it is bound to ${shownBindings(bindings)}`);
  }
  const value = ctx.values.get(name);
  if (value === undefined) return refuse("credential_unknown", name, where, bindings, `the supervisor holds no value for secret ${shown} (not set, or deleted)`);
  return { ok: true, value };
}

// A header value may hold tab, printable ASCII and obs-text; never a line break or NUL.
const HEADER_UNSAFE = /[\u0000-\u0008\u000a-\u001f\u007f]/;

type Encode = (value: Buffer, p: FoundPlaceholder) => string | null;

/** Swaps every placeholder in `text`; `encode` gives the text for a value, null when it cannot go there. */
function substitute(text: string, where: CredentialPlace, ctx: CredentialContext, encode: Encode): Rewrite<string> {
  const found = findPlaceholders(text);
  if (found.length === 0) return { ok: true, value: text };
  if (found.length > MAX_SUBSTITUTIONS) return refuse("credential_unusable", found[0]!.name, where, [], `more than ${String(MAX_SUBSTITUTIONS)} placeholders in the request ${where}`);
  let out = "";
  let at = 0;
  for (const p of found) {
    const v = valueFor(p.name, where, ctx);
    if (!v.ok) return v;
    const text2 = encode(v.value, p);
    if (text2 === null) return refuse("credential_unusable", p.name, where, ctx.bindings(p.name), `the value of secret ${JSON.stringify(p.name)} cannot go in a ${where}: it holds a line break or control character`);
    out += text.slice(at, p.start) + text2;
    at = p.end;
  }
  return { ok: true, value: out + text.slice(at) };
}

const headerText: Encode = (value, p) => {
  if (p.encoded) return percentEncode(value);
  const s = value.toString("latin1");
  return HEADER_UNSAFE.test(s) ? null : s;
};

/** The request target (path and query): placeholders in path segments and query values, percent-encoded. */
export function rewriteTarget(target: string, ctx: CredentialContext): Rewrite<string> {
  return substitute(target, "url", ctx, (value) => percentEncode(value));
}

const BASIC_RE = /^(\s*basic\s+)([A-Za-z0-9+/]+={0,2})(\s*)$/i;

/**
 * Raw header pairs (name, value, ...): headers the scope sets are dropped from what the
 * workload sent and set from their templates; placeholders elsewhere are swapped, inside
 * Basic credentials too (decoded, swapped, re-encoded).
 */
export function rewriteHeaders(raw: readonly string[], ctx: CredentialContext): Rewrite<string[]> {
  const injected = new Set(ctx.scope.headers.map((h) => h.header));
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    let value = raw[i + 1]!;
    const lower = name.toLowerCase();
    if (injected.has(lower)) continue;
    const basic = lower === "authorization" ? BASIC_RE.exec(value) : null;
    if (basic !== null) {
      const decoded = Buffer.from(basic[2]!, "base64").toString("latin1");
      const swapped = substitute(decoded, "header", ctx, (v, p) => (p.encoded ? percentEncode(v) : v.toString("latin1")));
      if (!swapped.ok) return swapped;
      if (swapped.value !== decoded) value = `${basic[1]!}${Buffer.from(swapped.value, "latin1").toString("base64")}${basic[3]!}`;
    }
    const swapped = substitute(value, "header", ctx, headerText);
    if (!swapped.ok) return swapped;
    out.push(name, swapped.value);
  }
  for (const h of ctx.scope.headers) {
    let rendered = "";
    let at = 0;
    for (const m of h.value.matchAll(/\{\{secret:([^{}]*)\}\}/g)) {
      const name = m[1]!;
      const value = ctx.values.get(name);
      if (value === undefined) return refuse("credential_unknown", name, "header", ctx.bindings(name), `the supervisor holds no value for secret ${JSON.stringify(name)} (not set, or deleted), which header ${h.header} needs`);
      const s = value.toString("latin1");
      if (HEADER_UNSAFE.test(s)) return refuse("credential_unusable", name, "header", ctx.bindings(name), `the value of secret ${JSON.stringify(name)} cannot go in header ${h.header}: it holds a line break or control character`);
      rendered += h.value.slice(at, m.index) + s;
      at = m.index + m[0].length;
    }
    out.push(h.header, rendered + h.value.slice(at));
  }
  return { ok: true, value: out };
}

/**
 * A whole request body of an endpoint that opts in: a form body gets the value
 * percent-encoded, JSON gets it as the inside of a JSON string (UTF-8), anything else the
 * bytes themselves (percent-encoded where the placeholder was).
 */
export function rewriteBody(body: Buffer, contentType: string | undefined, ctx: CredentialContext): Rewrite<Buffer> {
  const type = (contentType ?? "").split(";")[0]!.trim().toLowerCase();
  const encode: Encode =
    type === "application/x-www-form-urlencoded"
      ? (v) => percentEncode(v)
      : type === "application/json" || type.endsWith("+json")
        ? (v) => Buffer.from(JSON.stringify(v.toString("utf8")).slice(1, -1), "utf8").toString("latin1")
        : (v, p) => (p.encoded ? percentEncode(v) : v.toString("latin1"));
  const text = body.toString("latin1");
  const swapped = substitute(text, "body", ctx, encode);
  if (!swapped.ok) return swapped;
  return { ok: true, value: swapped.value === text ? body : Buffer.from(swapped.value, "latin1") };
}
