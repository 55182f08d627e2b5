// The connection bounds of one listener, with real sockets on loopback: slow and silent
// request heads, kept-alive idle connections, TLS handshakes that never finish, the two
// pools (eviction order, a full authenticated pool, refusal), and what must never be cut
// (a long upload, a long streamed response, an upgraded connection, a 100-continue body).
// Nothing here measures time: where a test needs "longer than a timeout", a witness
// connection opened at the same moment is closed by that timeout first.
import http from "node:http";
import https from "node:https";
import net from "node:net";
import tls from "node:tls";
import type { AddressInfo } from "node:net";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { ConnectionPools } from "../../../src/util/connection-pools.js";
import { boundConnections, boundedServerOptions, type ConnectionBounds, type ConnectionBoundsOptions, type CloseReason, type ClosedConnection } from "../../../src/util/connection-bounds.js";
import { issueEndpointCertificate, type EndpointTls } from "../../../src/gateway/control/tls.js";
import { eventually } from "../../support/gateway-fixture.js";

const TOKEN = "Bearer let-me-in";
let cert: EndpointTls;
const cleanups: (() => Promise<void> | void)[] = [];

beforeAll(async () => {
  cert = await issueEndpointCertificate({ commonName: "localhost" });
});
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

interface Listener {
  server: http.Server;
  bounds: ConnectionBounds;
  port: number;
  closes: { reason: CloseReason; connection: ClosedConnection }[];
  /** What authenticated() said for /late requests, called once their connection had closed. */
  lateResults: boolean[];
}

/**
 * A server whose handler authenticates a request carrying TOKEN (503 when the authenticated
 * pool is full), answers /stream with chunks until /stream-end, counts an upload's bytes,
 * and otherwise answers "ok".
 */
async function listen(opts: ConnectionBoundsOptions & { tls?: boolean; setup?: (s: http.Server) => void; serverOptions?: http.ServerOptions }): Promise<Listener> {
  const handler = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    if (req.headers.authorization === TOKEN) {
      const a = l.bounds.authenticated(req.socket);
      if (!a.ok) {
        res.writeHead(503, { connection: "close" }).end(a.reason);
        return;
      }
    }
    if (req.url === "/late") {
      // A token check that ends after the client went away (e.g. a slow signature check).
      req.socket.once("close", () => lateResults.push(l.bounds.authenticated(req.socket).ok));
      return;
    }
    if (req.url === "/early") {
      // Answered at once, before the body: node reads the rest of it and throws it away.
      res.end("early");
      return;
    }
    if (req.url === "/stream") {
      res.writeHead(200, { "content-type": "text/plain" });
      res.write("first\n");
      streams.push(res);
      return;
    }
    let n = 0;
    req.on("data", (b: Buffer) => (n += b.length));
    req.on("end", () => res.end(req.method === "POST" ? `got ${n}` : "ok"));
  };
  const streams: http.ServerResponse[] = [];
  const lateResults: boolean[] = [];
  const options = { ...boundedServerOptions(opts), ...opts.serverOptions };
  const server = opts.tls ? https.createServer({ cert: cert.certPem, key: cert.keyPem, ...options }, handler) : http.createServer(options, handler);
  opts.setup?.(server);
  const closes: Listener["closes"] = [];
  const l: Listener = { server, bounds: boundConnections(server, { ...opts, onClose: (reason, connection) => closes.push({ reason, connection }) }), port: 0, closes, lateResults };
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  l.port = (server.address() as AddressInfo).port;
  cleanups.push(async () => {
    for (const s of streams) s.destroy();
    l.bounds.close();
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  });
  return l;
}

interface Client {
  socket: net.Socket;
  /** Everything received. */
  data(): string;
  /** Resolves when the server closed it: "reset" for a reset, else "closed". */
  closed: Promise<"closed" | "reset">;
  isClosed(): boolean;
}

