// The registry of the workload's open connections and what each was allowed for: plain-HTTP
// client connections (and their requests in flight), tunnels (CONNECT, upgraded WebSockets),
// and the upstream keep-alive agent's sockets. revoke.ts re-checks them; close() drains them.
// A listener adds its sockets here (addClient, asTunnel): then revocation reaches them.
import http from "node:http";
import type net from "node:net";
import type { Duplex } from "node:stream";
import type { TunnelKind } from "../../policy/core.js";
import type { Logger } from "../logger.js";
import { errorFields } from "../logger.js";
import type { Target } from "./target.js";
import type { EgressProtocol } from "./types.js";
import { pause } from "../../util/pause.js";

/**
 * What one open connection was allowed for: the request as evaluated and the address
 * that was checked and connected to. Re-evaluated on every revocation.
 */
export interface Grant {
  host: string;
  port: number;
  protocol: EgressProtocol;
  /** CONNECT tunnels: what the tunnel carries, re-checked with tunnelStaysOpen. */
  tunnel?: TunnelKind;
  method?: string;
  path?: string;
  address: string;
}

export function grantOf(t: Target, address: string, tunnel?: TunnelKind): Grant {
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

/** Past requests remembered per kept-alive connection; beyond this it is closed on any revocation. */
const GRANTS_PER_CONNECTION = 64;

/** The grants a kept-alive connection has carried. */
export interface GrantSet {
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
export interface ClientConnection {
  socket: net.Socket;
  carried: GrantSet;
  /** Requests being answered on it now. */
  active: Set<http.ServerResponse>;
  /** A past request is no longer allowed: close it as soon as it is idle. */
  stale: boolean;
}

/** A CONNECT tunnel, or an upgraded WebSocket, from its request until it closes. */
export interface Tunnel {
  client: Duplex;
  /** Set once the target was allowed. */
  grant?: Grant;
  upstream?: Duplex;
  /** A WebSocket upgraded inside this (terminated) tunnel: its request, re-checked too. */
  upgrade?: { grant: Grant; upstream?: Duplex };
  /** Run when the client socket closes (its audit close record). */
  onClose?: () => void;
}

/**
 * Closes an idle client connection without cutting the tail of its last response: at once
 * when nothing is left to write, else once written (a client that does not read gets 5 s).
 */
export function closeIdle(socket: net.Socket): void {
  if (socket.writableLength === 0) {
    socket.destroy();
    return;
  }
  socket.end();
  socket.once("finish", () => socket.destroy());
  setTimeout(() => socket.destroy(), 5000).unref();
}

export function closeTunnel(tn: Tunnel): void {
  tn.client.destroy();
  tn.upstream?.destroy();
  tn.upgrade?.upstream?.destroy();
}

export class ConnectionRegistry {
  readonly tunnels = new Map<Duplex, Tunnel>();
  readonly clients = new Map<Duplex, ClientConnection>();
  /** In-flight requests; the grant once the request was allowed. */
  readonly inflight = new Map<http.ServerResponse, Grant | undefined>();
  /**
   * One keep-alive agent for plain http upstream; its pools are keyed by host:port, and host
   * is always the checked IP, so reuse never crosses to an address that was not checked.
   * noDelay on every socket of both sides: a small write must not wait for Nagle's timer.
   */
  readonly agent = new http.Agent({ keepAlive: true, maxFreeSockets: 256, scheduling: "lifo", noDelay: true });
  /** What each upstream socket of the agent has carried. */
  private readonly upstreamCarried = new WeakMap<net.Socket, GrantSet>();
  /** Upstream sockets in use at a revocation that carried a request no longer allowed: closed once freed. */
  private readonly upstreamStale = new WeakSet<net.Socket>();
  private onDrained: (() => void) | undefined;

  constructor(private readonly logger: Logger) {
    this.agent.on("free", (socket: net.Socket) => {
      // Only when it went to the pool: a freed socket may be handed straight to a waiting request.
      if (this.upstreamStale.has(socket) && Object.values(this.agent.freeSockets).some((list) => list?.includes(socket) === true)) socket.destroy();
    });
  }

  /** A socket that will carry plain HTTP requests, from its accept until it closes. */
  addClient(socket: net.Socket): void {
    this.clients.set(socket, { socket, carried: newGrantSet(), active: new Set(), stale: false });
    socket.once("close", () => this.clients.delete(socket));
  }

  /** From here on the socket is a tunnel (CONNECT, or an upgrade), not an HTTP connection. */
  asTunnel(socket: Duplex): Tunnel {
    this.clients.delete(socket);
    const entry: Tunnel = { client: socket };
    this.tunnels.set(socket, entry);
    // One close listener for the registry and the close record: a relayed socket already carries many.
    socket.once("close", () => {
      this.tunnels.delete(socket);
      entry.onClose?.();
    });
    socket.on("error", (err) => this.logger.warn("tunnel client socket error", errorFields(err)));
    return entry;
  }

  /** A request being answered, until its response closes. */
  track(req: http.IncomingMessage, res: http.ServerResponse): void {
    this.inflight.set(res, undefined);
    const conn = this.clients.get(req.socket);
    conn?.active.add(res);
    res.once("close", () => {
      this.inflight.delete(res);
      if (conn !== undefined) {
        conn.active.delete(res);
        if (conn.stale && conn.active.size === 0) closeIdle(conn.socket);
      }
      if (this.inflight.size === 0) this.onDrained?.();
    });
  }

  /** The request was allowed: its connection and response now carry this grant. */
  granted(req: http.IncomingMessage, res: http.ServerResponse, g: Grant): void {
    if (this.inflight.has(res)) this.inflight.set(res, g);
    const conn = this.clients.get(req.socket);
    if (conn !== undefined) addGrant(conn.carried, g);
  }

  /** An upstream socket of the agent now carries `g` as well. */
  carries(socket: net.Socket, g: Grant): void {
    let carried = this.upstreamCarried.get(socket);
    if (carried === undefined) {
      carried = newGrantSet();
      this.upstreamCarried.set(socket, carried);
    }
    addGrant(carried, g);
  }

  /** What an upstream socket has carried, if it carried anything. */
  carriedBy(socket: net.Socket): GrantSet | undefined {
    return this.upstreamCarried.get(socket);
  }

  /** An upstream socket in use that must not serve again: closed when it is freed to the pool. */
  markStale(socket: net.Socket): void {
    this.upstreamStale.add(socket);
  }

  /** Resolves once no request is in flight, or after graceMs. */
  async drained(graceMs: number): Promise<void> {
    if (this.inflight.size === 0) return;
    const drained = new AbortController();
    this.onDrained = () => drained.abort();
    await pause(graceMs, drained.signal, { ref: false });
  }
}
