// FAKE Docker Engine API for unit tests: a node:http server on a Unix socket in a temp
// dir, scriptable per route, so the client's failure handling can be driven exactly
// (socket cuts, partial bodies, stalls) without a daemon. Not a model of dockerd's logic.
import { mkdtemp, rm } from "node:fs/promises";
import { linkSync } from "node:fs";
import { createServer } from "node:http";
import type { IncomingHttpHeaders, IncomingMessage, Server, ServerResponse } from "node:http";
import { createServer as createNetServer } from "node:net";
import type { Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Duplex } from "node:stream";

export interface RecordedRequest {
  method: string;
  /** Path without the /vX.Y prefix and without the query. */
  path: string;
  /** "1.41" for /v1.41/..., undefined for unversioned paths such as /_ping. */
  version: string | undefined;
  query: URLSearchParams;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

export interface HandlerContext {
  req: RecordedRequest;
  /** Destroys the connection and records when (for "cut observed within 1 s" checks). */
  cut(): void;
}

export type Handler = (res: ServerResponse, ctx: HandlerContext) => void;
export type UpgradeHandler = (socket: Duplex, ctx: HandlerContext & { extra: Buffer }) => void;

interface Route<H> {
  method: string;
  path: string | RegExp;
  handler: H;
}

const VERSION_PREFIX = /^\/v(\d+\.\d+)(\/.*)$/;

function parseUrl(method: string, url: string, headers: IncomingHttpHeaders, body: Buffer): RecordedRequest {
  const u = new URL(url, "http://fake");
  // Decoded as dockerd's router sees it (Go decodes %2F, %3A...).
  const m = VERSION_PREFIX.exec(decodeURIComponent(u.pathname));
  return { method, path: m ? m[2]! : decodeURIComponent(u.pathname), version: m ? m[1] : undefined, query: u.searchParams, headers, body };
}

export class FakeEngine {
  readonly requests: RecordedRequest[] = [];
  /** Times (Date.now()) at which a handler cut a connection. */
  readonly cuts: number[] = [];
  /** Sent as the API-Version header of /_ping; undefined sends none. */
  apiVersion: string | undefined;
  private readonly routes: Route<Handler>[] = [];
  private readonly upgrades: Route<UpgradeHandler>[] = [];
  private readonly sockets = new Set<Socket>();

  private constructor(
    readonly dir: string,
    readonly socketPath: string,
    private readonly server: Server,
    apiVersion: string | undefined,
  ) {
    this.apiVersion = apiVersion;
  }

