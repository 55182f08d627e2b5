// The egress proxy: the workload's only way out. This wires its pieces to the listening
// forward proxy (one http.Server, its connections bounded) and owns revoke() and close():
//   authorize.ts   every decision (policy, one resolution, address check)
//   plain-http.ts  plain requests and ws:// upgrades → forward.ts, upgrade.ts
//   tunnel.ts      CONNECT: raw tcp, blind https behind the hello gate, or → terminated.ts
//   terminated.ts  requests inside terminated https, credential injection (credential-injector.ts)
//   registry.ts    the open connections and their grants; revoke.ts re-checks them
//   auditor.ts     audit records (shaped in audit-record.ts); refusals.ts / respond.ts the answers
// A second listener (the transparent path) joins the same pieces through `entries`.
import http from "node:http";
import type net from "node:net";
import type { AddressInfo } from "node:net";
import type { Duplex } from "node:stream";
import { DEFAULT_PROXY_BOUNDS } from "../../protocol/launch.js";
import { boundConnections, boundedServerOptions, type ClosedConnection } from "../../util/connection-bounds.js";
import { listen } from "../listen.js";
import { HELLO_TIMEOUT_MS } from "../tls/hello-gate.js";
import { connectionLimitRecord } from "./audit-record.js";
import { createAuditor } from "./auditor.js";
import { createAuthorizer } from "./authorize.js";
import type { ProxyContext } from "./context.js";
import { ABSOLUTE_FORM, createPlainHttp, type PlainHttp, type TargetReader } from "./plain-http.js";
import { ConnectionRegistry } from "./registry.js";
import { revokeAll, revokeDenied } from "./revoke.js";
import { createTerminatedHttps } from "./terminated.js";
import { createTunnels, type TunnelOptions } from "./tunnel.js";
import { defaultResolver, type EgressProxyOptions, type Revocation } from "./types.js";

export { CONNECTION_LIMIT, POLICY_MISSING, TLS_UNAVAILABLE, defaultResolver } from "./types.js";
export type { AuditEvent, EgressProtocol, EgressProxyOptions, Resolver, Revocation } from "./types.js";
export type { HttpTarget } from "./target.js";
export type { PlainHttp, TargetReader } from "./plain-http.js";
export type { TunnelAnswer } from "./respond.js";
export type { TunnelOptions } from "./tunnel.js";

/**
 * The proxy's pieces for a second listener, whose sockets are not proxy connections (the
 * transparent path): the same decisions, audit records, credential rules, registry and
 * revocation as the forward proxy's. Its sockets are its own to accept, bound and close.
 */
export interface EgressEntries {
  /**
   * A socket whose target is known otherwise (an original destination, a ClientHello's SNI):
   * registered, decided and carried exactly as after `CONNECT host:port` (raw tcp, blind https
   * behind the hello gate, or terminated https); `opts.head`: its first bytes, already read.
   */
  tunnel: (socket: Duplex, target: { host: string; port: number }, opts: TunnelOptions) => void;
  /** A socket that will carry plain HTTP, registered before its first request (revocation then reaches it). */
  addClient: (socket: net.Socket) => void;
  /** Handlers for a listener's own http.Server (requests, ws:// upgrades), its targets read by `reader`. */
  plainHttp: (reader: TargetReader) => PlainHttp;
}

export interface EgressProxy {
  readonly server: http.Server;
  listen(port: number, host?: string): Promise<AddressInfo>;
  isListening(): boolean;
  /**
   * Re-checks every open connection against the policy in force now (call it right after a
   * new revision was installed, or a lockdown began) and closes, synchronously, each one it
   * would not allow: a CONNECT tunnel whose host:port it denies; a client connection with a
   * request in flight it denies, or idle after one; an idle upstream keep-alive socket that
   * served one. Under lockdown or without a policy, every connection is closed.
   */
  revoke(): Revocation;
  /** For a second listener: see EgressEntries. */
  readonly entries: EgressEntries;
  /** Stops accepting, lets in-flight HTTP requests finish for up to graceMs, then cuts everything. */
  close(graceMs?: number): Promise<void>;
}



export function createEgressProxy(options: EgressProxyOptions): EgressProxy {
  const { policy, logger } = options;
  const audit = createAuditor(options.onAudit, policy, logger);
  const authorizer = createAuthorizer({
    policy,
    audit,
    resolve: options.resolve ?? defaultResolver,
    resolveTimeoutMs: options.resolveTimeoutMs ?? 5_000,
    cachedAddresses: options.cachedAddresses,
    lockdown: options.lockdown,
    hostAddresses: options.hostAddresses,
  });
  const registry = new ConnectionRegistry(logger);
  let closing = false;
  const ctx: ProxyContext = {
    policy,
    logger,
    audit,
    authorizer,
    registry,
    connectTimeoutMs: options.connectTimeoutMs ?? 10_000,
    helloTimeoutMs: options.helloTimeoutMs ?? HELLO_TIMEOUT_MS,
    upstreamCa: options.upstreamCa,
    credentials: options.credentials,
    closing: () => closing,
  };
  const terminated = createTerminatedHttps(ctx, options.tls);
  const tunnels = createTunnels(ctx, terminated);
  const plain = createPlainHttp(ctx, ABSOLUTE_FORM);

  const limits = options.connections ?? DEFAULT_PROXY_BOUNDS;
  const timeouts = { headerTimeoutMs: limits.headerTimeoutMs, idleTimeoutMs: limits.idleTimeoutMs };
  // Long uploads and long-polls are legitimate through a proxy (no request deadline); a
  // request head and a kept-alive connection's idle time are bounded.
  const server = http.createServer({ ...boundedServerOptions(timeouts), noDelay: true });
  // The workload is the one client and nothing authenticates: past the cap a new connection is
  // refused at once (evicting would let the workload cut its own tunnels), and each refusal is
  // an audit record, which the aggregator folds into one with a count.
  const bounds = boundConnections(server, {
    ...timeouts,
    maxUnauthenticated: limits.max,
    maxAuthenticated: 1,
    whenFull: "refuse",
    onClose: (reason, at: ClosedConnection) => {
      if (reason !== "refused_full") return;
      audit.emit(connectionLimitRecord(at, new Date().toISOString()));
    },
  });
  server.on("connection", (socket: net.Socket) => registry.addClient(socket));
  server.on("request", (req, res) => plain.request(req, res, false));
  server.on("checkContinue", (req, res) => plain.request(req, res, true));
  server.on("connect", tunnels.connect);
  server.on("upgrade", plain.upgrade);

  function revoke(): Revocation {
    const loaded = policy.current();
    if (authorizer.locked() !== null || loaded === undefined) return revokeAll(registry);
    return revokeDenied(registry, loaded.policy, authorizer.hostAddresses());
  }

  return {
    server,
    listen(port, host = "0.0.0.0") {
      return listen(server, port, host);
    },
    isListening: () => server.listening,
    revoke,
    entries: {
      tunnel: tunnels.open,
      addClient: (socket) => registry.addClient(socket),
      plainHttp: (reader) => createPlainHttp(ctx, reader),
    },
    async close(graceMs = 5000) {
      closing = true;
      bounds.close();
      const closed = new Promise<void>((r) => {
        if (!server.listening) r();
        else server.close(() => r());
      });
      server.closeIdleConnections();
      await registry.drained(graceMs);
      // Tunnels are opaque and long-lived (TLS keep-alive): waiting for them only delays exit.
      for (const tn of registry.tunnels.values()) tn.client.destroy();
      server.closeAllConnections();
      registry.agent.destroy();
      terminated.close();
      await closed;
    },
  };
}
