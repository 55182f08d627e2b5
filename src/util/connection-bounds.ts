// Bounds on the connections of one listener (an http, https or tls server): how long a
// connection may take to send a complete request head, how long a kept-alive one may sit
// idle, and how many may be open, with connections that have not authenticated capped
// apart from those that have (connection-pools.ts). Every close is counted by its reason.
//
// Node's own settings do not do this. `headersTimeout` is checked only every
// `connectionsCheckingInterval` (30 s by default), never covers a TLS handshake (HTTP
// starts after it; TLS's own `handshakeTimeout` is 120 s), and is 0 whenever
// `requestTimeout` is 0 (fastify's default); `requestTimeout` would cut a long upload;
// `keepAliveTimeout` is an inactivity timer that each byte received resets, also the bytes
// of a body node discards after answering early. So each connection here has a timer of its
// own, armed when it is accepted (the head of its first request, and for TLS the handshake
// before it, must be in within `headerTimeoutMs`) and whenever its last response is over
// (the next request head must be in within `idleTimeoutMs`). A request in flight (however
// long its upload or its streamed response), a CONNECT tunnel and an upgraded connection
// (WebSocket) have no timer: they are not idle. Node's `headersTimeout` is kept, set to
// the same value and checked every second, for a later request on a kept-alive connection
// whose head starts but never ends.
//
// No import of the gateway or the supervisor: both use it (the supervisor's bundle too).

import type http from "node:http";
import type net from "node:net";
import type { Duplex } from "node:stream";
import { ConnectionPools, type FullPolicy } from "./connection-pools.js";

export type { FullPolicy } from "./connection-pools.js";

export interface ConnectionBoundsSettings {
  /** A connection's first request head (after its TLS handshake) must be complete within this. */
  headerTimeoutMs: number;
  /** A kept-alive connection with no request in flight is closed after this. */
  idleTimeoutMs: number;
  /** Connections that authenticated, at most. */
  maxAuthenticated: number;
  /** Connections that have not (yet) authenticated, at most. */
  maxUnauthenticated: number;
}

export const DEFAULT_CONNECTION_BOUNDS: ConnectionBoundsSettings = {
  headerTimeoutMs: 10_000,
  idleTimeoutMs: 60_000,
  maxAuthenticated: 1024,
  maxUnauthenticated: 128,
};

/** What `gateway start` accepts (seconds for the durations). */
export const CONNECTION_BOUNDS_RANGES = {
  headerTimeout: { minS: 1, maxS: 600 },
  idleTimeout: { minS: 1, maxS: 3600 },
  maxAuthenticated: { min: 1, max: 1_000_000 },
  maxUnauthenticated: { min: 1, max: 1_000_000 },
} as const;

export const CLOSE_REASONS = ["header_timeout", "handshake_timeout", "idle", "evicted", "refused_full"] as const;
export type CloseReason = (typeof CLOSE_REASONS)[number];

export interface ConnectionBoundsStats {
  /** Open now, by pool. */
  open: { unauthenticated: number; authenticated: number };
  limits: ConnectionBoundsSettings;
  /** Accepted since the bounds were applied (refused ones included). */
  accepted: number;
  /** Closed by these bounds, by reason (a peer's own close is not counted). */
  closed: Record<CloseReason, number>;
}

/** Where a closed connection was: the listener's address it reached and its peer's. */
export interface ClosedConnection {
  localAddress: string | undefined;
  localPort: number | undefined;
  remoteAddress: string | undefined;
}

export interface ConnectionBoundsOptions extends Partial<ConnectionBoundsSettings> {
  /** A full unauthenticated pool: evict its oldest (default) or refuse the new one. */
  whenFull?: FullPolicy;
  /** Told of every close these bounds make, as it happens (e.g. to audit refusals). */
  onClose?: (reason: CloseReason, connection: ClosedConnection) => void;
}

export type AuthenticatedResult = { ok: true } | { ok: false; reason: string };

export interface ConnectionBounds {
  readonly settings: ConnectionBoundsSettings;
  /**
   * The server's code calls this once a request on `socket` passed its token check (or a
   * WebSocket session's hello was verified): the connection moves to the authenticated pool.
   * With that pool full it stays unauthenticated and the answer says why: the caller answers
   * it (503, a WebSocket close) and closes it. `socket` is the one the request came on
   * (`req.socket`), a TLS socket or a plain one.
   */
  authenticated(socket: Duplex): AuthenticatedResult;
  stats(): ConnectionBoundsStats;
  /** Stops every timer (the server is closing); connections are left as they are. */
  close(): void;
}

