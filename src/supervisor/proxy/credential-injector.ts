// The proxy's side of credentials: for one request, the placeholders swapped (target,
// headers, and the body when its endpoint opts in, read up to its bound) or the refusal
// answered in their place. The swap itself is pure (credentials.ts); this reads bodies
// and words the answers, which name secrets and bindings, never values.
import type http from "node:http";
import { NO_CREDENTIALS, credentialScope, secretBindings, type Policy } from "../../policy/core.js";
import { targetFields } from "./refusals.js";
import { rewriteBody, rewriteHeaders, rewriteTarget, type CredentialContext, type CredentialRefusal, type Rewrite, type SecretValues } from "../credentials.js";

/** X-Proxy-Error of a request refused for a placeholder. */
export const CREDENTIAL_ERROR = "sandgate-credential";

const NO_VALUES: SecretValues = { get: () => undefined };

export interface PreparedRequest {
  /** The request target to send upstream. */
  path: string;
  /** End-to-end headers to send upstream (without Host). */
  headers: string[];
  ctx: CredentialContext;
  /** Read the body (at most this many bytes) and swap in it; null: the body passes untouched. */
  bodyMaxBytes: number | null;
}

/** A request inside a terminated tunnel, already allowed by the policy. */
export function prepareRequest(policy: Policy, req: { host: string; port: number; method: string; url: string }, headers: string[], values: SecretValues | undefined): Rewrite<PreparedRequest> {
  const scope = credentialScope(policy, { host: req.host, port: req.port, protocol: "https", method: req.method, path: req.url });
  const ctx: CredentialContext = { scope, bindings: (s) => secretBindings(policy, s), values: values ?? NO_VALUES };
  const target = rewriteTarget(req.url, ctx);
  if (!target.ok) return target;
  const swapped = rewriteHeaders(headers, ctx);
  if (!swapped.ok) return swapped;
  return { ok: true, value: { path: target.value, headers: swapped.value, ctx, bodyMaxBytes: scope.bodyMaxBytes } };
}

/** Plain http: credentials bind to terminated https only, so any placeholder here is refused. */
export function refusePlain(policy: Policy, url: string, headers: readonly string[]): CredentialRefusal | null {
  const ctx: CredentialContext = { scope: NO_CREDENTIALS, bindings: (s) => secretBindings(policy, s), values: NO_VALUES };
  const target = rewriteTarget(url, ctx);
  if (!target.ok) return target.refusal;
  const swapped = rewriteHeaders(headers, ctx);
  return swapped.ok ? null : swapped.refusal;
}

export type BodyRead = { ok: true; body: Buffer } | { ok: false; status: 413 | 415; error: string; message: string };

/**
 * The whole request body, or why it cannot be swapped in: larger than the endpoint's bound
 * (413, nothing sent upstream) or content-encoded (415: a placeholder inside is not visible).
 */
export function readBoundedBody(req: http.IncomingMessage, maxBytes: number): Promise<BodyRead> {
  const encoding = (req.headers["content-encoding"] ?? "identity").trim().toLowerCase();
  if (encoding !== "identity") {
    return Promise.resolve({ ok: false, status: 415, error: "credential_body_encoded", message: `a body with Content-Encoding ${encoding} cannot be read for placeholders; send it unencoded` });
  }
  const tooLarge = { ok: false, status: 413, error: "credential_body_too_large", message: `the body is larger than ${String(maxBytes)} bytes, the bound for placeholders in bodies on this endpoint` } as const;
  if (Number(req.headers["content-length"] ?? 0) > maxBytes) return Promise.resolve(tooLarge);
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (c: Buffer): void => {
      size += c.length;
      if (size > maxBytes) {
        req.off("data", onData);
        req.pause();
        resolve(tooLarge);
        return;
      }
      chunks.push(c);
    };
    req.on("data", onData);
    req.once("end", () => resolve({ ok: true, body: Buffer.concat(chunks) }));
    req.once("error", () => resolve({ ok: false, status: 413, error: "credential_body_unreadable", message: "the request body was cut" }));
  });
}

/** Swaps placeholders in a body that was read whole. */
export function swapBody(body: Buffer, contentType: string | undefined, prepared: PreparedRequest): Rewrite<Buffer> {
  return rewriteBody(body, contentType, prepared.ctx);
}

/** The body of a request whose body could not be read for placeholders (413, 415). */
export function unreadableBody(t: { host: string; port: number; method: string; path?: string }, r: BodyRead & { ok: false }): object {
  return { error: r.error, ...targetFields(t), message: r.message };
}

/** The 403 body of a refusal: the secret's name and where it is bound, never a value. */
export function refusalBody(t: { host: string; port: number; method: string; path?: string }, r: CredentialRefusal): object {
  return { error: r.reason, secret: r.secret, where: r.where, host: t.host, port: t.port, method: t.method, path: t.path ?? null, bindings: r.bindings, message: r.message };
}
