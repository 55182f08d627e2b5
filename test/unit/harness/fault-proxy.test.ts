// FaultProxy against a fake upstream: a node:http server on a Unix socket standing in
// for dockerd (the real-daemon check is test/integration/fault-proxy.real.test.ts).
import { mkdtempSync, rmSync } from "node:fs";
import { Agent, createServer, request } from "node:http";
import type { IncomingHttpHeaders, Server, ServerResponse } from "node:http";
import { join } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import fc from "fast-check";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FaultProxy, RequestTracker } from "../../support/fault-proxy.js";

/** Fake dockerd: a few routes shaped like the Engine API's, and a log of what reached it. */
class FakeUpstream {
  readonly dir = mkdtempSync("/tmp/sg-fpu-");
  readonly socketPath = join(this.dir, "up.sock");
  readonly seen: string[] = [];
  connections = 0;
  /** Held long-poll responses, by path. */
  readonly held = new Map<string, ServerResponse[]>();
  /** Held responses whose request went away (the proxy dropped the upstream socket). */
  upstreamClosed = 0;
  readonly #server: Server;

  constructor() {
    this.#server = createServer((req, res) => {
      this.seen.push(`${req.method ?? "?"} ${req.url ?? "?"}`);
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => this.#route(req.method ?? "", req.url ?? "", Buffer.concat(chunks), res));
    });
    this.#server.on("connection", () => this.connections++);
  }

  #route(method: string, url: string, body: Buffer, res: ServerResponse): void {
    if (url === "/_ping") {
      res.writeHead(200, { "Content-Type": "text/plain" }).end("OK");
    } else if (method === "POST" && url.startsWith("/echo")) {
      res.writeHead(200, { "Content-Type": "application/octet-stream" }).end(body);
    } else if (url === "/slow") {
      res.writeHead(200, { "Content-Type": "text/plain", "Content-Length": "5" }).end("hello");
    } else if (url.startsWith("/events") || url.endsWith("/wait")) {
      // Long-poll: headers now (as dockerd flushes them), then nothing until told.
      res.writeHead(200, { "Content-Type": "application/json" });
      res.flushHeaders();
      if (url.startsWith("/events")) res.write('{"status":"start"}\n');
      const list = this.held.get(url) ?? [];
      list.push(res);
      this.held.set(url, list);
      res.on("close", () => {
        if (!res.writableEnded) this.upstreamClosed++;
      });
    } else {
      res.writeHead(404, { "Content-Type": "application/json" }).end('{"message":"page not found"}\n');
    }
  }

  listen(): Promise<void> {
    return new Promise((resolve) => this.#server.listen(this.socketPath, resolve));
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
    rmSync(this.dir, { recursive: true, force: true });
  }
}

interface Reply {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

function call(
  socketPath: string,
  path: string,
  opts: { method?: string; body?: string | Buffer; agent?: Agent; timeoutMs?: number } = {},
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, path, method: opts.method ?? "GET", agent: opts.agent ?? false }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (body += c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      res.on("error", reject);
    });
    if (opts.timeoutMs !== undefined) req.setTimeout(opts.timeoutMs, () => req.destroy(new Error("client timeout")));
    req.on("error", reject);
    req.end(opts.body);
  });
}

/** A streaming GET: resolves `open` with the headers, then records body and the first error. */
function stream(socketPath: string, path: string) {
  const s = {
    status: 0,
    body: "",
    error: undefined as Error | undefined,
    ended: false,
    open: undefined as unknown as Promise<void>,
    settled: undefined as unknown as Promise<void>,
    destroy: () => req.destroy(),
  };
  let settle: () => void = () => undefined;
  s.settled = new Promise<void>((r) => (settle = r));
  const fail = (err: Error): void => {
    s.error ??= err;
    settle();
  };
  const req = request({ socketPath, path, agent: false });
  s.open = new Promise<void>((resolve, reject) => {
    req.on("response", (res) => {
      s.status = res.statusCode ?? 0;
      res.setEncoding("utf8");
      res.on("data", (c: string) => (s.body += c));
      res.on("end", () => {
        s.ended = true;
        settle();
      });
      res.on("error", fail);
      resolve();
    });
    req.on("error", (err) => {
      fail(err);
      reject(err);
    });
  });
  s.open.catch(() => undefined);
  req.end();
  return s;
}