/** Server options that go with the bounds: node's header check as a backstop, never a request deadline (a long upload is not cut). */
export function boundedServerOptions(settings: Partial<ConnectionBoundsSettings> = {}): { headersTimeout: number; requestTimeout: number; keepAliveTimeout: number; connectionsCheckingInterval: number } {
  const s = { ...DEFAULT_CONNECTION_BOUNDS, ...settings };
  return { headersTimeout: s.headerTimeoutMs, requestTimeout: 0, keepAliveTimeout: s.idleTimeoutMs, connectionsCheckingInterval: checkInterval(s.headerTimeoutMs) };
}

const checkInterval = (headerTimeoutMs: number): number => Math.min(1000, Math.max(50, Math.floor(headerTimeoutMs / 2)));

interface Conn {
  raw: net.Socket;
  /** The socket HTTP runs on: the TLS socket once its handshake is done, else the raw one. */
  http: net.Socket | undefined;
  tls: boolean;
  inflight: number;
  upgraded: boolean;
  timer: NodeJS.Timeout | undefined;
  closing: CloseReason | undefined;
  /** Taken at accept: a destroyed socket no longer knows its addresses. */
  where: ClosedConnection;
}

/** The events that end a request head, and those that hand the connection over (tunnel, upgrade). */
const REQUEST_EVENTS = ["checkContinue", "checkExpectation"] as const;
const HANDOVER_EVENTS = ["upgrade", "connect"] as const;
type Listener = Parameters<net.Server["on"]>[1];

/**
 * Applies the bounds to `server` (an http.Server, https.Server or tls.Server), from now on.
 * Call it before the server accepts connections. A bare tls.Server has no request heads:
 * its connections must authenticate within the header timeout.
 */
