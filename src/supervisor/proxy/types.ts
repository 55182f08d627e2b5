// The egress proxy's vocabulary (index.ts re-exports it as its public face): its options,
// what a revocation closed, the audit record's type and the reasons other modules name.
// Types and constants only, plus the default resolver.
import dns from "node:dns";
import type { HostAddresses } from "../../policy/core.js";
import type { WireAuditEvent } from "../../protocol/wire.js";
import type { ProxyBounds } from "../../protocol/launch.js";
import type { PolicyHolder } from "../policy-holder.js";
import type { Logger } from "../logger.js";
import type { LeafSource } from "../tls/ciphers.js";
import type { SecretValues } from "../credentials.js";

export type Resolver = (host: string) => Promise<string[]>;

export type EgressProtocol = "http" | "https" | "tcp";

/** One egress decision, as it travels to the gateway (its schema is in the wire protocol). */
export type AuditEvent = WireAuditEvent;

export interface EgressProxyOptions {
  policy: PolicyHolder;
  /** Host name → candidate IPs. Defaults to dns.promises.lookup({ all: true }). */
  resolve?: Resolver;
  /**
   * The answer a cache in front of `resolve` holds for a host now, if any (DnsCache#cached):
   * used without waiting. Its addresses are checked like any others.
   */
  cachedAddresses?: (host: string) => string[] | undefined;
  onAudit: (event: AuditEvent) => void;
  logger: Logger;
  /** Upstream TCP connect deadline; exceeded → 504. */
  connectTimeoutMs?: number;
  /** DNS deadline; exceeded → 504. */
  resolveTimeoutMs?: number;
  /** The gateway host's addresses right now (refused unless an endpoint names them). Default: none known. */
  hostAddresses?: () => HostAddresses;
  /** Non-null while egress is locked down (control session lost): the reason every request is denied with. */
  lockdown?: () => string | null;
  /**
   * Leaf certificates signed by the sandbox's CA: with them, https endpoints with L7 rules
   * are terminated here and each request inside is decided. Without them such tunnels are
   * refused (tls_termination_unavailable), never tunnelled blind.
   */
  tls?: LeafSource;
  /** An extra CA (PEM) the proxy trusts for origins besides the system roots (private origins, tests). */
  upstreamCa?: string;
  /** The secret values the supervisor holds, for the placeholders the policy binds. Absent: none (every placeholder is unknown). */
  credentials?: SecretValues;
  /** How long a blind https tunnel waits for its ClientHello (default HELLO_TIMEOUT_MS). */
  helloTimeoutMs?: number;
  /** The workload's connections: how many may be open, header and idle timeouts (default DEFAULT_PROXY_BOUNDS). */
  connections?: ProxyBounds;
}

/** What revoke() closed. */
export interface Revocation {
  /** Every connection closed: tunnels + client connections + idle upstream sockets. */
  closed: number;
  /** CONNECT tunnels (with what runs inside them) and plain ws:// WebSockets, open or still connecting. */
  tunnels: number;
  /** Plain-HTTP client connections of the workload (kept-alive or with a request in flight). */
  clients: number;
  /** Pooled upstream keep-alive sockets. */
  upstream: number;
}

/** Reason a tunnel that must be terminated is refused when the supervisor has no CA. */
export const TLS_UNAVAILABLE = "tls_termination_unavailable";

/** Reason of the audit record of connections refused past the cap on the workload's open connections. */
export const CONNECTION_LIMIT = "connection_limit";

/** Reason used when no policy is loaded: the proxy fails closed. */
export const POLICY_MISSING = "policy_missing";

export const defaultResolver: Resolver = async (host) => {
  const found = await dns.promises.lookup(host, { all: true, order: "verbatim" });
  return found.map((a) => a.address);
};
