// The egress decision: default deny, explicit denies first, then the first allowing rule.
import { hostMatches } from "./hosts.js";
import { pathMatches } from "./paths.js";
import { tlsMode, type Endpoint, type HttpRule, type Policy, type Protocol } from "./schema.js";

export interface EgressRequest {
  /** As the client sent it (CONNECT authority or Host header) without the port; [v6] brackets allowed. */
  readonly host: string;
  readonly port: number;
  readonly protocol: Protocol;
  /**
   * The request method, case-sensitive as on the wire: for http, and for a request inside a
   * terminated https tunnel. Absent for the tunnel itself (CONNECT).
   */
  readonly method?: string;
  /** HTTP only: the raw request target in origin form ("/v1/x?y=z"); query and fragment are ignored. */
  readonly path?: string;
  /**
   * HTTP only: the methods the request asks the origin to act as (override headers, `_method`;
   * see overrideMethods). The request is allowed only if it would be with each of them too.
   */
  readonly methodOverrides?: readonly string[];
}

export type DenyReason = "no_matching_rule" | "explicit_deny" | "method_not_allowed" | "path_not_allowed" | "method_override_not_allowed";

/** What an enforcing policy would have refused: the request goes through, recorded as "would deny". */
export interface WouldDeny {
  readonly reason: DenyReason;
  readonly rule?: string;
  /** The whole policy's audit mode let it through (no endpoint's grant). */
  readonly policyWide?: true;
}

export type Decision =
  | {
      allow: true;
      /** Name of the first rule whose endpoint allowed the request. */
      rule: string;
      /**
       * Union of allowPrivate over every endpoint that allows this request: pass it to
       * checkResolvedAddress for each address the host resolves to.
       */
      allowPrivate: readonly string[];
      /**
       * For an https tunnel (no method): every endpoint that allows it terminates TLS, so the
       * proxy must end the workload's TLS and decide each request inside. Absent otherwise.
       */
      terminate?: true;
      /**
       * Set when only audit mode lets the request through (an `enforcement: audit` rule, deny
       * entry or policy): what enforcing would have said. The audit trail records "would deny".
       */
      wouldDeny?: WouldDeny;
    }
  | { allow: false; reason: DenyReason; rule?: string };

/** The rule an allow is credited to when the whole policy's audit mode let it through. */
export const AUDIT_MODE_RULE = "(enforcement: audit)";

type EndpointOutcome = "allow" | "method_not_allowed" | "path_not_allowed";

export function endpointCovers(endpoint: Endpoint, req: EgressRequest): boolean {
  return endpoint.protocol === req.protocol && endpoint.ports.includes(req.port) && hostMatches(endpoint.host, req.host);
}

function l7Outcome(rules: readonly HttpRule[], req: EgressRequest): EndpointOutcome {
  const { method, path } = req;
  let methodSeen = false;
  for (const rule of rules) {
    const methodOk = rule.methods === undefined || (method !== undefined && (rule.methods as readonly string[]).includes(method));
    if (!methodOk) continue;
    methodSeen = true;
    const pathOk = rule.paths === undefined || (path !== undefined && rule.paths.some((glob) => pathMatches(glob, path)));
    if (pathOk) return "allow";
  }
  // A method that some rule admits means the path was the problem.
  return methodSeen ? "path_not_allowed" : "method_not_allowed";
}

export function endpointOutcome(endpoint: Endpoint, req: EgressRequest): EndpointOutcome {
  // L7 rules exist on http and terminated https endpoints (the schema enforces it). An
  // https tunnel is allowed here and its requests are decided one by one once terminated.
  if (endpoint.rules === undefined || endpoint.protocol === "tcp") return "allow";
  if (endpoint.protocol === "https" && req.method === undefined) return "allow";
  return l7Outcome(endpoint.rules, req);
}

function requestIsWellFormed(req: EgressRequest): boolean {
  return Number.isInteger(req.port) && req.port >= 1 && req.port <= 65535 && typeof req.host === "string";
}

export function evaluate(policy: Policy, req: EgressRequest): Decision {
  const decision = evaluateOverrides(policy, req);
  if (decision.allow || policy.network.enforcement !== "audit") return decision;
  // The whole policy audits: what no endpoint covers goes through as "would deny" (what an
  // endpoint covers was already let through with its TLS mode and private ranges). Such a
  // tunnel is never terminated (no rule asked for it), and no private range is opened by it.
  const wouldDeny: WouldDeny = { reason: decision.reason, ...(decision.rule === undefined ? {} : { rule: decision.rule }), policyWide: true };
  return { allow: true, rule: decision.rule ?? AUDIT_MODE_RULE, allowPrivate: [], wouldDeny };
}

