// Egress proxy: the workload's only way out. Every request is checked against
// the current policy, its host is resolved exactly once, every resolved address
// is checked, and the connection goes to the checked IP (no second lookup, so a
// DNS rebinding between check and connect cannot happen).
import http from "node:http";
import net from "node:net";
import dns from "node:dns";
import { pipeline } from "node:stream";
import type { AddressInfo } from "node:net";
import type { Duplex } from "node:stream";
import { evaluate, checkResolvedAddress, overrideMethods, decideTunnel, tunnelKind, tunnelStaysOpen, NO_HOST_ADDRESSES, type Decision, type HostAddresses, type TunnelKind, type WouldDeny } from "../policy/core.js";
import type { PolicyHolder } from "./policy-holder.js";
import type { Logger } from "./logger.js";
import { errorFields } from "./logger.js";
import { listen } from "./listen.js";
import type { WireAuditEvent } from "../protocol/wire.js";
import { TimeoutError, withTimeout } from "../util/timeout.js";
import type { LeafSource } from "./tls/ciphers.js";
import { TlsTerminator, isCertificateError, type TerminatedTunnel } from "./tls/terminate.js";
import type { CredentialRefusal, SecretValues } from "./credentials.js";
import { CREDENTIAL_ERROR, prepareRequest, readBoundedBody, refusalBody, refusePlain, swapBody, type PreparedRequest } from "./credential-injector.js";
import { HELLO_TIMEOUT_MS, readHello } from "./tls/hello-gate.js";
import { WEBSOCKET, relayUpgrade, websocketUpgrade } from "./upgrade.js";
import { meter, type Traffic } from "./traffic.js";
import { DEFAULT_PROXY_BOUNDS, type ProxyBounds } from "../protocol/launch.js";
import { boundConnections, boundedServerOptions, type ClosedConnection } from "../util/connection-bounds.js";

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

/** Reason a tunnel that must be terminated is refused when the supervisor has no CA. */
export const TLS_UNAVAILABLE = "tls_termination_unavailable";

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
  /** Stops accepting, lets in-flight HTTP requests finish for up to graceMs, then cuts everything. */
  close(graceMs?: number): Promise<void>;
}

/** Reason of the audit record of connections refused past the cap on the workload's open connections. */
export const CONNECTION_LIMIT = "connection_limit";

/** Reason used when no policy is loaded: the proxy fails closed. */
export const POLICY_MISSING = "policy_missing";

const POLICY_ERROR = "sandgate-policy";
const UPSTREAM_ERROR = "sandgate-upstream";
const PROXY_ERROR = "sandgate-proxy";

interface Target {
  host: string;
  port: number;
  /** A CONNECT is "https" until decideTunnel says which protocol it is. */
  protocol: EgressProtocol;
  method: string;
  /** Path without query: queries often carry secrets and stay out of audit logs. */
  path?: string;
  /** HTTP only: the methods the request asks to be treated as (override headers, _method). */
  overrides?: string[];
}

interface HttpTarget extends Target {
  /** host[:port] as it must appear in the upstream Host header. */
  authority: string;
  /** Path plus query, as sent upstream. */
  requestPath: string;
}

type Outcome =
  /**
   * tunnel: what an allowed CONNECT carries; a blind https one is audited once its ClientHello was read.
   * wouldDeny: only audit mode let it through. record: the allow's audit record, when the caller sends it (at the request's end).
   */
  | { kind: "allow"; address: string; rule: string; tunnel?: TunnelKind; wouldDeny?: WouldDeny; record?: AuditEvent }
  | { kind: "deny"; reason: string; rule?: string; address?: string }
  | { kind: "unreachable"; status: 502 | 504; code: string; message: string };

/**
 * What one open connection was allowed for: the request as evaluated and the address
 * that was checked and connected to. Re-evaluated on every revocation.
 */
interface Grant {
  host: string;
  port: number;
  protocol: EgressProtocol;
  /** CONNECT tunnels: what the tunnel carries, re-checked with tunnelStaysOpen. */
  tunnel?: TunnelKind;
  method?: string;
  path?: string;
  address: string;
}

/** Past requests remembered per kept-alive connection; beyond this it is closed on any revocation. */
const GRANTS_PER_CONNECTION = 64;

/** The grants a kept-alive connection has carried. */
interface GrantSet {
  grants: Map<string, Grant>;
  /** More distinct requests than GRANTS_PER_CONNECTION: what it carried is no longer known. */
  overflow: boolean;
}

const newGrantSet = (): GrantSet => ({ grants: new Map(), overflow: false });

function addGrant(set: GrantSet, g: Grant): void {
  if (set.overflow) return;
  const key = `${g.protocol} ${g.host} ${String(g.port)} ${g.address} ${g.method ?? ""} ${g.path ?? ""}`;
  if (set.grants.has(key)) return;
  if (set.grants.size >= GRANTS_PER_CONNECTION) {
    set.overflow = true;
    set.grants.clear();
    return;
  }
  set.grants.set(key, g);
}

/** A workload connection that speaks plain HTTP to the proxy. */
interface ClientConnection {
  socket: net.Socket;
  carried: GrantSet;
  /** Requests being answered on it now. */
  active: Set<http.ServerResponse>;
  /** A past request is no longer allowed: close it as soon as it is idle. */
  stale: boolean;
}

/** A CONNECT tunnel, or an upgraded WebSocket, from its request until it closes. */
interface Tunnel {
  client: Duplex;
  /** Set once the target was allowed. */
  grant?: Grant;
  upstream?: Duplex;
  /** A WebSocket upgraded inside this (terminated) tunnel: its request, re-checked too. */
  upgrade?: { grant: Grant; upstream?: Duplex };
  /** Run when the client socket closes (its audit close record). */
  onClose?: () => void;
}

/** What an audit event records: the decision, with the address when one was chosen. */
type AuditedDecision =
  | { kind: "allow"; rule: string; address?: string; wouldDeny?: WouldDeny | undefined }
  | { kind: "deny"; reason: string; rule?: string; address?: string };


export const defaultResolver: Resolver = async (host) => {
  const found = await dns.promises.lookup(host, { all: true, order: "verbatim" });
  return found.map((a) => a.address);
};

