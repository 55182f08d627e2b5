// What a CONNECT tunnel is. A CONNECT names only host:port, so the `tcp` and the `https`
// endpoints covering it are both asked, and the answer says how the proxy treats the bytes:
// a raw tunnel (tcp: any bytes), a blind TLS tunnel (its ClientHello checked), or a
// terminated one (each request decided). Pure.
import { evaluate, type Decision } from "./evaluate.js";
import type { Policy } from "./schema.js";

/** How an allowed tunnel carries bytes: raw, TLS tunnelled blind, TLS terminated here. */
export type TunnelKind = "tcp" | "https-blind" | "https-terminated";

export interface TunnelDecision {
  /** The protocol the tunnel is audited as. */
  protocol: "tcp" | "https";
  decision: Decision;
}

/** The kind of tunnel an allowing decision opens. */
export function tunnelKind(d: TunnelDecision): TunnelKind {
  if (d.protocol === "tcp") return "tcp";
  return d.decision.allow && d.decision.terminate === true ? "https-terminated" : "https-blind";
}

/**
 * A `tcp` endpoint allows any bytes, so when one allows host:port the tunnel is raw (as one
 * passthrough endpoint makes a tunnel blind); else `https` decides. A raw tunnel can carry
 * any protocol, so a deny entry for any protocol at host:port refuses it; a deny entry for
 * tcp alone leaves an https endpoint to allow the tunnel with its TLS checks. Denied both
 * ways, an explicit deny is reported over a missing rule.
 */
export function decideTunnel(policy: Policy, host: string, port: number): TunnelDecision {
  const as = (protocol: "http" | "https" | "tcp"): Decision => evaluate(policy, { host, port, protocol });
  const tcp = as("tcp");
  const https = as("https");
  const readings = [tcp, https, as("http")];
  const rawDenied = readings.find((d) => !d.allow && d.reason === "explicit_deny");
  // Audit mode: a deny entry that would refuse some reading flags a raw tunnel.
  const rawFlagged = readings.map((d) => (d.allow ? d.wouldDeny : undefined)).find((w) => w?.reason === "explicit_deny");
  // A grant that only audit mode gives never outranks one a rule gives: an https endpoint's
  // TLS checks and termination must not turn into a raw tunnel because tcp "would deny".
  const enforced = (d: Decision): boolean => d.allow && d.wouldDeny === undefined;
  if (enforced(tcp) && rawDenied === undefined && rawFlagged === undefined) return { protocol: "tcp", decision: tcp };
  if (enforced(https) || (!https.allow && https.reason === "explicit_deny")) return { protocol: "https", decision: https };
  if (rawDenied !== undefined) return { protocol: "tcp", decision: rawDenied };
  // Only audit mode lets it through. An https endpoint flagged by an audit-mode entry keeps
  // its TLS mode (termination, credentials); anything else goes raw, as a would-deny.
  if (https.allow && https.wouldDeny?.policyWide !== true) return { protocol: "https", decision: https };
  if (tcp.allow) {
    const wouldDeny = rawFlagged ?? tcp.wouldDeny;
    return { protocol: "tcp", decision: wouldDeny === undefined ? tcp : { ...tcp, wouldDeny } };
  }
  return { protocol: "https", decision: https };
}

/**
 * Whether a tunnel opened as `kind` may stay open under `policy`: the decision to check its
 * address with when it may, a denial when not. A raw tunnel needs a tcp grant still (its
 * bytes were never checked); a blind TLS tunnel closes when its endpoint now terminates
 * (requests must be seen); anything the policy still allows wider stays.
 */
export function tunnelStaysOpen(policy: Policy, kind: TunnelKind, host: string, port: number): Decision {
  const now = decideTunnel(policy, host, port);
  if (!now.decision.allow) return now.decision;
  const nowKind = tunnelKind(now);
  if ((kind === "tcp" && nowKind !== "tcp") || (kind === "https-blind" && nowKind === "https-terminated")) {
    return { allow: false, reason: "no_matching_rule", rule: now.decision.rule };
  }
  return now.decision;
}