/** Polls `cond`; `ms` only catches a hang. */
async function until(cond: () => boolean, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await delay(10);
  }
}

function errorCode(err: unknown): string | undefined {
  return (err as { code?: string } | undefined)?.code;
}

let fake: FakeUpstream;
let proxy: FaultProxy;

beforeEach(async () => {
  fake = new FakeUpstream();
  await fake.listen();
  proxy = await FaultProxy.start({ upstreamSocket: fake.socketPath });
});

afterEach(async () => {
  await proxy.close();
  await fake.close();
});

describe("FaultProxy pass-through", () => {
  it("forwards a request and its response unchanged", async () => {
    const r = await call(proxy.socketPath, "/echo", { method: "POST", body: "payload-123" });
    expect(r.status).toBe(200);
    expect(r.body).toBe("payload-123");
    expect(fake.seen).toEqual(["POST /echo"]);
    const ping = await call(proxy.socketPath, "/_ping");
    expect(ping).toMatchObject({ status: 200, body: "OK" });
  });

  it("carries several requests on one keep-alive connection and tracks the latest request line", async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      expect((await call(proxy.socketPath, "/_ping", { agent })).body).toBe("OK");
      expect((await call(proxy.socketPath, "/echo?n=2", { agent, method: "POST", body: "two" })).body).toBe("two");
      expect(fake.connections).toBe(1);
      expect(proxy.stats()).toMatchObject({ accepted: 1, open: 1 });
      expect(proxy.openRequests()).toEqual(["POST /echo?n=2 HTTP/1.1"]);
    } finally {
      agent.destroy();
    }
  });

  it("streams a large body both ways", async () => {
    const big = Buffer.alloc(4 * 1024 * 1024, "x").toString();
    const r = await call(proxy.socketPath, "/echo", { method: "POST", body: big });
    expect(r.body.length).toBe(big.length);
  });

  it("resets the client when the upstream socket is missing (daemon gone)", async () => {
    const orphan = await FaultProxy.start({ upstreamSocket: join(fake.dir, "missing.sock") });
    try {
      const err = await call(orphan.socketPath, "/_ping").then(() => undefined, (e: unknown) => e);
      expect(errorCode(err)).toBe("ECONNRESET");
      await until(() => orphan.stats().open === 0);
    } finally {
      await orphan.close();
    }
  });
});

describe("FaultProxy cut", () => {
  it("cuts only the matching long-poll; the client sees an error within 100 ms and the other stream lives on", async () => {
    const events = stream(proxy.socketPath, "/events?since=1");
    const wait = stream(proxy.socketPath, "/containers/abc/wait");
    await Promise.all([events.open, wait.open]);
    await until(() => events.body.includes("start"));
    expect(proxy.openRequests().sort()).toEqual(["GET /containers/abc/wait HTTP/1.1", "GET /events?since=1 HTTP/1.1"]);

    expect(events.error).toBeUndefined();
    expect(proxy.cut(/\/events/)).toBe(1);
    expect(proxy.stats()).toMatchObject({ open: 1, cut: 1 });
    expect(proxy.openRequests()).toEqual(["GET /containers/abc/wait HTTP/1.1"]);
    // The cut is the only thing that can end it: no timeout, and the fake never answers.
    await until(() => events.error !== undefined);
    await events.settled;
    expect(events.ended).toBe(false);

    // The wait stream still works end to end.
    await until(() => fake.held.get("/containers/abc/wait")?.length === 1);
    fake.held.get("/containers/abc/wait")![0]!.end('{"StatusCode":0}\n');
    await wait.settled;
    expect(wait.error).toBeUndefined();
    expect(wait.body).toBe('{"StatusCode":0}\n');
    await until(() => fake.upstreamClosed === 1); // the cut events request, not the finished wait
  });

  it("cutAll cuts every open connection and returns the count", async () => {
    const a = stream(proxy.socketPath, "/events");
    const b = stream(proxy.socketPath, "/containers/x/wait");
    await Promise.all([a.open, b.open]);
    expect(proxy.cutAll()).toBe(2);
    await Promise.all([a.settled, b.settled]);
    expect(a.error).toBeDefined();
    expect(b.error).toBeDefined();
    expect(proxy.stats()).toMatchObject({ accepted: 2, open: 0, cut: 2 });
    expect(proxy.cutAll()).toBe(0);
  });

  it("matches a long-poll that reused a keep-alive connection", async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      await call(proxy.socketPath, "/_ping", { agent });
      const errored = new Promise<unknown>((resolve) => {
        const req = request({ socketPath: proxy.socketPath, path: "/events", agent }, (res) => {
          res.on("error", resolve);
          res.resume();
        });
        req.on("error", resolve);
        req.end();
      });
      await until(() => fake.held.get("/events")?.length === 1);
      expect(proxy.stats().accepted).toBe(1);
      expect(proxy.cut(/\/events/)).toBe(1);
      expect(await errored).toBeInstanceOf(Error);
    } finally {
      agent.destroy();
    }
  });
});

