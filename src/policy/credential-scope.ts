// Where a policy lets each secret go: the secrets it references (what its supervisor is sent),
// the bindings of one secret (named in a refusal and in `secret list`), and the credentials
// in force for one request (the endpoints that cover and allow it). Pure.
import { isHeaderInjection, credentialSecrets, type Credential, type HeaderInjection } from "./credentials.js";
import { endpointCovers, endpointOutcome, type EgressRequest } from "./evaluate.js";
import { pathMatches } from "./paths.js";
import type { Policy } from "./schema.js";

/** Every secret name the policy refers to, sorted. */
export function referencedSecrets(policy: Policy): string[] {
  const names = new Set<string>();
  for (const r of policy.network.rules) for (const e of r.endpoints) for (const c of e.credentials ?? []) for (const n of credentialSecrets(c)) names.add(n);
  return [...names].sort();
}

/** Where one secret may go: what a refusal names (never the value). */
export interface SecretBinding {
  rule: string;
  host: string;
  ports: readonly number[];
  /** Null: every path the endpoint allows. */
  paths: readonly string[] | null;
  /** "placeholder": swapped where the workload sends it; "header": set by the supervisor. */
  form: "placeholder" | "header";
}

export function secretBindings(policy: Policy, secret: string): SecretBinding[] {
  const out: SecretBinding[] = [];
  for (const r of policy.network.rules) {
    for (const e of r.endpoints) {
      for (const c of e.credentials ?? []) {
        if (!credentialSecrets(c).includes(secret)) continue;
        out.push({ rule: r.name, host: e.host, ports: e.ports, paths: c.paths ?? null, form: isHeaderInjection(c) ? "header" : "placeholder" });
      }
    }
  }
  return out;
}

/** The credentials in force for one request. */
export interface CredentialScope {
  /** Secrets whose placeholders are swapped in this request; `body`: in its body too. */
  readonly placeholders: ReadonlyMap<string, { readonly body: boolean }>;
  /** Largest body read to swap placeholders in; null: the body is not read. */
  readonly bodyMaxBytes: number | null;
  /** Headers the supervisor sets, one per name (the first in file order). */
  readonly headers: readonly HeaderInjection[];
}

export const NO_CREDENTIALS: CredentialScope = { placeholders: new Map(), bodyMaxBytes: null, headers: [] };

const appliesTo = (c: Credential, path: string): boolean => c.paths === undefined || c.paths.some((g) => pathMatches(g, path));

/**
 * Over every endpoint that covers and allows the request (a request inside a terminated
 * tunnel: method and path given), the bindings whose paths match it.
 */
export function credentialScope(policy: Policy, req: EgressRequest & { method: string; path: string }): CredentialScope {
  const placeholders = new Map<string, { body: boolean }>();
  const headers: HeaderInjection[] = [];
  let bodyMaxBytes: number | null = null;
  for (const r of policy.network.rules) {
    for (const e of r.endpoints) {
      if (e.credentials === undefined || !endpointCovers(e, req) || endpointOutcome(e, req) !== "allow") continue;
      for (const c of e.credentials) {
        if (!appliesTo(c, req.path)) continue;
        if (isHeaderInjection(c)) {
          if (!headers.some((h) => h.header === c.header)) headers.push(c);
          continue;
        }
        const body = c.body !== undefined;
        placeholders.set(c.secret, { body: body || placeholders.get(c.secret)?.body === true });
        if (c.body !== undefined) bodyMaxBytes = Math.max(bodyMaxBytes ?? 0, c.body.maxBytes);
      }
    }
  }
  return placeholders.size === 0 && headers.length === 0 ? NO_CREDENTIALS : { placeholders, bodyMaxBytes, headers };
}