function evaluateOverrides(policy: Policy, req: EgressRequest): Decision {
  const decision = evaluateMethod(policy, req);
  if (!decision.allow || req.protocol === "tcp" || req.method === undefined) return decision;
  for (const method of req.methodOverrides ?? []) {
    if (method === req.method) continue;
    const overridden = evaluateMethod(policy, { ...req, method });
    if (!overridden.allow) return { allow: false, reason: "method_override_not_allowed", rule: overridden.rule ?? decision.rule };
    // An override only an audit-mode rule lets through is a would-deny of the request.
    if (overridden.wouldDeny !== undefined && decision.wouldDeny === undefined) {
      return { ...decision, wouldDeny: { reason: "method_override_not_allowed", ...(overridden.wouldDeny.rule === undefined ? {} : { rule: overridden.wouldDeny.rule }) } };
    }
  }
  return decision;
}

function evaluateMethod(policy: Policy, req: EgressRequest): Decision {
  if (!requestIsWellFormed(req)) return { allow: false, reason: "no_matching_rule" };

  // The whole policy in audit mode: nothing below refuses; what would is remembered.
  const policyAudit = policy.network.enforcement === "audit";
  // An audit-mode deny entry does not decide: it flags what the rules allow.
  let auditedDeny: WouldDeny | undefined;
  // Under the policy's audit mode, the first entry that would have refused (enforcing's answer).
  let enforcedDeny: WouldDeny | undefined;
  for (const [i, d] of policy.network.deny.entries()) {
    if (d.protocol !== undefined && d.protocol !== req.protocol) continue;
    if (d.ports !== undefined && !d.ports.includes(req.port)) continue;
    if (!hostMatches(d.host, req.host)) continue;
    const rule = d.name ?? `deny[${String(i)}]`;
    if (d.enforcement === "audit") auditedDeny ??= { reason: "explicit_deny", rule };
    else if (policyAudit) enforcedDeny ??= { reason: "explicit_deny", rule };
    else return { allow: false, reason: "explicit_deny", rule };
  }

  // Enforcing allows first; an audit-mode rule's L7 refusal only lets a request through
  // when no enforcing endpoint allows it; the policy's audit mode only when no such rule does
  // (so a rule's own audit mode decides the same with or without the policy's).
  const enforced = grants();
  const audited = grants();
  const policyAudited = grants();
  let refusal: { reason: Exclude<EndpointOutcome, "allow">; rule: string } | undefined;
  for (const rule of policy.network.rules) {
    for (const endpoint of rule.endpoints) {
      if (!endpointCovers(endpoint, req)) continue;
      const outcome = endpointOutcome(endpoint, req);
      if (outcome === "allow") enforced.add(rule.name, endpoint);
      else {
        if (refusal === undefined || (refusal.reason === "method_not_allowed" && outcome === "path_not_allowed")) refusal = { reason: outcome, rule: rule.name };
        if (rule.enforcement === "audit") audited.add(rule.name, endpoint);
        else if (policyAudit) policyAudited.add(rule.name, endpoint);
      }
    }
  }
  const tunnel = req.protocol === "https" && req.method === undefined;
  if (enforced.by !== undefined) return enforced.decision(tunnel, enforcedDeny ?? auditedDeny);
  for (const g of [audited, policyAudited]) {
    if (g.by !== undefined && refusal !== undefined) return g.decision(tunnel, enforcedDeny ?? { reason: refusal.reason, rule: refusal.rule });
  }
  // Nothing lets it through: enforcing's answer (evaluate turns it into a would-deny under the policy's audit mode).
  if (enforcedDeny !== undefined) return { allow: false, reason: "explicit_deny", ...(enforcedDeny.rule === undefined ? {} : { rule: enforcedDeny.rule }) };
  if (refusal !== undefined) return { allow: false, reason: refusal.reason, rule: refusal.rule };
  return { allow: false, reason: "no_matching_rule" };
}

/** The endpoints that let a request through: the first rule's name, their private ranges, whether all terminate. */
function grants() {
  let by: string | undefined;
  let terminate = true;
  const allowPrivate = new Set<string>();
  return {
    get by() {
      return by;
    },
    add(rule: string, endpoint: Endpoint): void {
      by ??= rule;
      // One endpoint that tunnels blind allows the whole tunnel blind.
      if (tlsMode(endpoint) !== "terminate") terminate = false;
      for (const range of endpoint.allowPrivate) allowPrivate.add(range);
    },
    decision(tunnel: boolean, wouldDeny: WouldDeny | undefined): Decision {
      return {
        allow: true,
        rule: by!,
        allowPrivate: [...allowPrivate],
        ...(tunnel && terminate && { terminate: true as const }),
        ...(wouldDeny !== undefined && { wouldDeny }),
      };
    },
  };
}