describe("FaultProxy refuse / stall / fail", () => {
  it("refuse: new connections are reset, then pass again when off", async () => {
    proxy.refuse(true);
    const err = await call(proxy.socketPath, "/_ping").then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(Error);
    expect(["ECONNRESET", "EPIPE"]).toContain(errorCode(err));
    expect(fake.connections).toBe(0);
    expect(proxy.stats()).toMatchObject({ accepted: 1, refused: 1, open: 0 });
    proxy.refuse(false);
    expect((await call(proxy.socketPath, "/_ping")).body).toBe("OK");
  });

  it("stall: the request times out on the client; stall(false) destroys it and new requests pass", async () => {
    proxy.stall(true);
    // Our own timeout ended it (not an error or an answer), and it never went upstream:
    // even after a later request got through, that one is all the fake saw (below).
    const err = await call(proxy.socketPath, "/_ping", { timeoutMs: 300 }).then(() => undefined, (e: unknown) => e);
    expect((err as Error).message).toBe("client timeout");
    expect(fake.seen).toEqual([]);

    // A stalled connection the client keeps open is visible, then torn down by stall(false).
    const hung = stream(proxy.socketPath, "/containers/x/wait");
    await until(() => proxy.openRequests().includes("GET /containers/x/wait HTTP/1.1"));
    proxy.stall(false);
    await hung.settled;
    expect(hung.error).toBeDefined();
    expect(proxy.stats().open).toBe(0);
    expect((await call(proxy.socketPath, "/_ping")).body).toBe("OK");
    expect(fake.seen).toEqual(["GET /_ping"]);
  });

  it("stall also holds a new request on an already open keep-alive connection", async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      await call(proxy.socketPath, "/_ping", { agent });
      proxy.stall(true);
      const err = await call(proxy.socketPath, "/_ping", { agent, timeoutMs: 300 }).then(() => undefined, (e: unknown) => e);
      expect((err as Error).message).toBe("client timeout");
      expect(fake.seen).toEqual(["GET /_ping"]);
      expect(proxy.stats().accepted).toBe(1);
    } finally {
      agent.destroy();
      proxy.stall(false);
    }
    // A later request gets through, and the held one never did.
    expect((await call(proxy.socketPath, "/_ping")).body).toBe("OK");
    expect(fake.seen).toEqual(["GET /_ping", "GET /_ping"]);
  });

  it("fail(500): answers a Docker-style JSON error without forwarding, on new and open connections", async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      await call(proxy.socketPath, "/_ping", { agent });
      proxy.fail(500);
      const onOpen = await call(proxy.socketPath, "/_ping", { agent });
      const onNew = await call(proxy.socketPath, "/containers/json");
      for (const r of [onOpen, onNew]) {
        expect(r.status).toBe(500);
        expect(r.headers["content-type"]).toBe("application/json");
        expect(JSON.parse(r.body)).toEqual({ message: expect.stringContaining("500") as unknown });
      }
      // A request with a body still gets the answer (the proxy drains what it does not forward).
      const post = await call(proxy.socketPath, "/echo", { method: "POST", body: Buffer.alloc(1024 * 1024, "y") });
      expect(post.status).toBe(500);
      expect(fake.seen).toEqual(["GET /_ping"]);
      expect(proxy.stats().failed).toBe(3);

      proxy.fail(503);
      expect((await call(proxy.socketPath, "/_ping")).status).toBe(503);
      proxy.fail(null);
      expect(await call(proxy.socketPath, "/_ping")).toMatchObject({ status: 200, body: "OK" });
    } finally {
      agent.destroy();
    }
  });
});

