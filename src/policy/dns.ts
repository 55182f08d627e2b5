// DNS under the policy: which names the supervisor's resolver answers for the workload. Pure.
//
// A name resolves when some request to it could be allowed: an endpoint of some rule names it
// (its host pattern matches) on some port and protocol that no enforcing deny entry refuses
// for that name. Any other name is NXDOMAIN, and no query for it is sent upstream: a denied
// name carries nothing out of the sandbox (DNS exfiltration through names). Under the whole
// policy's audit mode every name resolves, recorded as a would-deny when no endpoint names it.
// The resolver answers, it does not grant: every connection is decided again by `evaluate`.
import { hostMatches, normalizeRequestHost } from "./hosts.js";
import { parseIp } from "./cidr.js";
import type { Policy } from "./schema.js";

export type NameDecision =
  | { allow: true; rule: string; wouldDeny?: { reason: "no_matching_rule" | "explicit_deny"; rule?: string } }
  | { allow: false; reason: "not_a_name" | "no_matching_rule" | "explicit_deny"; rule?: string };

/** The rule credited with a name the policy's audit mode lets resolve. */
export const DNS_AUDIT_RULE = "(enforcement: audit)";

/** `name` as a query asks for it (any case, a trailing dot or not). */
export function nameDecision(policy: Policy, name: string): NameDecision {
  const host = normalizeRequestHost(name);
  // An IP literal is not a name (a client resolving "10.0.0.1" gets nothing).
  if (host === null || parseIp(host) !== null) return { allow: false, reason: "not_a_name" };
  let denied: { rule: string } | undefined;
  for (const rule of policy.network.rules) {
    for (const e of rule.endpoints) {
      if (!hostMatches(e.host, host)) continue;
      // A port of this endpoint that no enforcing deny entry refuses for this name and protocol.
      const refusing = e.ports.map((port) => enforcingDeny(policy, host, port, e.protocol));
      if (refusing.some((d) => d === undefined)) return { allow: true, rule: rule.name };
      denied ??= { rule: refusing[0]! };
    }
  }
  const refusal = denied === undefined ? ({ allow: false, reason: "no_matching_rule" } as const) : ({ allow: false, reason: "explicit_deny", rule: denied.rule } as const);
  if (policy.network.enforcement !== "audit") return refusal;
  return { allow: true, rule: DNS_AUDIT_RULE, wouldDeny: { reason: refusal.reason, ...(refusal.reason === "explicit_deny" ? { rule: refusal.rule } : {}) } };
}

/** The name of the first deny entry not in audit mode that refuses (host, port, protocol), if any. */
function enforcingDeny(policy: Policy, host: string, port: number, protocol: string): string | undefined {
  for (const [i, d] of policy.network.deny.entries()) {
    if (d.enforcement === "audit") continue;
    if (d.protocol !== undefined && d.protocol !== protocol) continue;
    if (d.ports !== undefined && !d.ports.includes(port)) continue;
    if (hostMatches(d.host, host)) return d.name ?? `deny[${String(i)}]`;
  }
  return undefined;
}