// RFC 9110 §7.6.1 hop-by-hop headers; any Proxy-* header is also ours, never forwarded.
const HOP_BY_HOP = new Set(["connection", "keep-alive", "te", "trailer", "transfer-encoding", "upgrade"]);

/**
 * Copies raw headers minus hop-by-hop ones (including those named in Connection)
 * and Proxy-*. Raw arrays keep the sender's order, case and duplicates.
 */
function endToEndHeaders(raw: readonly string[], alsoDrop?: ReadonlySet<string>): string[] {
  let listed: Set<string> | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.toLowerCase() === "connection") {
      listed ??= new Set();
      for (const token of raw[i + 1]!.split(",")) listed.add(token.trim().toLowerCase());
    }
  }
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    const lower = name.toLowerCase();
    if (HOP_BY_HOP.has(lower) || lower.startsWith("proxy-") || listed?.has(lower) || alsoDrop?.has(lower)) continue;
    out.push(name, raw[i + 1]!);
  }
  return out;
}

// Host is replaced by the request-target's authority (RFC 9112 §3.2.2): the policy
// checked the URI's host, so a different Host header must not reach another vhost.
// Expect is answered at this hop (checkContinue), not forwarded.
const REQUEST_REPLACED = new Set(["host", "expect"]);

function hasBody(req: http.IncomingMessage): boolean {
  const te = req.headers["transfer-encoding"];
  if (te !== undefined) return true;
  const cl = req.headers["content-length"];
  return cl !== undefined && cl !== "0";
}

function parseAbsoluteHttp(rawUrl: string | undefined, method: string): HttpTarget | undefined {
  if (rawUrl === undefined || !/^http:\/\//i.test(rawUrl)) return undefined;
  let url: URL;
  try {
    url = new URL(rawUrl);
  } catch {
    return undefined;
  }
  if (url.protocol !== "http:" || url.hostname === "") return undefined;
  const host = normalizeHost(url.hostname);
  return {
    host,
    port: url.port === "" ? 80 : Number(url.port),
    protocol: "http",
    method,
    path: url.pathname,
    authority: url.host,
    requestPath: url.pathname + url.search,
  };
}

function parseConnectTarget(authority: string | undefined): Target | undefined {
  if (authority === undefined) return undefined;
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^\s:/[\]@]+)):(\d{1,5})$/.exec(authority);
  if (m === null) return undefined;
  const port = Number(m[3]);
  if (port < 1 || port > 65535) return undefined;
  const host = normalizeHost(m[1] ?? m[2]!);
  if (m[1] !== undefined && !net.isIPv6(host)) return undefined;
  return { host, port, protocol: "https", method: "CONNECT" };
}

function normalizeHost(hostname: string): string {
  let h = hostname.toLowerCase();
  if (h.startsWith("[") && h.endsWith("]")) h = h.slice(1, -1);
  if (h.endsWith(".")) h = h.slice(0, -1);
  return h;
}


function unreachable(err: unknown): Outcome & { kind: "unreachable" } {
  const code = (err as NodeJS.ErrnoException | undefined)?.code ?? "EUPSTREAM";
  const message = err instanceof Error ? err.message : String(err);
  return { kind: "unreachable", status: code === "ETIMEDOUT" ? 504 : 502, code, message };
}

function denialBody(t: Target, o: Outcome & { kind: "deny" }): object {
  return {
    error: "policy_denied",
    host: t.host,
    port: t.port,
    method: t.method,
    path: t.path ?? null,
    reason: o.reason,
    rule: o.rule ?? null,
    ...(o.address === undefined ? {} : { address: o.address }),
  };
}

function unreachableBody(t: Target, o: Outcome & { kind: "unreachable" }, address?: string): object {
  return {
    error: "upstream_unreachable",
    host: t.host,
    port: t.port,
    method: t.method,
    path: t.path ?? null,
    code: o.code,
    message: o.message,
    ...(address === undefined ? {} : { address }),
  };
}