function watch(socket: net.Socket): Client {
  let text = "";
  let done = false;
  socket.on("data", (b: Buffer) => (text += b.toString("latin1")));
  const closed = new Promise<"closed" | "reset">((resolve) => {
    let reset = false;
    socket.on("error", (e: NodeJS.ErrnoException) => (reset ||= e.code === "ECONNRESET"));
    socket.on("close", () => {
      done = true;
      resolve(reset ? "reset" : "closed");
    });
  });
  cleanups.push(() => void socket.destroy());
  return { socket, data: () => text, closed, isClosed: () => done };
}

const connect = async (port: number): Promise<Client> => {
  const socket = net.connect(port, "127.0.0.1");
  const c = watch(socket);
  await new Promise<void>((r, j) => {
    socket.once("connect", r);
    socket.once("error", j);
  });
  return c;
};

const connectTls = async (port: number): Promise<Client> => {
  const socket = tls.connect({ port, host: "127.0.0.1", rejectUnauthorized: false });
  const c = watch(socket);
  await new Promise<void>((r, j) => {
    socket.once("secureConnect", r);
    socket.once("error", j);
  });
  return c;
};

/** Writes `text` one byte at a time, one every `everyMs`, until the socket closes (or the text ends). */
function drip(c: Client, text: string, everyMs = 40): void {
  let i = 0;
  const t = setInterval(() => {
    if (c.isClosed() || i >= text.length) clearInterval(t);
    else c.socket.write(text[i++]!);
  }, everyMs);
  cleanups.push(() => clearInterval(t));
}

/** Waits until the server has accepted `n` connections in all (so their order is known). */
const accepted = (l: Listener, n: number): Promise<true> => eventually(() => (l.bounds.stats().accepted >= n ? true : undefined), 10_000, `${n} connections accepted`);

const GET = (path = "/", headers = ""): string => `GET ${path} HTTP/1.1\r\nHost: x\r\n${headers}\r\n`;

/**
 * A client still dripping its head when the server closes: the close is orderly, but a byte
 * it sends after it draws the kernel's reset, which may reach it before the close does.
 */
async function closedWhileSending(c: Client): Promise<void> {
  expect(["closed", "reset"]).toContain(await c.closed);
}

/** Reads one complete response (with a Content-Length or chunked to its end) from what `c` has received since `from`. */
async function response(c: Client, from = 0): Promise<string> {
  return eventually(() => {
    const text = c.data().slice(from);
    const head = text.indexOf("\r\n\r\n");
    if (head < 0) return undefined;
    const len = /content-length: (\d+)/i.exec(text.slice(0, head));
    if (len !== null) return text.length >= head + 4 + Number(len[1]) ? text.slice(0, head + 4 + Number(len[1])) : undefined;
    return text.endsWith("0\r\n\r\n") ? text : undefined;
  }, 10_000, "a complete response");
}

describe("pools (pure)", () => {
  it("admits up to the cap, then evicts the oldest unauthenticated first, or refuses", () => {
    const p = new ConnectionPools<string>({ unauthenticated: 2, authenticated: 1 }, "evict_oldest");
    expect(p.admit("a")).toEqual({ admitted: true });
    expect(p.admit("b")).toEqual({ admitted: true });
    expect(p.admit("c")).toEqual({ admitted: true, evict: "a" });
    expect(p.authenticate("b")).toBe("moved");
    expect(p.authenticate("b")).toBe("already");
    // An authenticated connection is never evicted: only "c" is unauthenticated now.
    expect(p.admit("d")).toEqual({ admitted: true });
    expect(p.admit("e")).toEqual({ admitted: true, evict: "c" });
    expect(p.authenticate("d")).toBe("full");
    expect(p.counts).toEqual({ unauthenticated: 2, authenticated: 1 });
    expect(p.release("b")).toBe(true);
    expect(p.release("b")).toBe(false);
    expect(p.authenticate("b")).toBe("unknown");
    expect(p.authenticate("d")).toBe("moved");
    expect(p.isAuthenticated("d")).toBe(true);
    const r = new ConnectionPools<string>({ unauthenticated: 1, authenticated: 1 }, "refuse");
    expect(r.admit("a")).toEqual({ admitted: true });
    expect(r.admit("b")).toEqual({ admitted: false });
    expect(r.counts).toEqual({ unauthenticated: 1, authenticated: 0 });
  });
});