describe("FaultProxy truncateNext", () => {
  it("after-headers: the client gets the headers, then a clean close before the body; only the next match", async () => {
    proxy.truncateNext(/\/slow/, "after-headers");
    const s = stream(proxy.socketPath, "/slow");
    await s.open;
    expect(s.status).toBe(200);
    await s.settled;
    expect(s.body).toBe("");
    expect(s.ended).toBe(false);
    expect(s.error).toBeDefined(); // premature close of a Content-Length body
    expect(fake.seen).toEqual(["GET /slow"]); // it was forwarded
    expect(proxy.stats().truncated).toBe(1);

    // The rule is used up: the next one passes whole.
    expect((await call(proxy.socketPath, "/slow")).body).toBe("hello");
  });

  it("count: truncates the next N matches and lets others through", async () => {
    proxy.truncateNext(/\/slow/, "after-headers", 2);
    const results = [];
    for (const path of ["/slow", "/_ping", "/slow", "/slow"]) {
      results.push(await call(proxy.socketPath, path).then((r) => r.body, () => "error"));
    }
    expect(results).toEqual(["error", "OK", "error", "hello"]);
  });

  it("inject: writes the given bytes after the headers, then FIN (a chunked long-poll cut mid-stream)", async () => {
    proxy.truncateNext(/\/events/, { inject: '9\r\n{"id":1}\n\r\n' });
    const s = stream(proxy.socketPath, "/events");
    await s.open;
    await s.settled;
    expect(s.body).toBe('{"id":1}\n'); // not the fake's own {"status":"start"}
    expect(s.error).toBeDefined();
    await until(() => fake.upstreamClosed === 1); // the upstream request was dropped too
  });

  it("inject on a Content-Length response: a short body then EOF", async () => {
    proxy.truncateNext(/\/slow/, { inject: "he" });
    const s = stream(proxy.socketPath, "/slow");
    await s.settled;
    expect(s.status).toBe(200);
    expect(s.body).toBe("he");
    expect(s.error).toBeDefined();
  });
});

describe("FaultProxy bookkeeping", () => {
  it("stats() and openRequests() follow connections as they open and close", async () => {
    expect(proxy.stats()).toEqual({ accepted: 0, open: 0, cut: 0, refused: 0, failed: 0, truncated: 0 });
    await call(proxy.socketPath, "/_ping");
    await until(() => proxy.stats().open === 0);
    const a = stream(proxy.socketPath, "/events");
    const b = stream(proxy.socketPath, "/events?filters=x");
    const c = stream(proxy.socketPath, "/containers/1/wait");
    await Promise.all([a.open, b.open, c.open]);
    expect(proxy.stats()).toMatchObject({ accepted: 4, open: 3, cut: 0 });
    expect(proxy.openRequests().filter((l) => l.includes("/events"))).toHaveLength(2);
    expect(proxy.cut(/\/events/)).toBe(2);
    expect(proxy.stats()).toMatchObject({ accepted: 4, open: 1, cut: 2 });
    c.destroy(); // a client going away is noticed too
    await until(() => proxy.stats().open === 0);
    expect(proxy.openRequests()).toEqual([]);
  });

  it("close() destroys open connections and leaves no handles behind", async () => {
    const pipes = (): number => process.getActiveResourcesInfo().filter((r) => r.startsWith("Pipe")).length;
    const timers = (): number => process.getActiveResourcesInfo().filter((r) => r === "Timeout").length;
    // Baseline once sockets of earlier tests have finished closing (the fake's and the
    // per-test proxy's listeners, vitest's own pipes).
    let last = -1;
    await until(() => {
      const now = pipes();
      const stable = now === last;
      last = now;
      return stable;
    });
    const before = { pipes: pipes(), timers: timers() };
    const p2 = await FaultProxy.start({ upstreamSocket: fake.socketPath });
    const s = stream(p2.socketPath, "/events");
    await s.open;
    await call(p2.socketPath, "/_ping");
    p2.stall(true);
    const hung = stream(p2.socketPath, "/_ping");
    await until(() => p2.stats().open === 2);
    expect(pipes()).toBeGreaterThan(before.pipes);

    await p2.close();
    await Promise.all([s.settled, hung.settled]);
    expect(s.error).toBeDefined();
    expect(hung.error).toBeDefined();
    await until(() => pipes() === before.pipes);
    expect(timers()).toBeLessThanOrEqual(before.timers);
    // The socket file and temp dir are gone; a new connection fails.
    const err = await call(p2.socketPath, "/_ping").then(() => undefined, (e: unknown) => e);
    expect(errorCode(err)).toBe("ENOENT");
  });
});

