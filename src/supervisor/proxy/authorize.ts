// Authorizing: every decision of the proxy, on any path. A target is checked against the
// policy in force (or refused under lockdown, or with no policy), its host resolved exactly
// once, every resolved address checked, and the connection goes to the checked IP (no
// second lookup, so a DNS rebinding between check and connect cannot happen). A request
// inside a terminated tunnel is decided at the address already checked for the tunnel.
import net from "node:net";
import { evaluate, checkResolvedAddress, decideTunnel, tunnelKind, NO_HOST_ADDRESSES, type Decision, type HostAddresses, type Policy, type TunnelKind, type WouldDeny } from "../../policy/core.js";
import type { PolicyHolder } from "../policy-holder.js";
import { withTimeout } from "../../util/timeout.js";
import type { Auditor } from "./auditor.js";
import { unreachable, type Denial, type Unreachable } from "./refusals.js";
import type { Target } from "./target.js";
import { POLICY_MISSING, type AuditEvent, type Resolver } from "./types.js";

/**
 * tunnel: what an allowed CONNECT carries; a blind https one is audited once its ClientHello was read.
 * wouldDeny: only audit mode let it through. record: the allow's audit record, when the caller sends it (at the request's end).
 */
export type Allowed = { kind: "allow"; address: string; rule: string; tunnel?: TunnelKind; wouldDeny?: WouldDeny; record?: AuditEvent };

export type Outcome = Allowed | Denial | Unreachable;

/** A request decided at a known address: allowed ones carry the policy that allowed it (for its credentials). */
export type AtAddress = { kind: "allow"; rule: string; wouldDeny?: WouldDeny; policy: Policy } | Denial;

export interface AuthorizerOptions {
  policy: PolicyHolder;
  audit: Auditor;
  resolve: Resolver;
  resolveTimeoutMs: number;
  cachedAddresses?: ((host: string) => string[] | undefined) | undefined;
  lockdown?: (() => string | null) | undefined;
  hostAddresses?: (() => HostAddresses) | undefined;
}

export interface Authorizer {
  /**
   * Policy check, one resolution, address check. Emits the audit event for the decision,
   * except an allow when `deferAllow` (it rides on the outcome as `record`) and a blind
   * https tunnel's (sent once its ClientHello was read). A decision is only ever made under
   * the policy in force when it is returned: a new revision or a lockdown during the lookup
   * starts it over. A CONNECT target's protocol is set to what decideTunnel says it carries.
   */
  authorize(t: Target, deferAllow?: boolean): Promise<Outcome>;
  /** An https request to `address`, checked when its tunnel opened; `url`: its path and query. Nothing awaited, nothing audited. */
  decideAt(t: Target, address: string, url: string): AtAddress;
  /** Non-null while egress is locked down: the reason. */
  locked(): string | null;
  /** The gateway host's addresses now. */
  hostAddresses(): HostAddresses;
}

export function createAuthorizer(opts: AuthorizerOptions): Authorizer {
  const { policy, audit, resolve, resolveTimeoutMs } = opts;
  const locked = (): string | null => opts.lockdown?.() ?? null;
  const hostAddresses = (): HostAddresses => opts.hostAddresses?.() ?? NO_HOST_ADDRESSES;

  async function authorize(t: Target, deferAllow = false): Promise<Outcome> {
    const lock = locked();
    const loaded = policy.current();
    if (lock !== null || loaded === undefined) {
      const o = { kind: "deny", reason: lock ?? POLICY_MISSING } as const;
      audit.audit(t, o);
      return o;
    }
    let decision: Decision;
    let tunnel: TunnelKind | undefined;
    if (t.method === "CONNECT") {
      const d = decideTunnel(loaded.policy, t.host, t.port);
      t.protocol = d.protocol;
      decision = d.decision;
      tunnel = tunnelKind(d);
    } else {
      decision = evaluate(loaded.policy, {
        host: t.host,
        port: t.port,
        protocol: t.protocol,
        ...(t.protocol === "http" ? { method: t.method } : {}),
        ...(t.path === undefined ? {} : { path: t.path }),
        ...(t.overrides === undefined ? {} : { methodOverrides: t.overrides }),
      });
    }
    if (!decision.allow) {
      const o: Denial = { kind: "deny", reason: decision.reason };
      if (decision.rule !== undefined) o.rule = decision.rule;
      audit.audit(t, o);
      return o;
    }
    let addresses: string[];
    const cached = net.isIP(t.host) !== 0 ? [t.host] : opts.cachedAddresses?.(t.host);
    if (cached !== undefined && cached.length > 0) {
      // No wait, so the policy checked above is the one in force: nothing to start over.
      addresses = cached;
    } else {
      let failed: { err: unknown } | undefined;
      try {
        addresses = await withTimeout(resolve(t.host), resolveTimeoutMs);
      } catch (err) {
        addresses = [];
        failed = { err };
      }
      if (policy.current() !== loaded || locked() !== null) return authorize(t, deferAllow);
      if (failed !== undefined) {
        // The policy allowed it; the network did not deliver. Audit the decision, report the failure.
        audit.audit(t, { kind: "allow", rule: decision.rule, wouldDeny: decision.wouldDeny });
        return unreachable(failed.err);
      }
      if (addresses.length === 0) {
        audit.audit(t, { kind: "allow", rule: decision.rule, wouldDeny: decision.wouldDeny });
        return { kind: "unreachable", status: 502, code: "ENOTFOUND", message: `no addresses for ${t.host}` };
      }
    }
    // Every candidate must pass: a name that resolves to one public and one
    // internal address is refused as a whole, not silently narrowed.
    const host = hostAddresses();
    for (const address of addresses) {
      const check = checkResolvedAddress(address, decision.allowPrivate, host);
      if (!check.ok) {
        const o = { kind: "deny", reason: check.reason, rule: decision.rule, address } as const;
        audit.audit(t, o);
        return o;
      }
    }
    const address = addresses.find((a) => net.isIPv4(a)) ?? addresses[0]!;
    const o = { kind: "allow", address, rule: decision.rule, ...(tunnel !== undefined && { tunnel }), ...(decision.wouldDeny !== undefined && { wouldDeny: decision.wouldDeny }) } as const;
    if (deferAllow) return Object.assign({}, o, { record: audit.record(t, o) });
    if (tunnel !== "https-blind") audit.audit(t, o);
    return o;
  }

  function decideAt(t: Target, address: string, url: string): AtAddress {
    const lock = locked();
    const loaded = policy.current();
    if (lock !== null || loaded === undefined) return { kind: "deny", reason: lock ?? POLICY_MISSING };
    const d = evaluate(loaded.policy, { host: t.host, port: t.port, protocol: "https", method: t.method, path: url, methodOverrides: t.overrides ?? [] });
    if (!d.allow) return { kind: "deny", reason: d.reason, ...(d.rule === undefined ? {} : { rule: d.rule }) };
    const check = checkResolvedAddress(address, d.allowPrivate, hostAddresses());
    if (!check.ok) return { kind: "deny", reason: check.reason, rule: d.rule, address };
    return { kind: "allow", rule: d.rule, ...(d.wouldDeny !== undefined && { wouldDeny: d.wouldDeny }), policy: loaded.policy };
  }

  return { authorize, decideAt, locked, hostAddresses };
}