describe("header timeout", () => {
  it("closes a connection that sends nothing, and one that sends its head one byte at a time", async () => {
    const l = await listen({ headerTimeoutMs: 300 });
    const silent = await connect(l.port);
    const slow = await connect(l.port);
    drip(slow, "GET / HTTP/1.1\r\nHost: x\r\nX-Slow: " + "a".repeat(10_000));
    expect(await silent.closed).toBe("closed");
    await closedWhileSending(slow);
    expect(l.bounds.stats().closed.header_timeout).toBe(2);
    expect(l.bounds.stats().open).toEqual({ unauthenticated: 0, authenticated: 0 });
    expect(l.closes.map((c) => c.reason)).toEqual(["header_timeout", "header_timeout"]);
    expect(l.closes[0]!.connection).toMatchObject({ localAddress: "127.0.0.1", localPort: l.port, remoteAddress: "127.0.0.1" });
  });

  it("closes a later request on a kept-alive connection whose head never ends, also on a server made with node's header check off", async () => {
    // Idle much longer than the header timeout: the header check, not the idle timer, closes it.
    // The server is made as fastify makes it (requestTimeout 0, so headersTimeout 0); the bounds turn the check on.
    const l = await listen({ headerTimeoutMs: 300, idleTimeoutMs: 60_000, serverOptions: { requestTimeout: 0, headersTimeout: 0, connectionsCheckingInterval: 100 } });
    const c = await connect(l.port);
    c.socket.write(GET());
    const first = await response(c);
    expect(first).toMatch(/^HTTP\/1\.1 200/);
    drip(c, "GET /second HTTP/1.1\r\nHost: x\r\nX-Slow: " + "a".repeat(10_000));
    await closedWhileSending(c);
    expect(c.data().slice(first.length)).toMatch(/^HTTP\/1\.1 408/);
    expect(l.bounds.stats().closed).toMatchObject({ header_timeout: 1, idle: 0 });
  });

  it("TLS: closes a handshake that never finishes (handshake_timeout) and a head that never ends after it (header_timeout)", async () => {
    const l = await listen({ tls: true, headerTimeoutMs: 300 });
    // The first bytes of a ClientHello, then nothing more: node's own handshake timer would wait 120 s.
    const hello = await connect(l.port);
    hello.socket.write(Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc]));
    const slow = await connectTls(l.port);
    drip(slow, "GET / HTTP/1.1\r\nHost: x\r\nX-Slow: " + "a".repeat(10_000));
    const silent = await connectTls(l.port);
    expect(await hello.closed).toBe("closed");
    await closedWhileSending(slow);
    expect(await silent.closed).toBe("closed");
    expect(l.bounds.stats().closed).toMatchObject({ handshake_timeout: 1, header_timeout: 2 });
  });

  it("TLS: a client that authenticates is served, and its kept-alive connection moves to the authenticated pool", async () => {
    const l = await listen({ tls: true, headerTimeoutMs: 2000 });
    const c = await connectTls(l.port);
    c.socket.write(GET("/", `Authorization: ${TOKEN}\r\n`));
    expect(await response(c)).toMatch(/^HTTP\/1\.1 200/);
    expect(l.bounds.stats().open).toEqual({ unauthenticated: 0, authenticated: 1 });
  });
});