  static async start(opts: { apiVersion?: string | undefined } = {}): Promise<FakeEngine> {
    const dir = await mkdtemp(join(tmpdir(), "fake-engine-"));
    const socketPath = join(dir, "docker.sock");
    const server = createServer();
    const engine = new FakeEngine(dir, socketPath, server, "apiVersion" in opts ? opts.apiVersion : "1.41");
    server.on("connection", (s: Socket) => {
      engine.sockets.add(s);
      s.on("close", () => engine.sockets.delete(s));
    });
    server.on("request", (req: IncomingMessage, res: ServerResponse) => engine.handleRequest(req, res));
    server.on("upgrade", (req: IncomingMessage, socket: Duplex, head: Buffer) => engine.handleUpgrade(req, socket, head));
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(socketPath, () => resolve());
    });
    return engine;
  }

  /** Handles method + path (unversioned; a string matches exactly). Later routes win. */
  on(method: string, path: string | RegExp, handler: Handler): this {
    this.routes.unshift({ method, path, handler });
    return this;
  }

  onUpgrade(method: string, path: string | RegExp, handler: UpgradeHandler): this {
    this.upgrades.unshift({ method, path, handler });
    return this;
  }

  /** Connections currently open to the fake (client keep-alive sockets included). */
  get openConnections(): number {
    return this.sockets.size;
  }

  /** Requests for a path (unversioned), in arrival order. */
  requestsTo(path: string): RecordedRequest[] {
    return this.requests.filter((r) => r.path === path);
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
    await rm(this.dir, { recursive: true, force: true });
  }

  private match<H>(routes: Route<H>[], req: RecordedRequest): H | undefined {
    return routes.find(
      (r) => r.method === req.method && (typeof r.path === "string" ? r.path === req.path : r.path.test(req.path)),
    )?.handler;
  }

  private handleRequest(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const rec = parseUrl(req.method ?? "GET", req.url ?? "/", req.headers, Buffer.concat(chunks));
      this.requests.push(rec);
      const ctx: HandlerContext = {
        req: rec,
        cut: () => {
          this.cuts.push(Date.now());
          req.socket.destroy();
        },
      };
      const handler = this.match(this.routes, rec);
      if (handler) handler(res, ctx);
      else if (rec.method === "GET" && rec.path === "/_ping") this.ping(res);
      else reply.json(404, { message: `page not found: ${rec.method} ${rec.path}` })(res, ctx);
    });
  }

  private ping(res: ServerResponse): void {
    const headers: Record<string, string> = { "Content-Type": "text/plain; charset=utf-8" };
    if (this.apiVersion !== undefined) headers["API-Version"] = this.apiVersion;
    res.writeHead(200, headers).end("OK");
  }

  /** An upgrade request's body (Content-Length bytes) may be split between head and later data. */
  private handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    const need = Number(req.headers["content-length"] ?? 0);
    let got = head;
    const proceed = (): void => {
      socket.off("data", onData);
      const rec = parseUrl(req.method ?? "GET", req.url ?? "/", req.headers, got.subarray(0, need));
      this.requests.push(rec);
      const ctx = {
        req: rec,
        extra: got.subarray(need),
        cut: () => {
          this.cuts.push(Date.now());
          socket.destroy();
        },
      };
      const handler = this.match(this.upgrades, rec);
      if (handler) handler(socket, ctx);
      else {
        const body = JSON.stringify({ message: `no upgrade route: ${rec.method} ${rec.path}` });
        socket.end(`HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
      }
    };
    const onData = (c: Buffer): void => {
      got = Buffer.concat([got, c]);
      if (got.length >= need) proceed();
    };
    if (got.length >= need) proceed();
    else socket.on("data", onData);
  }
}

/** Scripted behaviours for FakeEngine routes. */
/** The head dockerd answers an exec or attach upgrade with: the raw stream follows. */
export const UPGRADED = "HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.raw-stream\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n";

export const reply = {
  json(status: number, body: unknown): Handler {
    return (res) => {
      const text = JSON.stringify(body);
      res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text) }).end(text);
    };
  },
  /** Docker's error shape. */
  error(status: number, message: string): Handler {
    return reply.json(status, { message });
  },
  text(status: number, text: string): Handler {
    return (res) => res.writeHead(status, { "Content-Type": "text/plain" }).end(text);
  },
  /** Status with an empty body (Content-Length: 0). */
  empty(status = 200): Handler {
    return (res) => res.writeHead(status, { "Content-Length": 0 }).end();
  },
  /** Flushes the headers, then cuts the socket after `afterMs`. */
  headersThenDestroy(afterMs = 50): Handler {
    return (res, ctx) => {
      res.writeHead(200, { "Content-Type": "application/json" });
      res.flushHeaders();
      setTimeout(() => ctx.cut(), afterMs);
    };
  },
  /** Writes `text` as a chunked body, then cuts the socket (no terminating chunk). */
  partialThenDestroy(text: string, afterMs = 50): Handler {
    return (res, ctx) => {
      res.writeHead(200, { "Content-Type": "application/json" });
      res.write(text);
      setTimeout(() => ctx.cut(), afterMs);
    };
  },
  /** Writes `text` as a complete chunked body (a clean end), e.g. partial JSON or plain text. */
  chunkedThenEnd(text: string): Handler {
    return (res) => {
      res.writeHead(200, { "Content-Type": "application/json" });
      res.end(text);
    };
  },
  /** Accepts the request and never answers. */
  stall(): Handler {
    return () => undefined;
  },
  /** Flushes 200 headers and then never sends a byte (a long-poll waiting for its event). */
  stallAfterHeaders(): Handler {
    return (res) => {
      res.writeHead(200, { "Content-Type": "application/json" });
      res.flushHeaders();
    };
  },
  /** Writes each part as its own write, `gapMs` apart, then ends cleanly or cuts the socket. */
  chunks(parts: (string | Buffer)[], then: "end" | "destroy" | "stall", gapMs = 10): Handler {
    return (res, ctx) => {
      res.writeHead(200, { "Content-Type": "application/json" });
      res.flushHeaders();
      let i = 0;
      const next = (): void => {
        if (res.destroyed) return;
        if (i < parts.length) {
          res.write(parts[i++]);
          setTimeout(next, gapMs);
        } else if (then === "end") res.end();
        else if (then === "destroy") ctx.cut();
      };
      setTimeout(next, gapMs);
    };
  },
};

/** A socket file with nothing listening on it (as a SIGKILLed dockerd leaves): connect gives ECONNREFUSED. */
export async function staleSocket(dir: string): Promise<string> {
  const live = join(dir, "live.sock");
  const stale = join(dir, "stale.sock");
  const server = createNetServer();
  await new Promise<void>((resolve) => server.listen(live, () => resolve()));
  // close() unlinks the path it listened on; a second hard link to the socket inode stays behind.
  linkSync(live, stale);
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return stale;
}
