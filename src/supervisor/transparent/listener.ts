// The transparent path's listener: every TCP connection the workload opens to any address
// (its namespace routes it to the supervisor, whose namespace redirects it here) is read for
// its original destination and its first bytes, then handed to the egress proxy's own pieces
// (EgressProxy.entries), so it gets exactly the decisions, audit records, credential rules and
// revocation of a proxied one:
//   - a TLS ClientHello: a tunnel to its SNI (a CONNECT to SNI:port), terminated where a rule
//     inspects or injects, blind where it only allows the name, refused without SNI for https;
//   - an HTTP/1 request: served as an origin-form request, its target from the Host header;
//   - anything else, or nothing within `peekTimeoutMs` (a protocol whose server speaks first):
//     a tunnel to host:port, the host a name the supervisor's resolver answered for the
//     address, else the address itself (decided by `protocol: tcp` endpoints).
// The workload's choice of address never chooses where the supervisor connects: it resolves
// the name (SNI, Host, or the answered name) itself and connects to what it checked.
import http from "node:http";
import net from "node:net";
import type { EgressEntries, HttpTarget, TargetReader, TunnelAnswer } from "../proxy/index.js";
import { normalizeHost } from "../proxy/target.js";
import type { AuditEvent } from "../proxy/types.js";
import { evaluate, type Policy } from "../../policy/core.js";
import type { NameMemory } from "./name-memory.js";
import { classifyOpening, type Opening } from "./opening.js";
import type { Destination } from "../original-dst.js";

export interface TransparentOptions {
  entries: EgressEntries;
  originalDst: (socket: net.Socket) => Destination;
  names: NameMemory;
  policy: () => Policy | undefined;
  /** A connection over the cap, recorded like the proxy's (connection_limit). */
  onAudit: (event: AuditEvent) => void;
  /** Connections open at once; past it a new one is closed at once and audited. */
  maxConnections: number;
  /** How long to wait for a client's first bytes before taking it as raw TCP. Default 1000. */
  peekTimeoutMs?: number;
}

export interface TransparentListener {
  listen(port: number, host: string): Promise<net.AddressInfo>;
  isListening(): boolean;
  readonly open: number;
  close(): Promise<void>;
}

/** Nothing is written to a transparent client (it believes it reached its origin): a refusal closes it. */
const TRANSPARENT_ANSWER: TunnelAnswer = {
  established: () => undefined,
  refuse: (socket) => void socket.destroy(),
};

/** Where each socket was headed (for a request whose Host header has no port). */
const destinations = new WeakMap<net.Socket, Destination>();

/** Origin-form requests: the target is the Host header's host, on its port or the original one. */
const HOST_HEADER: TargetReader = {
  read(req: http.IncomingMessage): HttpTarget | undefined {
    const host = req.headers.host;
    const dst = destinations.get(req.socket);
    if (host === undefined || dst === undefined || !(req.url ?? "").startsWith("/")) return undefined;
    let u: URL;
    try {
      u = new URL(`http://${host}${req.url ?? "/"}`);
    } catch {
      return undefined;
    }
    const port = u.port === "" ? dst.port : Number(u.port);
    const name = normalizeHost(u.hostname);
    // The Host header goes upstream as the client sent it.
    return { host: name, port, protocol: "http", method: req.method ?? "GET", path: u.pathname, requestPath: `${u.pathname}${u.search}`, authority: host, via: "transparent" };
  },
  refusal: (req) => ({ error: "transparent_request_needs_host", detail: `a request on the transparent path names its host in the Host header and its path in origin form, got ${JSON.stringify((req.url ?? "").slice(0, 100))}` }),
};

export function createTransparentListener(o: TransparentOptions): TransparentListener {
  const peekTimeoutMs = o.peekTimeoutMs ?? 1000;
  const plain = o.entries.plainHttp(HOST_HEADER);
  // Plain HTTP is parsed by node's own server, fed the sockets this listener classified.
  const http1 = http.createServer({ noDelay: true });
  http1.on("request", (req, res) => plain.request(req, res, false));
  http1.on("checkContinue", (req, res) => plain.request(req, res, true));
  http1.on("upgrade", plain.upgrade);
  // A CONNECT on the transparent path is not a proxy request: nothing is relayed.
  http1.on("connect", (_req, socket: net.Socket) => socket.destroy());
  const sockets = new Set<net.Socket>();

  const hostFor = (dst: Destination, port: number): string => {
    const names = o.names.namesOf(dst.address);
    const policy = o.policy();
    const allowed = policy === undefined ? undefined : names.find((n) => evaluate(policy, { host: n, port, protocol: "tcp" }).allow);
    return allowed ?? names[0] ?? dst.address;
  };

  const dispatch = (socket: net.Socket, dst: Destination, opening: Opening, head: Buffer): void => {
    if (opening.kind === "http") {
      destinations.set(socket, dst);
      o.entries.addClient(socket);
      socket.unshift(head);
      http1.emit("connection", socket);
      // Node's server reads a socket handed to it only once it flows (it was paused to peek).
      socket.resume();
      return;
    }
    const host = opening.kind === "tls" && opening.serverName !== null ? normalizeHost(opening.serverName) : hostFor(dst, dst.port);
    o.entries.tunnel(socket, { host, port: dst.port }, { head, answer: TRANSPARENT_ANSWER, via: "transparent" });
  };

  const server = net.createServer({ pauseOnConnect: true, noDelay: true }, (socket) => {
    socket.on("error", () => undefined);
    let dst: Destination;
    try {
      dst = o.originalDst(socket);
    } catch {
      // Not redirected (dialled to this port directly): there is nowhere it was going.
      socket.destroy();
      return;
    }
    if (sockets.size >= o.maxConnections) {
      // Refused at once (a reset, as the proxy's cap does), recorded where it was headed.
      o.onAudit({ type: "egress", time: new Date().toISOString(), decision: "deny", reason: "connection_limit", host: dst.address, port: dst.port, protocol: "tcp", via: "transparent" });
      socket.resetAndDestroy();
      return;
    }
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
    let head = Buffer.alloc(0);
    let done = false;
    const decide = (opening: Opening): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.off("data", onData);
      socket.off("end", onEnd);
      socket.pause();
      dispatch(socket, dst, opening, head);
    };
    const onData = (chunk: Buffer): void => {
      head = Buffer.concat([head, chunk]);
      const opening = classifyOpening(head);
      if (opening.kind !== "incomplete") decide(opening);
    };
    const onEnd = (): void => decide(head.length === 0 ? { kind: "other", why: "closed before a byte" } : classifyOpening(head).kind === "incomplete" ? { kind: "other", why: "ended mid-opening" } : classifyOpening(head));
    const timer = setTimeout(() => decide(head.length === 0 ? { kind: "other", why: "the client waits for the server" } : { kind: "other", why: "an opening that never completed" }), peekTimeoutMs);
    socket.on("data", onData);
    socket.once("end", onEnd);
    socket.resume();
  });

  return {
    listen(port, host) {
      return new Promise((resolve, reject) => {
        server.once("error", reject);
        server.listen(port, host, () => {
          server.off("error", reject);
          resolve(server.address() as net.AddressInfo);
        });
      });
    },
    isListening: () => server.listening,
    get open() {
      return sockets.size;
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => (server.listening ? server.close(() => r()) : r()));
      http1.close();
    },
  };
}