describe("idle timeout", () => {
  it("closes a kept-alive connection with no request in flight; one with a request in flight is not idle", async () => {
    // Made with node's default keep-alive timeout (5 s): the bounds replace it.
    const l = await listen({ headerTimeoutMs: 200, idleTimeoutMs: 1500, serverOptions: { keepAliveTimeout: 5000 } });
    const c = await connect(l.port);
    c.socket.write(GET());
    const first = await response(c);
    // Clients are told when the server will close it (node's keepAliveTimeout, in whole seconds).
    expect(first).toMatch(/\r\nKeep-Alive: timeout=1\r\n/);
    // A witness opened now is closed by the header timeout first: the header timeout does not
    // apply between two requests of a kept-alive connection, and the next one is served.
    const witness = await connect(l.port);
    expect(await witness.closed).toBe("closed");
    expect(c.isClosed()).toBe(false);
    c.socket.write(GET("/again"));
    expect(await response(c, first.length)).toMatch(/^HTTP\/1\.1 200/);
    expect(await c.closed).toBe("closed");
    expect(l.bounds.stats().closed).toMatchObject({ idle: 1, header_timeout: 1 });
    expect(l.closes.map((x) => x.reason)).toEqual(["header_timeout", "idle"]);
  });

  it("a body still trickling in after its response was sent does not keep the connection open", async () => {
    // node discards the rest of such a body, and each byte of it resets its keep-alive timer.
    const l = await listen({ headerTimeoutMs: 200, idleTimeoutMs: 600 });
    const c = await connect(l.port);
    c.socket.write("POST /early HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000\r\n\r\n");
    drip(c, "x".repeat(100_000), 50);
    expect(await response(c)).toMatch(/^HTTP\/1\.1 200[^]*early$/);
    expect(await c.closed).toBe("closed");
    expect(l.bounds.stats().closed.idle).toBe(1);
  });
});