describe("RequestTracker", () => {
  const decode = (segs: ReturnType<RequestTracker["push"]>): { lines: string[]; bytes: Buffer[] } => ({
    lines: segs.flatMap((s) => (s.kind === "request" ? [s.line] : [])),
    bytes: segs.flatMap((s) => (s.kind === "bytes" ? [s.data] : [])),
  });

  it("sees every request line in keep-alive traffic split anywhere, and passes every byte through", () => {
    const request = fc.oneof(
      fc.record({ kind: fc.constant("get" as const), path: fc.stringMatching(/^\/[a-z0-9/?=&]{0,20}$/) }),
      fc.record({ kind: fc.constant("length" as const), path: fc.constant("/echo"), body: fc.uint8Array({ maxLength: 300 }) }),
      fc.record({
        kind: fc.constant("chunked" as const),
        path: fc.constant("/images/load"),
        chunks: fc.array(fc.uint8Array({ minLength: 1, maxLength: 100 }), { maxLength: 5 }),
        trailer: fc.boolean(),
      }),
    );
    fc.assert(
      fc.property(fc.array(request, { minLength: 1, maxLength: 6 }), fc.array(fc.nat(), { maxLength: 10 }), (reqs, cuts) => {
        const parts: Buffer[] = [];
        const expected: string[] = [];
        for (const r of reqs) {
          const method = r.kind === "get" ? "GET" : "POST";
          expected.push(`${method} ${r.path} HTTP/1.1`);
          if (r.kind === "get") parts.push(Buffer.from(`GET ${r.path} HTTP/1.1\r\nHost: docker\r\n\r\n`));
          else if (r.kind === "length") {
            parts.push(Buffer.from(`POST ${r.path} HTTP/1.1\r\nHost: docker\r\nContent-Length: ${r.body.length}\r\n\r\n`), Buffer.from(r.body));
          } else {
            parts.push(Buffer.from(`POST ${r.path} HTTP/1.1\r\nHost: docker\r\nTransfer-Encoding: chunked\r\n\r\n`));
            for (const c of r.chunks) parts.push(Buffer.from(`${c.length.toString(16)};ext=1\r\n`), Buffer.from(c), Buffer.from("\r\n"));
            parts.push(Buffer.from(r.trailer ? "0\r\nX-Trailer: 1\r\n\r\n" : "0\r\n\r\n"));
          }
        }
        const all = Buffer.concat(parts);
        const points = [...new Set(cuts.map((c) => c % (all.length + 1)))].sort((a, b) => a - b);
        const tracker = new RequestTracker();
        const lines: string[] = [];
        const bytes: Buffer[] = [];
        let prev = 0;
        for (const p of [...points, all.length]) {
          const d = decode(tracker.push(all.subarray(prev, p)));
          lines.push(...d.lines);
          bytes.push(...d.bytes);
          prev = p;
        }
        expect(lines).toEqual(expected);
        expect(Buffer.concat(bytes).equals(all)).toBe(true);
      }),
      { numRuns: 300 },
    );
  });

  it("emits a request line before any of its bytes, and holds nothing once it sees a non-HTTP stream", () => {
    const t = new RequestTracker();
    expect(t.push(Buffer.from("GET /ev"))).toEqual([]); // held: may still become a request line
    const segs = t.push(Buffer.from("ents HTTP/1.1\r\n\r\n"));
    expect(segs[0]).toEqual({ kind: "request", line: "GET /events HTTP/1.1" });
    expect(Buffer.concat(decode(segs).bytes).toString()).toBe("GET /events HTTP/1.1\r\n\r\n");

    const raw = new RequestTracker();
    expect(Buffer.concat(decode(raw.push(Buffer.from("ls -l\n"))).bytes).toString()).toBe("ls -l\n");
    expect(decode(raw.push(Buffer.from("GET / HTTP/1.1\r\n\r\n"))).lines).toEqual([]); // raw stays raw

    const upgraded = new RequestTracker();
    const u = decode(upgraded.push(Buffer.from("POST /exec/1/start HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\nGET / HTTP/1.1\r\n\r\n")));
    expect(u.lines).toEqual(["POST /exec/1/start HTTP/1.1"]); // after the upgrade: raw stdin, not requests
  });
});