const STATUS_TEXT: Record<number, string> = { 400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway", 504: "Gateway Timeout" };

/** A complete HTTP response written on a raw (CONNECT) socket, which is then closed. */
function endRawJson(socket: Duplex, status: number, proxyError: string, body: object): void {
  const json = JSON.stringify(body);
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_TEXT[status] ?? "Error"}\r\n` +
      `X-Proxy-Error: ${proxyError}\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${Buffer.byteLength(json)}\r\nConnection: close\r\n\r\n${json}`,
  );
  // The client should close after reading; don't let a silent one hold the socket.
  setTimeout(() => socket.destroy(), 5000).unref();
}

function sendJson(res: http.ServerResponse, status: number, proxyError: string, body: object, close: boolean): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const json = JSON.stringify(body);
  const headers: http.OutgoingHttpHeaders = {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(json),
    "x-proxy-error": proxyError,
  };
  // An unread request body would otherwise have to be drained to keep the connection.
  if (close) headers.connection = "close";
  res.writeHead(status, headers);
  res.end(json);
}

/**
 * Closes an idle client connection without cutting the tail of its last response: at once
 * when nothing is left to write, else once written (a client that does not read gets 5 s).
 */
function closeIdle(socket: net.Socket): void {
  if (socket.writableLength === 0) {
    socket.destroy();
    return;
  }
  socket.end();
  socket.once("finish", () => socket.destroy());
  setTimeout(() => socket.destroy(), 5000).unref();
}

type TerminatedOutcome = { kind: "allow"; rule: string; wouldDeny?: WouldDeny } | { kind: "deny"; reason: string; rule?: string; address?: string };
/** A decided request in a terminated tunnel: allowed ones carry the request with placeholders swapped; a credential refusal says why. */
interface TerminatedDecision {
  t: Target;
  outcome: TerminatedOutcome;
  /** Its audit record, for the caller to send (a request's allow once it is over). */
  record: AuditEvent;
  prepared?: PreparedRequest;
  refusal?: CredentialRefusal;
}

const ORIGIN_FORM = { error: "bad_request", message: "inside a tunnel, requests are in origin form (GET /path)" };

/** An Upgrade request's headers as sent upstream: end-to-end ones, the authority checked, the upgrade asked for. */
/** `headers`: the request's end-to-end headers (placeholders already swapped where that applies). */
function upgradeHeaders(headers: readonly string[], authority: string): string[] {
  return [...headers, "Host", authority, "Connection", "Upgrade", "Upgrade", WEBSOCKET];
}

/** Answers 400 to an Upgrade other than WebSocket on GET; true when it is one. */
function refuseOtherUpgrade(req: http.IncomingMessage, socket: Duplex): boolean {
  const u = websocketUpgrade(req);
  if (u.ok) return true;
  endRawJson(socket, 400, PROXY_ERROR, { error: "bad_request", message: `only GET with "Upgrade: websocket" is relayed, got ${req.method ?? "?"} with ${JSON.stringify(u.asked.slice(0, 60))}` });
  return false;
}

function grantOf(t: Target, address: string, tunnel?: TunnelKind): Grant {
  return {
    host: t.host,
    port: t.port,
    protocol: t.protocol,
    ...(tunnel === undefined ? {} : { tunnel }),
    ...(t.protocol === "http" ? { method: t.method } : {}),
    ...(t.path === undefined ? {} : { path: t.path }),
    address,
  };
}

export function createEgressProxy(options: EgressProxyOptions): EgressProxy {
  const { policy, onAudit, logger } = options;
  const resolve = options.resolve ?? defaultResolver;
  const connectTimeoutMs = options.connectTimeoutMs ?? 10_000;
  const helloTimeoutMs = options.helloTimeoutMs ?? HELLO_TIMEOUT_MS;
  const resolveTimeoutMs = options.resolveTimeoutMs ?? 5_000;

  // One keep-alive agent; its pools are keyed by host:port, and host is always the
  // checked IP, so reuse never crosses to an address that was not checked.
  // noDelay on every socket of both sides: a small write must not wait for Nagle's timer.
  const agent = new http.Agent({ keepAlive: true, maxFreeSockets: 256, scheduling: "lifo", noDelay: true });
  // The registry of open connections, re-checked by revoke().
  const tunnels = new Map<Duplex, Tunnel>();
  const clients = new Map<Duplex, ClientConnection>();
  /** In-flight requests; the grant once the request was allowed. */
  const inflight = new Map<http.ServerResponse, Grant | undefined>();
  /** What each upstream socket of the agent has carried. */
  const upstreamCarried = new WeakMap<net.Socket, GrantSet>();
  /** Upstream sockets in use at a revocation that carried a request no longer allowed: closed once freed. */
  const upstreamStale = new WeakSet<net.Socket>();
  agent.on("free", (socket: net.Socket) => {
    // Only when it went to the pool: a freed socket may be handed straight to a waiting request.
    if (upstreamStale.has(socket) && Object.values(agent.freeSockets).some((list) => list?.includes(socket) === true)) socket.destroy();
  });
  let closing = false;
  let onDrained: (() => void) | undefined;

  /** The audit record of a decision, under the revision in force now. */
  const auditEvent = (t: Target, o: AuditedDecision): AuditEvent => {
    const wouldDeny = o.kind === "allow" ? o.wouldDeny : undefined;
    const event: AuditEvent = {
      type: "egress",
      time: new Date().toISOString(),
      decision: wouldDeny !== undefined ? "would_deny" : o.kind,
      host: t.host,
      port: t.port,
      protocol: t.protocol,
    };
    if (o.kind === "deny") event.reason = o.reason;
    else if (wouldDeny !== undefined) event.reason = wouldDeny.reason;
    const rule = wouldDeny?.rule ?? o.rule;
    if (rule !== undefined) event.rule = rule;
    if (t.method !== "CONNECT") event.method = t.method;
    if (t.path !== undefined) event.path = t.path;
    if (o.address !== undefined) event.address = o.address;
    const revision = policy.current()?.revision;
    if (revision !== undefined) event.revision = revision;
    return event;
  };
  const emit = (event: AuditEvent): void => {
    try {
      onAudit(event);
    } catch (err) {
      logger.error("audit sink failed", errorFields(err));
    }
  };
  const audit = (t: Target, o: AuditedDecision): void => emit(auditEvent(t, o));
  /**
   * A request's record goes out once its response is over, with what it exchanged with the
   * origin (headers included) and how long it took; the returned function is given each
   * upstream request made for it (a retry replaces the first).
   */
  const auditAtEnd = (event: AuditEvent, res: http.ServerResponse): ((upReq: http.ClientRequest) => void) => {
    const t0 = Date.now();
    let measured: (() => Traffic) | undefined;
    res.once("close", () => {
      const m = measured?.() ?? { bytesOut: 0, bytesIn: 0 };
      // Object.assign, not a spread with more properties: node 20's V8 takes a slow path there (~10 µs a record).
      emit(Object.assign({}, event, { bytesOut: m.bytesOut, bytesIn: m.bytesIn, durationMs: Date.now() - t0, status: res.statusCode }));
    });
    return (upReq) => upReq.once("socket", (socket: net.Socket) => (measured = meter(socket, "origin")));
  };
  /**
   * A tunnel's (or WebSocket's) allow went out at its opening; its close record carries what it
   * moved. A registered tunnel runs it from its one close listener; another socket gets its own.
   */
  const auditClose = (event: AuditEvent, socket: Duplex, entry?: Tunnel): void => {
    const measured = meter(socket, "workload");
    const record = (): void => emit(Object.assign({}, event, { time: new Date().toISOString(), activity: "close" as const }, measured()));
    if (entry === undefined) socket.once("close", record);
    else entry.onClose = record;
  };

  /**
   * Policy check, one resolution, address check. Emits the audit event for the decision.
   * A decision is only ever made under the policy in force when it is returned: a new
   * revision or a lockdown during the lookup starts it over.
   */
  async function authorize(t: Target, deferAllow = false): Promise<Outcome> {
    const locked = options.lockdown?.() ?? null;
    const loaded = policy.current();
    if (locked !== null || loaded === undefined) {
      const o = { kind: "deny", reason: locked ?? POLICY_MISSING } as const;
      audit(t, o);
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
      const o: Outcome = { kind: "deny", reason: decision.reason };
      if (decision.rule !== undefined) o.rule = decision.rule;
      audit(t, o);
      return o;
    }
    let addresses: string[];
    const cached = net.isIP(t.host) !== 0 ? [t.host] : options.cachedAddresses?.(t.host);
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
      if (policy.current() !== loaded || (options.lockdown?.() ?? null) !== null) return authorize(t, deferAllow);
      if (failed !== undefined) {
        // The policy allowed it; the network did not deliver. Audit the decision, report the failure.
        audit(t, { kind: "allow", rule: decision.rule, wouldDeny: decision.wouldDeny });
        return unreachable(failed.err);
      }
      if (addresses.length === 0) {
        audit(t, { kind: "allow", rule: decision.rule, wouldDeny: decision.wouldDeny });
        return { kind: "unreachable", status: 502, code: "ENOTFOUND", message: `no addresses for ${t.host}` };
      }
    }
    // Every candidate must pass: a name that resolves to one public and one
    // internal address is refused as a whole, not silently narrowed.
    const host = options.hostAddresses?.() ?? NO_HOST_ADDRESSES;
    for (const address of addresses) {
      const check = checkResolvedAddress(address, decision.allowPrivate, host);
      if (!check.ok) {
        const o = { kind: "deny", reason: check.reason, rule: decision.rule, address } as const;
        audit(t, o);
        return o;
      }
    }
    const address = addresses.find((a) => net.isIPv4(a)) ?? addresses[0]!;
    const o = { kind: "allow", address, rule: decision.rule, ...(tunnel !== undefined && { tunnel }), ...(decision.wouldDeny !== undefined && { wouldDeny: decision.wouldDeny }) } as const;
    if (deferAllow) return Object.assign({}, o, { record: auditEvent(t, o) });
    if (tunnel !== "https-blind") audit(t, o);
    return o;
  }

  function track(req: http.IncomingMessage, res: http.ServerResponse): void {
    inflight.set(res, undefined);
    const conn = clients.get(req.socket);
    conn?.active.add(res);
    res.once("close", () => {
      inflight.delete(res);
      if (conn !== undefined) {
        conn.active.delete(res);
        if (conn.stale && conn.active.size === 0) closeIdle(conn.socket);
      }
      if (inflight.size === 0) onDrained?.();
    });
  }

  /** The request was allowed: its connection and response now carry this grant. */
  function granted(req: http.IncomingMessage, res: http.ServerResponse, g: Grant): void {
    if (inflight.has(res)) inflight.set(res, g);
    const conn = clients.get(req.socket);
    if (conn !== undefined) addGrant(conn.carried, g);
  }

  function handleRequest(req: http.IncomingMessage, res: http.ServerResponse, expectContinue: boolean): void {
    track(req, res);
    const method = req.method ?? "GET";
    const target = parseAbsoluteHttp(req.url, method);
    if (target === undefined) {
      const isHttps = typeof req.url === "string" && /^https:\/\//i.test(req.url);
      sendJson(res, 400, PROXY_ERROR, {
        error: "bad_request",
        message: isHttps
          ? "https:// URLs must be tunnelled with CONNECT"
          : "this is a forward proxy: send absolute-form requests (GET http://host/path) or CONNECT",
      }, true);
      return;
    }
    target.overrides = overrideMethods(req.rawHeaders, target.requestPath);
    authorize(target, true).then(
      (outcome) => {
        if (outcome.kind === "deny") {
          sendJson(res, 403, POLICY_ERROR, denialBody(target, outcome), closing || expectContinue || hasBody(req));
        } else if (outcome.kind === "unreachable") {
          logger.warn("upstream unreachable", { host: target.host, port: target.port, code: outcome.code });
          sendJson(res, outcome.status, UPSTREAM_ERROR, unreachableBody(target, outcome), closing || expectContinue || hasBody(req));
        } else if (!res.destroyed) {
          const loaded = policy.current();
          const headers = endToEndHeaders(req.rawHeaders, REQUEST_REPLACED);
          const refusal = loaded === undefined ? null : refusePlain(loaded.policy, target.requestPath, headers);
          if (refusal !== null) {
            audit(target, { kind: "deny", reason: refusal.reason, rule: outcome.rule, address: outcome.address });
            sendJson(res, 403, CREDENTIAL_ERROR, refusalBody(target, refusal), closing || expectContinue || hasBody(req));
            return;
          }
          granted(req, res, grantOf(target, outcome.address));
          const watch = outcome.record === undefined ? undefined : auditAtEnd(outcome.record, res);
          if (expectContinue) res.writeContinue();
          forward(req, res, target, outcome.address, headers, true, watch);
        }
      },
      (err: unknown) => {
        logger.error("proxy request failed", { host: target.host, ...errorFields(err) });
        sendJson(res, 502, PROXY_ERROR, { error: "proxy_error" }, true);
      },
    );
  }

  /** `endToEnd`: the request's end-to-end headers (endToEndHeaders), left as they are (a retry passes them again). */
  function forward(req: http.IncomingMessage, res: http.ServerResponse, t: HttpTarget, address: string, endToEnd: readonly string[], mayRetry: boolean, watch?: (upReq: http.ClientRequest) => void): void {
    const bodyless = !hasBody(req);
    const headers = [...endToEnd, "Host", t.authority];
    // Node decoded the client's chunked framing; re-frame the body upstream.
    if (req.headers["transfer-encoding"] !== undefined) headers.push("Transfer-Encoding", "chunked");

    const upReq = http.request({
      host: address,
      port: t.port,
      method: t.method,
      path: t.requestPath,
      headers,
      setHost: false,
      agent,
    });
    watch?.(upReq);
    let responded = false;

    upReq.on("socket", (socket) => {
      let carried = upstreamCarried.get(socket);
      if (carried === undefined) {
        carried = newGrantSet();
        upstreamCarried.set(socket, carried);
      }
      addGrant(carried, grantOf(t, address));
      if (!socket.connecting) return;
      const timer = setTimeout(() => upReq.destroy(new TimeoutError(`connect to ${address}:${t.port} timed out`)), connectTimeoutMs);
      const clear = (): void => clearTimeout(timer);
      socket.once("connect", clear);
      socket.once("close", clear);
    });

    upReq.on("response", (upRes) => {
      responded = true;
      const headers = endToEndHeaders(upRes.rawHeaders);
      // While shutting down, tell keep-alive clients to go elsewhere.
      if (closing) headers.push("Connection", "close");
      res.writeHead(upRes.statusCode ?? 502, upRes.statusMessage, headers);
      // pipe(), not pipeline(): pipeline allocates an AbortController per call,
      // measurable at proxy request rates. A cut upstream body is passed on as a
      // cut client connection, never as a clean end.
      upRes.pipe(res);
      upRes.once("error", () => res.destroy());
      upRes.once("close", () => {
        if (!upRes.complete) res.destroy();
      });
    });

    upReq.on("error", (err: NodeJS.ErrnoException) => {
      if (responded) return; // the response side reports it by destroying res
      // A pooled keep-alive socket may have been closed by the origin just now;
      // retry once on a fresh connection, but only for a request without a body.
      if (mayRetry && upReq.reusedSocket && err.code === "ECONNRESET" && bodyless && !res.destroyed) {
        forward(req, res, t, address, endToEnd, false, watch);
        return;
      }
      req.unpipe(upReq);
      const o = unreachable(err);
      logger.warn("upstream unreachable", { host: t.host, port: t.port, address, code: o.code });
      sendJson(res, o.status, UPSTREAM_ERROR, unreachableBody(t, o, address), closing || !bodyless);
    });

    res.once("close", () => {
      if (!res.writableFinished) upReq.destroy();
    });

    if (bodyless) upReq.end();
    else req.pipe(upReq);
  }

  /** From here on the socket is a tunnel (CONNECT, or an upgrade), not an HTTP connection. */
  function asTunnel(socket: Duplex): Tunnel {
    clients.delete(socket);
    const entry: Tunnel = { client: socket };
    tunnels.set(socket, entry);
    // One close listener for the registry and the close record: a relayed socket already carries many.
    socket.once("close", () => {
      tunnels.delete(socket);
      entry.onClose?.();
    });
    socket.on("error", (err) => logger.warn("tunnel client socket error", errorFields(err)));
    return entry;
  }

  /**
   * A plain ws:// upgrade (absolute form): decided as the GET it is, then relayed. From the
   * request on, its connection is registered as a tunnel, so revocation and lockdown reach it.
   */
  function handleUpgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer): void {
    const entry = asTunnel(socket);
    if (!refuseOtherUpgrade(req, socket)) return;
    const target = parseAbsoluteHttp(req.url, req.method ?? "GET");
    if (target === undefined) {
      endRawJson(socket, 400, PROXY_ERROR, { error: "bad_request", message: "this is a forward proxy: send absolute-form requests (GET http://host/path)" });
      return;
    }
    target.overrides = overrideMethods(req.rawHeaders, target.requestPath);
    authorize(target, true).then(
      (outcome) => {
        if (outcome.kind === "deny") endRawJson(socket, 403, POLICY_ERROR, denialBody(target, outcome));
        else if (outcome.kind === "unreachable") endRawJson(socket, outcome.status, UPSTREAM_ERROR, unreachableBody(target, outcome));
        else if (!socket.destroyed) {
          const { address } = outcome;
          const headers = endToEndHeaders(req.rawHeaders, REQUEST_REPLACED);
          // Plain http carries no credential: a placeholder here is refused as on any plain request.
          const loaded = policy.current();
          const refusal = loaded === undefined ? null : refusePlain(loaded.policy, target.requestPath, headers);
          if (refusal !== null) {
            audit(target, { kind: "deny", reason: refusal.reason, rule: outcome.rule, address });
            endRawJson(socket, 403, CREDENTIAL_ERROR, refusalBody(target, refusal));
            return;
          }
          entry.grant = grantOf(target, address);
          const record = outcome.record ?? auditEvent(target, outcome);
          emit(record);
          auditClose(record, socket, entry);
          // A fresh connection, never a pooled one: it becomes this WebSocket's alone.
          const upstream = http.request({ host: address, port: target.port, method: target.method, path: target.requestPath, headers: upgradeHeaders(headers, target.authority), setHost: false, agent: false, timeout: connectTimeoutMs });
          upstream.once("socket", (s: net.Socket) => {
            entry.upstream = s;
            s.once("connect", () => s.setTimeout(0));
          });
          upstream.once("timeout", () => upstream.destroy(new TimeoutError(`connect to ${address}:${target.port} timed out`)));
          relayUpgrade({
            client: socket,
            head,
            upstream,
            responseHeaders: (raw) => endToEndHeaders(raw),
            onUpgraded: () => undefined,
            onError: (err) => {
              const o = unreachable(err);
              logger.warn("upstream unreachable", { host: target.host, port: target.port, address, code: o.code });
              endRawJson(socket, o.status, UPSTREAM_ERROR, unreachableBody(target, o, address));
            },
          });
        }
      },
      (err: unknown) => {
        logger.error("proxy upgrade failed", { host: target.host, ...errorFields(err) });
        endRawJson(socket, 502, PROXY_ERROR, { error: "proxy_error" });
      },
    );
  }

  function handleConnect(req: http.IncomingMessage, socket: Duplex, head: Buffer): void {
    const entry = asTunnel(socket);
    const target = parseConnectTarget(req.url);
    if (target === undefined) {
      endRawJson(socket, 400, PROXY_ERROR, { error: "bad_request", message: "CONNECT needs host:port" });
      return;
    }
    authorize(target, true).then(
      (outcome) => {
        if (outcome.kind === "deny") endRawJson(socket, 403, POLICY_ERROR, denialBody(target, outcome));
        else if (outcome.kind === "unreachable") endRawJson(socket, outcome.status, UPSTREAM_ERROR, unreachableBody(target, outcome));
        else {
          // The opening's record goes out now; a blind tunnel's once its ClientHello was read.
          const record = outcome.record ?? auditEvent(target, outcome);
          if (outcome.tunnel !== "https-blind") emit(record);
          if (socket.destroyed) return;
          if (outcome.tunnel === "https-terminated") intercept(entry, head, target, outcome.address, record);
          else tunnel(entry, head, target, outcome, record);
        }
      },
      (err: unknown) => {
        logger.error("proxy connect failed", { host: target.host, ...errorFields(err) });
        endRawJson(socket, 502, PROXY_ERROR, { error: "proxy_error" });
      },
    );
  }

  /**
   * A raw (tcp) or blind https tunnel. The upstream connection is opened first, so an
   * unreachable origin is still a 502/504; a blind one then gets no byte until the
   * workload's first bytes are a ClientHello for the CONNECT host (hello-gate.ts).
   */
  function tunnel(entry: Tunnel, head: Buffer, t: Target, allowed: Outcome & { kind: "allow" }, record: AuditEvent): void {
    const { client } = entry;
    const { address } = allowed;
    const blind = allowed.tunnel === "https-blind";
    // allowHalfOpen: one side finishing its writes must not cut the other direction.
    const upstream = net.connect({ host: address, port: t.port, allowHalfOpen: true });
    entry.grant = grantOf(t, address, allowed.tunnel);
    entry.upstream = upstream;
    upstream.setNoDelay(true);
    let established = false;
    const timer = setTimeout(() => upstream.destroy(new TimeoutError(`connect to ${address}:${t.port} timed out`)), connectTimeoutMs);
    const abandon = (): void => {
      if (!established) upstream.destroy();
    };
    client.once("close", abandon);

    upstream.once("connect", () => {
      clearTimeout(timer);
      client.off("close", abandon);
      established = true;
      client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
      if (!blind) {
        auditClose(record, client, entry);
        relay(head);
        return;
      }
      const gone = (): void => void upstream.destroy();
      client.once("close", gone);
      void readHello(client, head, t.host, helloTimeoutMs).then((r) => {
        client.off("close", gone);
        if (r.kind === "closed" || client.destroyed || upstream.destroyed) {
          // Gone before a verdict (the workload left, a revocation): the CONNECT was allowed.
          emit(record);
          upstream.destroy();
          return;
        }
        if (r.kind === "refuse") {
          logger.warn("tunnel closed at its first bytes", { host: t.host, port: t.port, reason: r.reason, detail: r.detail });
          audit(t, { kind: "deny", reason: r.reason, rule: allowed.rule, address });
          client.destroy();
          upstream.destroy();
          return;
        }
        emit(record);
        auditClose(record, client, entry);
        relay(r.bytes);
      });
    });
    /** Both ways, `first` (bytes already read from the client) upstream before the rest. */
    const relay = (first: Buffer): void => {
      if (first.length > 0) upstream.write(first);
      const done = (err: NodeJS.ErrnoException | null): void => {
        if (err !== null) {
          client.destroy();
          upstream.destroy();
        }
      };
      pipeline(client, upstream, done);
      pipeline(upstream, client, done);
    };
    upstream.once("error", (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      if (established) {
        client.destroy(); // before the relay, nothing else tears the client down
        return;
      }
      // The blind tunnel's decision was not audited yet: it was allowed, the network did not deliver.
      if (blind) emit(record);
      const o = unreachable(err);
      logger.warn("upstream unreachable", { host: t.host, port: t.port, address, code: o.code });
      if (!client.destroyed) endRawJson(client, o.status, UPSTREAM_ERROR, unreachableBody(t, o, address));
    });
  }

  // ---- terminated https: the workload's TLS ends here, each request is decided ----

  const terminator = options.tls
    ? new TlsTerminator(options.tls, (req, res, t, expectContinue) => handleTerminated(req, res, t, expectContinue), {
        onUpgrade: (req, socket, head, t) => handleTerminatedUpgrade(req, socket, head, t),
      })
    : undefined;

  /** Each terminated tunnel's registry entry, for the WebSockets upgraded inside it. */
  const terminatedTunnels = new WeakMap<TerminatedTunnel, Tunnel>();

  function intercept(entry: Tunnel, head: Buffer, t: Target, address: string, record: AuditEvent): void {
    if (terminator === undefined) {
      const o = { kind: "deny", reason: TLS_UNAVAILABLE } as const;
      audit(t, o);
      endRawJson(entry.client, 403, POLICY_ERROR, denialBody(t, o));
      return;
    }
    entry.grant = grantOf(t, address);
    auditClose(record, entry.client, entry);
    entry.client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
    const tun: TerminatedTunnel = { host: t.host, port: t.port, address };
    terminatedTunnels.set(tun, entry);
    terminator.terminate(entry.client, head, tun).catch((err: unknown) => {
      logger.warn("TLS from the workload failed", { host: t.host, ...errorFields(err) });
    });
  }

  /** One request inside a terminated tunnel: decided like plain HTTP, at the address checked for the tunnel. */
  function handleTerminated(req: http.IncomingMessage, res: http.ServerResponse, tun: TerminatedTunnel, expectContinue: boolean): void {
    const decided = decideTerminated(req, tun);
    if (decided === undefined) {
      sendJson(res, 400, PROXY_ERROR, ORIGIN_FORM, true);
      return;
    }
    const { t, outcome, prepared, refusal, record } = decided;
    if (outcome.kind === "deny") {
      emit(record);
      if (refusal !== undefined) sendJson(res, 403, CREDENTIAL_ERROR, refusalBody(t, refusal), expectContinue || hasBody(req));
      else sendJson(res, 403, POLICY_ERROR, denialBody(t, outcome), expectContinue || hasBody(req));
      return;
    }
    if (expectContinue) res.writeContinue();
    const p = prepared!;
    const headers = [...p.headers, "Host", tun.port === 443 ? tun.host : `${tun.host}:${tun.port}`];
    if (p.bodyMaxBytes === null || !hasBody(req)) {
      if (req.headers["transfer-encoding"] !== undefined) headers.push("Transfer-Encoding", "chunked");
      forwardTls(req, res, t, tun, p.path, headers, undefined, auditAtEnd(record, res));
      return;
    }
    // The endpoint opts in to placeholders in bodies: read it whole (bounded), swap, re-frame.
    void readBoundedBody(req, p.bodyMaxBytes).then((read) => {
      if (!read.ok) {
        audit(t, { kind: "deny", reason: read.error, rule: outcome.rule, address: tun.address });
        sendJson(res, read.status, CREDENTIAL_ERROR, { error: read.error, host: t.host, port: t.port, method: t.method, path: t.path ?? null, message: read.message }, true);
        return;
      }
      const swapped = swapBody(read.body, req.headers["content-type"], p);
      if (!swapped.ok) {
        audit(t, { kind: "deny", reason: swapped.refusal.reason, rule: outcome.rule, address: tun.address });
        sendJson(res, 403, CREDENTIAL_ERROR, refusalBody(t, swapped.refusal), true);
        return;
      }
      const framed: string[] = [];
      for (let i = 0; i < headers.length; i += 2) if (headers[i]!.toLowerCase() !== "content-length") framed.push(headers[i]!, headers[i + 1]!);
      framed.push("Content-Length", String(swapped.value.length));
      forwardTls(req, res, t, tun, p.path, framed, swapped.value, auditAtEnd(record, res));
    });
  }

  /** Evaluates a request inside a terminated tunnel (its record for the caller to send); undefined when it is not in origin form. */
  function decideTerminated(req: http.IncomingMessage, tun: TerminatedTunnel): TerminatedDecision | undefined {
    const method = req.method ?? "GET";
    const url = req.url ?? "/";
    if (!url.startsWith("/")) return undefined;
    const q = url.indexOf("?");
    const t: Target = { host: tun.host, port: tun.port, protocol: "https", method, path: q < 0 ? url : url.slice(0, q), overrides: overrideMethods(req.rawHeaders, url) };
    const locked = options.lockdown?.() ?? null;
    const loaded = policy.current();
    let outcome: TerminatedOutcome;
    let prepared: PreparedRequest | undefined;
    let refusal: CredentialRefusal | undefined;
    if (locked !== null || loaded === undefined) outcome = { kind: "deny", reason: locked ?? POLICY_MISSING };
    else {
      const d = evaluate(loaded.policy, { host: t.host, port: t.port, protocol: "https", method, path: url, methodOverrides: t.overrides ?? [] });
      if (!d.allow) outcome = { kind: "deny", reason: d.reason, ...(d.rule === undefined ? {} : { rule: d.rule }) };
      else {
        const check = checkResolvedAddress(tun.address, d.allowPrivate, options.hostAddresses?.() ?? NO_HOST_ADDRESSES);
        outcome = check.ok ? { kind: "allow", rule: d.rule, ...(d.wouldDeny !== undefined && { wouldDeny: d.wouldDeny }) } : { kind: "deny", reason: check.reason, rule: d.rule, address: tun.address };
        if (check.ok) {
          // Placeholders are swapped where the policy binds them and refused anywhere else.
          const p = prepareRequest(loaded.policy, { host: t.host, port: t.port, method, url }, endToEndHeaders(req.rawHeaders, REQUEST_REPLACED), options.credentials);
          if (p.ok) prepared = p.value;
          else {
            refusal = p.refusal;
            outcome = { kind: "deny", reason: p.refusal.reason, rule: d.rule };
          }
        }
      }
    }
    const record = auditEvent(t, outcome.kind === "allow" ? Object.assign({}, outcome, { address: tun.address }) : outcome);
    return { t, outcome, record, ...(prepared && { prepared }), ...(refusal && { refusal }) };
  }

  /**
   * A WebSocket upgrade inside a terminated tunnel: decided as a request, then relayed over the
   * proxy's own verified TLS to the origin. It is registered on its tunnel, so revocation
   * re-checks the request too (path, method), not only the tunnel's host:port.
   */
  function handleTerminatedUpgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer, tun: TerminatedTunnel): void {
    socket.on("error", () => socket.destroy());
    const entry = terminatedTunnels.get(tun);
    if (!refuseOtherUpgrade(req, socket) || entry === undefined) return;
    const decided = decideTerminated(req, tun);
    if (decided === undefined) {
      endRawJson(socket, 400, PROXY_ERROR, ORIGIN_FORM);
      return;
    }
    const { t, outcome, prepared, refusal, record } = decided;
    emit(record);
    if (outcome.kind === "deny") {
      if (refusal !== undefined) endRawJson(socket, 403, CREDENTIAL_ERROR, refusalBody(t, refusal));
      else endRawJson(socket, 403, POLICY_ERROR, denialBody(t, outcome));
      return;
    }
    // With its method: the grant is re-checked as the request it was, not as the tunnel.
    const upgrade: NonNullable<Tunnel["upgrade"]> = { grant: { ...grantOf(t, tun.address), method: t.method } };
    entry.upgrade = upgrade;
    auditClose(record, socket);
    // The upgrade request carries its placeholders swapped, like any request here.
    const upstream = terminator!.request(tun, { method: t.method, path: prepared!.path, headers: upgradeHeaders(prepared!.headers, tun.port === 443 ? tun.host : `${tun.host}:${tun.port}`), ca: options.upstreamCa });
    relayUpgrade({
      client: socket,
      head,
      upstream,
      responseHeaders: (raw) => endToEndHeaders(raw),
      onUpgraded: (s) => (upgrade.upstream = s),
      onError: (err) => {
        if (isCertificateError(err)) {
          logger.warn("origin certificate refused", { host: t.host, code: err.code });
          endRawJson(socket, 502, "sandgate-upstream-tls", { error: "upstream_certificate", host: t.host, port: t.port, code: err.code ?? "TLS", message: err.message });
          return;
        }
        const o = unreachable(err);
        endRawJson(socket, o.status, UPSTREAM_ERROR, unreachableBody(t, o, tun.address));
      },
    });
  }

  /** `body`: the body already read (and swapped); undefined: streamed from the client. */
  function forwardTls(req: http.IncomingMessage, res: http.ServerResponse, t: Target, tun: TerminatedTunnel, path: string, headers: string[], body: Buffer | undefined, watch: (upReq: http.ClientRequest) => void): void {
    const upReq = terminator!.request(tun, { method: t.method, path, headers, ca: options.upstreamCa });
    watch(upReq);
    let responded = false;
    upReq.on("response", (upRes) => {
      responded = true;
      res.writeHead(upRes.statusCode ?? 502, upRes.statusMessage, endToEndHeaders(upRes.rawHeaders));
      upRes.pipe(res);
      upRes.once("error", () => res.destroy());
      upRes.once("close", () => {
        if (!upRes.complete) res.destroy();
      });
    });
    upReq.on("error", (err: NodeJS.ErrnoException) => {
      if (responded) return;
      req.unpipe(upReq);
      if (isCertificateError(err)) {
        logger.warn("origin certificate refused", { host: t.host, code: err.code });
        sendJson(res, 502, "sandgate-upstream-tls", { error: "upstream_certificate", host: t.host, port: t.port, code: err.code ?? "TLS", message: err.message }, true);
        return;
      }
      const o = unreachable(err);
      sendJson(res, o.status, UPSTREAM_ERROR, unreachableBody(t, o, tun.address), true);
    });
    res.once("close", () => {
      if (!res.writableFinished) upReq.destroy();
    });
    if (body !== undefined) upReq.end(body);
    else if (hasBody(req)) req.pipe(upReq);
    else upReq.end();
  }

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
      emit({ type: "egress", time: new Date().toISOString(), decision: "deny", reason: CONNECTION_LIMIT, host: at.localAddress ?? "", port: at.localPort ?? 0, protocol: "tcp" });
    },
  });
  server.on("connection", (socket: net.Socket) => {
    clients.set(socket, { socket, carried: newGrantSet(), active: new Set(), stale: false });
    socket.once("close", () => clients.delete(socket));
  });
  server.on("request", (req, res) => handleRequest(req, res, false));
  server.on("checkContinue", (req, res) => handleRequest(req, res, true));
  server.on("connect", handleConnect);
  server.on("upgrade", handleUpgrade);

  function closeTunnel(tn: Tunnel): void {
    tn.client.destroy();
    tn.upstream?.destroy();
    tn.upgrade?.upstream?.destroy();
  }

  /** Closes every connection: lockdown, or no policy at all. */
  function revokeAll(): Revocation {
    let tunnelCount = 0;
    let clientCount = 0;
    let upstreamCount = 0;
    for (const tn of [...tunnels.values()]) {
      closeTunnel(tn);
      tunnelCount++;
    }
    for (const conn of [...clients.values()]) {
      conn.socket.destroy();
      clientCount++;
    }
    for (const [set, counted] of [[agent.freeSockets, true], [agent.sockets, false]] as const) {
      for (const list of Object.values(set)) {
        for (const socket of [...(list ?? [])]) {
          socket.destroy();
          // In-use ones belong to a client connection counted above.
          if (counted) upstreamCount++;
        }
      }
    }
    return { closed: tunnelCount + clientCount + upstreamCount, tunnels: tunnelCount, clients: clientCount, upstream: upstreamCount };
  }

  function revoke(): Revocation {
    const loaded = policy.current();
    if ((options.lockdown?.() ?? null) !== null || loaded === undefined) return revokeAll();
    const verdicts = new Map<Grant, boolean>();
    const hostSet = options.hostAddresses?.() ?? NO_HOST_ADDRESSES;
    const allows = (g: Grant): boolean => {
      let v = verdicts.get(g);
      if (v === undefined) {
        const d = g.tunnel !== undefined
          ? tunnelStaysOpen(loaded.policy, g.tunnel, g.host, g.port)
          : evaluate(loaded.policy, {
              host: g.host,
              port: g.port,
              protocol: g.protocol,
              ...(g.method === undefined ? {} : { method: g.method }),
              ...(g.path === undefined ? {} : { path: g.path }),
            });
        // The address was checked against the old allowPrivate; check it against the new one.
        v = d.allow && checkResolvedAddress(g.address, d.allowPrivate, hostSet).ok;
        verdicts.set(g, v);
      }
      return v;
    };
    const allowsAll = (set: GrantSet): boolean => !set.overflow && [...set.grants.values()].every(allows);

    let tunnelCount = 0;
    let clientCount = 0;
    let upstreamCount = 0;
    // Tunnels still being authorized have no grant yet: authorize() decides under the new policy.
    for (const tn of [...tunnels.values()]) {
      if (tn.grant === undefined || (allows(tn.grant) && (tn.upgrade === undefined || allows(tn.upgrade.grant)))) continue;
      closeTunnel(tn);
      tunnelCount++;
    }
    for (const conn of [...clients.values()]) {
      let cut = false;
      for (const res of conn.active) {
        const g = inflight.get(res);
        if (g !== undefined && !allows(g)) cut = true;
      }
      if (!cut && !allowsAll(conn.carried)) {
        // Idle after a request no longer allowed: closed now. Busy with allowed ones: once idle.
        if (conn.active.size === 0) {
          closeIdle(conn.socket);
          clientCount++;
        } else {
          conn.stale = true;
        }
      }
      if (cut) {
        conn.socket.destroy();
        clientCount++;
      }
    }
    // In-use upstream sockets go with their client connection (a cut response destroys its
    // upstream request); one still serving an allowed request is closed when it is freed.
    for (const list of Object.values(agent.freeSockets)) {
      for (const socket of [...(list ?? [])]) {
        const carried = upstreamCarried.get(socket);
        if (carried !== undefined && allowsAll(carried)) continue;
        socket.destroy();
        upstreamCount++;
      }
    }
    for (const list of Object.values(agent.sockets)) {
      for (const socket of list ?? []) {
        const carried = upstreamCarried.get(socket);
        if (carried === undefined || !allowsAll(carried)) upstreamStale.add(socket);
      }
    }
    return { closed: tunnelCount + clientCount + upstreamCount, tunnels: tunnelCount, clients: clientCount, upstream: upstreamCount };
  }

  return {
    server,
    listen(port, host = "0.0.0.0") {
      return listen(server, port, host);
    },
    isListening: () => server.listening,
    revoke,
    async close(graceMs = 5000) {
      closing = true;
      bounds.close();
      const closed = new Promise<void>((r) => {
        if (!server.listening) r();
        else server.close(() => r());
      });
      server.closeIdleConnections();
      if (inflight.size > 0) {
        await new Promise<void>((r) => {
          const timer = setTimeout(r, graceMs);
          timer.unref();
          onDrained = () => {
            clearTimeout(timer);
            r();
          };
        });
      }
      // Tunnels are opaque and long-lived (TLS keep-alive): waiting for them only delays exit.
      for (const tn of tunnels.values()) tn.client.destroy();
      server.closeAllConnections();
      agent.destroy();
      terminator?.close();
      await closed;
    },
  };
}