describe("what is never cut", () => {
  /** Opens, at the same moment, a silent connection and a kept-alive idle one; resolves when both were closed by their timeouts. */
  async function bothTimeoutsPassed(l: Listener): Promise<void> {
    const silent = await connect(l.port);
    const idle = await connect(l.port);
    idle.socket.write(GET());
    await response(idle);
    await Promise.all([silent.closed, idle.closed]);
  }

  it("a long upload (a slow chunked body) past both timeouts is received whole, even on a server made with a request deadline", async () => {
    // The bounds lift node's requestTimeout, which would cut it (it is 300 s by default).
    const l = await listen({ headerTimeoutMs: 200, idleTimeoutMs: 400, serverOptions: { requestTimeout: 250 } });
    const c = await connect(l.port);
    c.socket.write("POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
    let sent = 0;
    const t = setInterval(() => {
      c.socket.write("400\r\n" + "x".repeat(1024) + "\r\n");
      sent += 1024;
    }, 30);
    cleanups.push(() => clearInterval(t));
    await bothTimeoutsPassed(l);
    clearInterval(t);
    c.socket.write("0\r\n\r\n");
    expect(await response(c)).toMatch(new RegExp(`^HTTP/1\\.1 200[^]*got ${sent}$`));
    expect(c.isClosed()).toBe(false);
  });

  it("a long streamed response past both timeouts goes on to its end", async () => {
    let streamRes: http.ServerResponse | undefined;
    const l = await listen({
      headerTimeoutMs: 200,
      idleTimeoutMs: 400,
      setup: (s) =>
        s.prependListener("request", (req: http.IncomingMessage, res: http.ServerResponse) => {
          if (req.url === "/stream") streamRes = res;
        }),
    });
    const c = await connect(l.port);
    c.socket.write(GET("/stream"));
    await eventually(() => (c.data().includes("first") ? true : undefined));
    await bothTimeoutsPassed(l);
    streamRes!.end("last\n");
    const text = await response(c);
    expect(text).toContain("first");
    expect(text).toContain("last");
    expect(c.isClosed()).toBe(false);
  });

  it("an upgraded connection and a CONNECT tunnel past both timeouts still carry bytes", async () => {
    const l = await listen({
      headerTimeoutMs: 200,
      idleTimeoutMs: 400,
      setup: (s) => {
        const echo = (_req: http.IncomingMessage, socket: net.Socket): void => {
          cleanups.push(() => void socket.destroy());
          socket.write("HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n");
          socket.on("data", (b: Buffer) => socket.write(b));
        };
        s.on("upgrade", echo);
        s.on("connect", echo);
      },
    });
    const up = await connect(l.port);
    up.socket.write(GET("/", "Upgrade: echo\r\nConnection: Upgrade\r\n"));
    const tunnel = await connect(l.port);
    tunnel.socket.write("CONNECT example.test:443 HTTP/1.1\r\nHost: example.test:443\r\n\r\n");
    await eventually(() => (up.data().includes("101") && tunnel.data().includes("101") ? true : undefined));
    await bothTimeoutsPassed(l);
    up.socket.write("ping-up");
    tunnel.socket.write("ping-tunnel");
    await eventually(() => (up.data().endsWith("ping-up") && tunnel.data().endsWith("ping-tunnel") ? true : undefined));
    expect(l.bounds.stats().closed).toMatchObject({ header_timeout: 1, idle: 1 });
  });

  it("a 100-continue request answered by the server's checkContinue handler is not cut", async () => {
    let held: (() => void) | undefined;
    const l = await listen({
      headerTimeoutMs: 200,
      setup: (s) =>
        s.on("checkContinue", (req: http.IncomingMessage, res: http.ServerResponse) => {
          held = () => {
            res.writeContinue();
            let n = 0;
            req.on("data", (b: Buffer) => (n += b.length));
            req.on("end", () => res.end(`continued ${n}`));
          };
        }),
    });
    const c = await connect(l.port);
    c.socket.write("POST /x HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n");
    await eventually(() => held);
    const witness = await connect(l.port);
    await witness.closed;
    held!();
    await eventually(() => (c.data().includes("100 Continue") ? true : undefined));
    c.socket.write("hello");
    expect(await eventually(() => (c.data().includes("continued 5") ? true : undefined))).toBe(true);
    expect(c.isClosed()).toBe(false);
  });

  it("changes nothing node does without a listener: an Upgrade is an ordinary request, a CONNECT is dropped", async () => {
    const l = await listen({ headerTimeoutMs: 2000 });
    const up = await connect(l.port);
    up.socket.write(GET("/", "Upgrade: echo\r\nConnection: Upgrade\r\n"));
    expect(await response(up)).toMatch(/^HTTP\/1\.1 200[^]*ok$/);
    const tunnel = await connect(l.port);
    tunnel.socket.write("CONNECT example.test:443 HTTP/1.1\r\nHost: example.test:443\r\n\r\n");
    expect(await tunnel.closed).toBe("closed");
    expect(l.bounds.stats().closed.header_timeout).toBe(0);
  });
});

describe("caps", () => {
  it("a full unauthenticated pool evicts its oldest connection, in order of age; an authenticated one is never evicted", async () => {
    const l = await listen({ headerTimeoutMs: 60_000, maxUnauthenticated: 3 });
    const member = await connect(l.port);
    member.socket.write(GET("/", `Authorization: ${TOKEN}\r\n`));
    await response(member);
    const a = await connect(l.port);
    await accepted(l, 2);
    const b = await connect(l.port);
    await accepted(l, 3);
    const c = await connect(l.port);
    await accepted(l, 4);
    expect(l.bounds.stats().open).toEqual({ unauthenticated: 3, authenticated: 1 });
    const d = await connect(l.port);
    expect(await a.closed).toBe("closed");
    expect(b.isClosed() || c.isClosed() || d.isClosed()).toBe(false);
    await connect(l.port);
    expect(await b.closed).toBe("closed");
    expect(c.isClosed() || d.isClosed() || member.isClosed()).toBe(false);
    expect(l.bounds.stats().closed.evicted).toBe(2);
    expect(l.bounds.stats().open).toEqual({ unauthenticated: 3, authenticated: 1 });
  });

  it("a client that authenticates gets in while slow connections fill the unauthenticated pool", async () => {
    const l = await listen({ headerTimeoutMs: 60_000, maxUnauthenticated: 4 });
    const flood = await Promise.all(Array.from({ length: 20 }, () => connect(l.port)));
    for (const f of flood) drip(f, "GET / HTTP/1.1\r\nHost: x\r\nX-Slow: " + "a".repeat(10_000), 100);
    const c = await connect(l.port);
    c.socket.write(GET("/", `Authorization: ${TOKEN}\r\n`));
    expect(await response(c)).toMatch(/^HTTP\/1\.1 200/);
    expect(l.bounds.stats().open.authenticated).toBe(1);
    expect(l.bounds.stats().open.unauthenticated).toBeLessThanOrEqual(4);
  });

  it("a full authenticated pool answers the newly authenticated connection 503 with the reason, and counts it", async () => {
    const l = await listen({ headerTimeoutMs: 60_000, maxAuthenticated: 1 });
    const first = await connect(l.port);
    first.socket.write(GET("/", `Authorization: ${TOKEN}\r\n`));
    expect(await response(first)).toMatch(/^HTTP\/1\.1 200/);
    const second = await connect(l.port);
    second.socket.write(GET("/", `Authorization: ${TOKEN}\r\n`));
    expect(await response(second)).toMatch(/^HTTP\/1\.1 503[^]*holds its 1 authenticated connections \(connections_full\)/);
    expect(await second.closed).toBe("closed");
    expect(l.bounds.stats().closed.refused_full).toBe(1);
    expect(l.closes.map((x) => x.reason)).toEqual(["refused_full"]);
    // A slot freed is a slot taken.
    first.socket.destroy();
    await eventually(() => (l.bounds.stats().open.authenticated === 0 ? true : undefined));
    const third = await connect(l.port);
    third.socket.write(GET("/", `Authorization: ${TOKEN}\r\n`));
    expect(await response(third)).toMatch(/^HTTP\/1\.1 200/);
  });

  it("a connection that closed before its token check ended takes no slot", async () => {
    const l = await listen({ headerTimeoutMs: 60_000, maxAuthenticated: 1 });
    const c = await connect(l.port);
    c.socket.write(GET("/late"));
    await eventually(() => (l.bounds.stats().open.unauthenticated === 1 ? true : undefined));
    c.socket.destroy();
    await eventually(() => (l.lateResults.length === 1 ? true : undefined));
    expect(l.bounds.stats().open).toEqual({ unauthenticated: 0, authenticated: 0 });
    const next = await connect(l.port);
    next.socket.write(GET("/", `Authorization: ${TOKEN}\r\n`));
    expect(await response(next)).toMatch(/^HTTP\/1\.1 200/);
  });

  it("refuse: past the cap a new connection is reset at once and reported; those held stay open", async () => {
    const l = await listen({ headerTimeoutMs: 60_000, maxUnauthenticated: 2, whenFull: "refuse" });
    const a = await connect(l.port);
    const b = await connect(l.port);
    await accepted(l, 2);
    const c = watch(net.connect(l.port, "127.0.0.1"));
    expect(await c.closed).toBe("reset");
    expect(a.isClosed() || b.isClosed()).toBe(false);
    expect(l.closes).toEqual([{ reason: "refused_full", connection: { localAddress: "127.0.0.1", localPort: l.port, remoteAddress: "127.0.0.1" } }]);
    expect(l.bounds.stats()).toMatchObject({ accepted: 3, open: { unauthenticated: 2, authenticated: 0 }, closed: { refused_full: 1, evicted: 0 } });
    a.socket.write(GET());
    expect(await response(a)).toMatch(/^HTTP\/1\.1 200/);
  });
});