export function boundConnections(server: net.Server, opts: ConnectionBoundsOptions = {}): ConnectionBounds {
  const settings: ConnectionBoundsSettings = {
    headerTimeoutMs: opts.headerTimeoutMs ?? DEFAULT_CONNECTION_BOUNDS.headerTimeoutMs,
    idleTimeoutMs: opts.idleTimeoutMs ?? DEFAULT_CONNECTION_BOUNDS.idleTimeoutMs,
    maxAuthenticated: opts.maxAuthenticated ?? DEFAULT_CONNECTION_BOUNDS.maxAuthenticated,
    maxUnauthenticated: opts.maxUnauthenticated ?? DEFAULT_CONNECTION_BOUNDS.maxUnauthenticated,
  };
  const pools = new ConnectionPools<Duplex>({ unauthenticated: settings.maxUnauthenticated, authenticated: settings.maxAuthenticated }, opts.whenFull ?? "evict_oldest");
  const conns = new Map<Duplex, Conn>();
  const closed = Object.fromEntries(CLOSE_REASONS.map((r) => [r, 0])) as Record<CloseReason, number>;
  let accepted = 0;
  const isTls = "addContext" in server;
  const httpServer = server as Partial<http.Server>;
  if ("headersTimeout" in server) {
    const o = boundedServerOptions(settings);
    httpServer.headersTimeout = o.headersTimeout;
    httpServer.requestTimeout = o.requestTimeout;
    httpServer.keepAliveTimeout = o.keepAliveTimeout;
  }

  /** Counts a close these bounds caused (once per connection). */
  const count = (c: Conn, reason: CloseReason): void => {
    if (c.closing !== undefined) return;
    c.closing = reason;
    clearTimeout(c.timer);
    pools.release(c.raw);
    closed[reason]++;
    opts.onClose?.(reason, c.where);
  };
  const closeWith = (c: Conn, reason: CloseReason): void => {
    count(c, reason);
    c.http?.destroy();
    c.raw.destroy();
  };
  const arm = (c: Conn, ms: number, reason: () => CloseReason): void => {
    clearTimeout(c.timer);
    c.timer = setTimeout(() => closeWith(c, reason()), ms);
    c.timer.unref();
  };
  const lookup = (socket: Duplex): Conn | undefined => {
    // A TLS socket's raw TCP socket is its _parent (node sets it for a server's sockets).
    const parent = (socket as Duplex & { _parent?: Duplex })._parent;
    return conns.get(socket) ?? (parent === undefined ? undefined : conns.get(parent));
  };

  /** The socket HTTP runs on: node's header check shows up on it. */
  const watchHttp = (c: Conn, socket: net.Socket): void => {
    c.http = socket;
    socket.on("error", (err: NodeJS.ErrnoException) => {
      if (err.code === "ERR_HTTP_REQUEST_TIMEOUT") count(c, "header_timeout");
    });
  };

  const onConnection = (raw: net.Socket): void => {
    accepted++;
    const c: Conn = { raw, http: undefined, tls: isTls, inflight: 0, upgraded: false, timer: undefined, closing: undefined, where: { localAddress: raw.localAddress, localPort: raw.localPort, remoteAddress: raw.remoteAddress } };
    const admission = pools.admit(raw);
    if (!admission.admitted) {
      count(c, "refused_full");
      // At once and unmistakably (a reset, not an orderly close): nothing was read. A Unix
      // socket has no reset: it is just closed.
      if (raw.remoteAddress === undefined) raw.destroy();
      else raw.resetAndDestroy();
      return;
    }
    if (admission.evict !== undefined) {
      const old = conns.get(admission.evict);
      if (old !== undefined) closeWith(old, "evicted");
    }
    conns.set(raw, c);
    // Ours is one more listener than the server's own code plans for (a proxy's tunnel has ten).
    raw.setMaxListeners(raw.getMaxListeners() + 1);
    raw.once("close", () => {
      clearTimeout(c.timer);
      conns.delete(raw);
      pools.release(raw);
    });
    if (!isTls) watchHttp(c, raw);
    arm(c, settings.headerTimeoutMs, () => (c.tls && c.http === undefined ? "handshake_timeout" : "header_timeout"));
  };

  const onRequestHead = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    const c = lookup(req.socket);
    if (c === undefined) return;
    clearTimeout(c.timer);
    c.inflight++;
    res.once("close", () => {
      c.inflight--;
      if (c.inflight === 0 && !c.upgraded && !c.raw.destroyed) {
        // Ours instead of node's keep-alive timer, which each byte received resets (it still
        // gives clients the Keep-Alive hint): node armed it when the response finished, just before.
        c.http?.setTimeout(0);
        arm(c, settings.idleTimeoutMs, () => "idle");
      }
    });
  };

  const onHandover = (req: http.IncomingMessage, socket: Duplex): void => {
    const c = lookup(socket) ?? lookup(req.socket);
    if (c === undefined) return;
    clearTimeout(c.timer);
    c.upgraded = true;
  };

  const onSecure = (tlsSocket: net.Socket): void => {
    const c = lookup(tlsSocket);
    if (c !== undefined) watchHttp(c, tlsSocket);
  };

  server.prependListener("connection", onConnection);
  if (isTls) server.prependListener("secureConnection", onSecure);
  server.prependListener("request", onRequestHead);
  // These events change what node does by merely having a listener (without one a CONNECT is
  // dropped, an Upgrade is an ordinary request, an Expect is answered by node): observe them
  // only while the server's own code listens too.
  const observers = new Map<string, Listener>([
    ...REQUEST_EVENTS.map((e) => [e, onRequestHead as Listener] as const),
    ...HANDOVER_EVENTS.map((e) => [e, onHandover as Listener] as const),
  ]);
  const attached = new Set<string>();
  /** True while adding or removing an observer of ours (which raises these events too). */
  let own = false;
  const follow = (event: string | symbol, adding: boolean): void => {
    const observer = typeof event === "string" ? observers.get(event) : undefined;
    if (own || observer === undefined) return;
    const name = event as string;
    // 'newListener' comes before the listener is added, 'removeListener' after it is removed.
    const others = server.listenerCount(name) - (attached.has(name) ? 1 : 0) + (adding ? 1 : 0);
    own = true;
    if (others > 0 && !attached.has(name)) {
      attached.add(name);
      server.prependListener(name, observer);
    } else if (others === 0 && attached.has(name)) {
      attached.delete(name);
      server.removeListener(name, observer);
    }
    own = false;
  };
  const onNewListener = (event: string | symbol): void => follow(event, true);
  const onRemoveListener = (event: string | symbol): void => follow(event, false);
  for (const event of observers.keys()) follow(event, false);
  server.on("newListener", onNewListener);
  server.on("removeListener", onRemoveListener);

  return {
    settings,
    authenticated(socket) {
      // A connection gone meanwhile (or accepted before the bounds) holds no slot: nothing to move.
      const c = lookup(socket);
      if (c === undefined || pools.authenticate(c.raw) !== "full") return { ok: true };
      closed.refused_full++;
      opts.onClose?.("refused_full", c.where);
      return { ok: false, reason: `the listener holds its ${settings.maxAuthenticated} authenticated connections (connections_full)` };
    },
    stats: () => ({ open: pools.counts, limits: { ...settings }, accepted, closed: { ...closed } }),
    close() {
      for (const c of conns.values()) clearTimeout(c.timer);
      server.removeListener("newListener", onNewListener);
      server.removeListener("removeListener", onRemoveListener);
    },
  };
}
