// The egress proxy against real loopback servers: an origin node:http server, a TCP
// echo server for CONNECT, a FAKE resolver where DNS answers must be scripted, and a second
// listener of the test's own (a TEST reader of origin-form requests) joining the proxy.
import http from "node:http";
import net from "node:net";
import { createHash, randomBytes } from "node:crypto";
import type { AddressInfo } from "node:net";
import { eventually } from "../../support/gateway-fixture.js";
import { afterEach, describe, expect, it } from "vitest";
import { policyFromObject } from "../../../src/policy/index.js";
import type { Policy } from "../../../src/policy/index.js";
import { PolicyHolder } from "../../../src/supervisor/policy-holder.js";
import { createEgressProxy } from "../../../src/supervisor/proxy/index.js";
import type { AuditEvent, EgressProxy, HttpTarget, Resolver, TargetReader } from "../../../src/supervisor/proxy/index.js";
import { createHealthServer } from "../../../src/supervisor/health.js";
import type { HealthServer } from "../../../src/supervisor/health.js";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { getOverUnix } from "../../support/net.js";
import { silentLogger } from "../../../src/supervisor/logger.js";
import { listenOn } from "../../support/net.js";
import { sameDecision, secondListener } from "../../support/proxy-client.js";

const LOOPBACK = ["127.0.0.0/8"];
const cleanups: (() => Promise<void>)[] = [];

afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function policyOf(network: unknown): Policy {
  const r = policyFromObject({ version: 1, network });
  if (!r.ok) throw new Error(`test policy invalid: ${r.errors.join("; ")}`);
  return r.policy;
}

/** One rule "test" with the given endpoints. */
function allowing(...endpoints: object[]): Policy {
  return policyOf({ rules: [{ name: "test", endpoints }] });
}

/** FAKE resolver: scripted answers per name, records every call. */
function fakeResolver(answers: Record<string, string[] | Error | "hang">): { resolve: Resolver; calls: string[] } {
  const calls: string[] = [];
  const resolve: Resolver = (host) => {
    calls.push(host);
    const a = answers[host];
    if (a === "hang") return new Promise<string[]>(() => undefined);
    if (a instanceof Error) return Promise.reject(a);
    if (a === undefined) return Promise.reject(Object.assign(new Error(`fake NXDOMAIN ${host}`), { code: "ENOTFOUND" }));
    return Promise.resolve(a);
  };
  return { resolve, calls };
}

interface SeenRequest {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  localAddress: string | undefined;
  bodySha256: string;
  bodyLength: number;
}

const listen = (server: net.Server, host = "127.0.0.1"): Promise<number> => listenOn(server, cleanups, host);

/** Origin that records each request (with a hash of its body) and answers per `respond`. */
async function startOrigin(
  respond: (req: http.IncomingMessage, res: http.ServerResponse, seen: SeenRequest) => void = (_req, res) => res.end("hello from origin"),
  host = "127.0.0.1",
): Promise<{ port: number; seen: SeenRequest[]; sockets: () => number }> {
  const seen: SeenRequest[] = [];
  let sockets = 0;
  const server = http.createServer((req, res) => {
    const hash = createHash("sha256");
    let length = 0;
    req.on("data", (chunk: Buffer) => {
      hash.update(chunk);
      length += chunk.length;
    });
    req.on("end", () => {
      const s: SeenRequest = {
        method: req.method ?? "",
        url: req.url ?? "",
        headers: req.headers,
        localAddress: req.socket.localAddress,
        bodySha256: hash.digest("hex"),
        bodyLength: length,
      };
      seen.push(s);
      respond(req, res, s);
    });
  });
  server.on("connection", () => sockets++);
  const port = await listen(server, host);
  return { port, seen, sockets: () => sockets };
}

async function startEcho(): Promise<number> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
    s.pipe(s);
  });
  const port = await listen(server);
  cleanups.unshift(async () => {
    for (const s of sockets) s.destroy();
    await Promise.resolve();
  });
  return port;
}

/** A port on which nothing listens (bound once, then released). */
async function closedPort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const { port } = s.address() as AddressInfo;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

async function startProxy(
  holder: PolicyHolder,
  opts: { resolve?: Resolver; resolveTimeoutMs?: number; cachedAddresses?: (host: string) => string[] | undefined } = {},
): Promise<{ proxy: EgressProxy; port: number; audits: AuditEvent[] }> {
  const audits: AuditEvent[] = [];
  const proxy = createEgressProxy({ policy: holder, logger: silentLogger, onAudit: (e) => audits.push(e), ...opts });
  const { port } = await proxy.listen(0, "127.0.0.1");
  cleanups.push(() => proxy.close(100));
  return { proxy, port, audits };
}

interface ProxyResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  reusedSocket: boolean;
}

function viaProxy(
  proxyPort: number,
  url: string,
  opts: { method?: string; headers?: http.OutgoingHttpHeaders; body?: Buffer | Buffer[]; agent?: http.Agent } = {},
): Promise<ProxyResponse> {
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: "127.0.0.1",
      port: proxyPort,
      method: opts.method ?? "GET",
      path: url,
      headers: opts.headers,
      agent: opts.agent ?? false,
    });
    req.on("error", reject);
    req.on("response", (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("error", reject);
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks), reusedSocket: req.reusedSocket }));
    });
    const body = opts.body;
    if (Array.isArray(body)) {
      // Write piecewise without a Content-Length: the proxy must stream a chunked body.
      for (const b of body) req.write(b);
      req.end();
    } else {
      req.end(body);
    }
  });
}

interface RawResponse {
  status: number;
  head: string;
  socket: net.Socket;
  /** Bytes after the response head (a denial's JSON body, or early tunnel bytes). */
  rest: Buffer;
}

/** Sends CONNECT on a raw socket and reads the response head. */
function connectVia(proxyPort: number, authority: string, early?: Buffer): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(proxyPort, "127.0.0.1");
    cleanups.push(async () => {
      socket.destroy();
      await Promise.resolve();
    });
    let buf = Buffer.alloc(0);
    const onData = (chunk: Buffer): void => {
      buf = Buffer.concat([buf, chunk]);
      const end = buf.indexOf("\r\n\r\n");
      if (end < 0) return;
      socket.off("data", onData);
      socket.pause();
      const head = buf.subarray(0, end).toString("latin1");
      resolve({ status: Number(head.split(" ")[1]), head, socket, rest: buf.subarray(end + 4) });
    };
    socket.on("data", onData);
    socket.on("error", reject);
    socket.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n\r\n`);
    if (early !== undefined) socket.write(early);
  });
}

function readAll(socket: net.Socket, initial: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks = [initial];
    socket.on("data", (c: Buffer) => chunks.push(c));
    socket.on("end", () => resolve(Buffer.concat(chunks)));
    socket.on("error", reject);
    socket.resume();
  });
}

function readBytes(socket: net.Socket, initial: Buffer, n: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    let buf = initial;
    const check = (): boolean => {
      if (buf.length < n) return false;
      socket.off("data", onData);
      resolve(buf);
      return true;
    };
    const onData = (c: Buffer): void => {
      buf = Buffer.concat([buf, c]);
      check();
    };
    if (check()) return;
    socket.on("data", onData);
    socket.on("error", reject);
    socket.resume();
  });
}

const json = (b: Buffer): Record<string, unknown> => JSON.parse(b.toString("utf8")) as Record<string, unknown>;
const sha256 = (b: Buffer): string => createHash("sha256").update(b).digest("hex");

describe("egress proxy: plain HTTP", () => {
  it("forwards an allowed GET to the checked address and streams the answer back", async () => {
    const origin = await startOrigin();
    const dns = fakeResolver({ "origin.test": ["127.0.0.1"] });
    const holder = new PolicyHolder({ policy: allowing({ host: "origin.test", port: origin.port, protocol: "http", allowPrivate: LOOPBACK }), revision: 1 });
    const { port, audits } = await startProxy(holder, { resolve: dns.resolve });

    const res = await viaProxy(port, `http://origin.test:${origin.port}/hello?x=1`);

    expect(res.status).toBe(200);
    expect(res.body.toString()).toBe("hello from origin");
    expect(origin.seen).toHaveLength(1);
    expect(origin.seen[0]!.url).toBe("/hello?x=1");
    expect(origin.seen[0]!.headers.host).toBe(`origin.test:${origin.port}`);
    expect(dns.calls).toEqual(["origin.test"]);
    await expect.poll(() => audits.length).toBe(1);
    expect(audits).toEqual([
      expect.objectContaining({ type: "egress", decision: "allow", rule: "test", host: "origin.test", port: origin.port, protocol: "http", method: "GET", path: "/hello", address: "127.0.0.1" }),
    ]);
    expect(typeof audits[0]!.time).toBe("string");
  });

  it("denies a host outside the policy with 403, the policy header and a JSON body, before any DNS lookup", async () => {
    const origin = await startOrigin();
    const dns = fakeResolver({ "other.test": ["127.0.0.1"] });
    const holder = new PolicyHolder({ policy: allowing({ host: "origin.test", port: origin.port, protocol: "http", allowPrivate: LOOPBACK }), revision: 1 });
    const { port, audits } = await startProxy(holder, { resolve: dns.resolve });

    const res = await viaProxy(port, `http://other.test:${origin.port}/secret`);

    expect(res.status).toBe(403);
    expect(res.headers["x-proxy-error"]).toBe("sandgate-policy");
    expect(res.headers["content-type"]).toBe("application/json");
    expect(json(res.body)).toEqual({
      error: "policy_denied",
      host: "other.test",
      port: origin.port,
      method: "GET",
      path: "/secret",
      reason: "no_matching_rule",
      rule: null,
    });
    expect(dns.calls).toEqual([]);
    expect(origin.seen).toHaveLength(0);
    expect(audits).toEqual([expect.objectContaining({ decision: "deny", reason: "no_matching_rule", host: "other.test" })]);
  });

  it("applies L7 rules: GET allowed, POST denied on the same host", async () => {
    const origin = await startOrigin();
    const dns = fakeResolver({ "api.test": ["127.0.0.1"] });
    const holder = new PolicyHolder({
      policy: allowing({ host: "api.test", port: origin.port, protocol: "http", allowPrivate: LOOPBACK, rules: [{ methods: ["GET"], paths: ["/v1/**"] }] }),
      revision: 1,
    });
    const { port } = await startProxy(holder, { resolve: dns.resolve });

    const get = await viaProxy(port, `http://api.test:${origin.port}/v1/items`);
    const post = await viaProxy(port, `http://api.test:${origin.port}/v1/items`, { method: "POST", body: Buffer.from("{}") });
    const otherPath = await viaProxy(port, `http://api.test:${origin.port}/admin`);

    expect(get.status).toBe(200);
    expect(post.status).toBe(403);
    expect(json(post.body)).toMatchObject({ reason: "method_not_allowed", method: "POST", path: "/v1/items" });
    expect(otherPath.status).toBe(403);
    expect(json(otherPath.body)).toMatchObject({ reason: "path_not_allowed", path: "/admin" });
    expect(origin.seen.map((s) => `${s.method} ${s.url}`)).toEqual(["GET /v1/items"]);
  });

  it("checks the methods a request overrides to, and paths with parameters, before forwarding", async () => {
    const origin = await startOrigin();
    const dns = fakeResolver({ "api.test": ["127.0.0.1"] });
    const holder = new PolicyHolder({
      policy: allowing({ host: "api.test", port: origin.port, protocol: "http", allowPrivate: LOOPBACK, rules: [{ methods: ["GET", "POST"], paths: ["/v1/**"] }] }),
      revision: 1,
    });
    const { port, audits } = await startProxy(holder, { resolve: dns.resolve });
    const base = `http://api.test:${origin.port}`;

    const header = await viaProxy(port, `${base}/v1/items/1`, { headers: { "X-HTTP-Method-Override": "DELETE" } });
    const kin = await viaProxy(port, `${base}/v1/items/1`, { method: "POST", headers: { "x-method-override": "put" } });
    const query = await viaProxy(port, `${base}/v1/items/1?_method=delete`);
    const dotdot = await viaProxy(port, `${base}/v1/..;/admin`);
    const allowedOverride = await viaProxy(port, `${base}/v1/items?_method=POST`, { headers: { "X-HTTP-Method": "GET" } });
    const plain = await viaProxy(port, `${base}/v1/items/1`);

    for (const r of [header, kin, query]) {
      expect(r.status).toBe(403);
      expect(json(r.body)).toMatchObject({ error: "policy_denied", reason: "method_override_not_allowed", rule: "test" });
    }
    expect(dotdot.status).toBe(403);
    expect(json(dotdot.body)).toMatchObject({ reason: "path_not_allowed", path: "/v1/..;/admin" });
    expect(allowedOverride.status).toBe(200);
    expect(plain.status).toBe(200);
    // Only the two allowed requests reached the origin, in order.
    expect(origin.seen.map((s) => `${s.method} ${s.url}`)).toEqual(["GET /v1/items?_method=POST", "GET /v1/items/1"]);
    expect(audits.filter((a) => a.decision === "deny").map((a) => a.reason)).toEqual(["method_override_not_allowed", "method_override_not_allowed", "method_override_not_allowed", "path_not_allowed"]);
  });

  it("streams a 1 MiB chunked upload and a 2 MiB download intact", async () => {
    const download = randomBytes(2 * 1024 * 1024);
    const origin = await startOrigin((_req, res, seen) => {
      res.setHeader("x-upload-sha256", seen.bodySha256);
      res.setHeader("x-upload-length", String(seen.bodyLength));
      res.end(download);
    });
    const dns = fakeResolver({ "bulk.test": ["127.0.0.1"] });
    const holder = new PolicyHolder({ policy: allowing({ host: "bulk.test", port: origin.port, protocol: "http", allowPrivate: LOOPBACK }), revision: 1 });
    const { port } = await startProxy(holder, { resolve: dns.resolve });
    const parts = Array.from({ length: 16 }, () => randomBytes(64 * 1024));
    const upload = Buffer.concat(parts);

    const chunked = await viaProxy(port, `http://bulk.test:${origin.port}/up`, { method: "POST", body: parts });
    const sized = await viaProxy(port, `http://bulk.test:${origin.port}/up`, { method: "PUT", body: upload });

    for (const res of [chunked, sized]) {
      expect(res.status).toBe(200);
      expect(res.headers["x-upload-length"]).toBe(String(upload.length));
      expect(res.headers["x-upload-sha256"]).toBe(sha256(upload));
      expect(res.body.length).toBe(download.length);
      expect(sha256(res.body)).toBe(sha256(download));
    }
    expect(origin.seen[0]!.headers["transfer-encoding"]).toBe("chunked");
    expect(origin.seen[1]!.headers["content-length"]).toBe(String(upload.length));
  });

  it("strips hop-by-hop and Proxy-* headers in both directions", async () => {
    const origin = await startOrigin((_req, res) => {
      res.setHeader("connection", "x-origin-hop");
      res.setHeader("x-origin-hop", "1");
      res.setHeader("proxy-authenticate", "Basic");
      res.setHeader("x-end-to-end", "kept");
      res.end("ok");
    });
    const dns = fakeResolver({ "h.test": ["127.0.0.1"] });
    const holder = new PolicyHolder({ policy: allowing({ host: "h.test", port: origin.port, protocol: "http", allowPrivate: LOOPBACK }), revision: 1 });
    const { port } = await startProxy(holder, { resolve: dns.resolve });

    const res = await viaProxy(port, `http://h.test:${origin.port}/`, {
      headers: {
        "proxy-authorization": "Basic c2VjcmV0",
        "proxy-connection": "keep-alive",
        connection: "x-client-hop",
        "x-client-hop": "1",
        te: "trailers",
        host: "evil.example",
        "x-kept": "yes",
      },
    });

    expect(res.status).toBe(200);
    const h = origin.seen[0]!.headers;
    expect(h["proxy-authorization"]).toBeUndefined();
    expect(h["proxy-connection"]).toBeUndefined();
    expect(h["x-client-hop"]).toBeUndefined();
    expect(h.te).toBeUndefined();
    expect(h["x-kept"]).toBe("yes");
    // The policy checked the URI's host; a forged Host header must not pick another vhost.
    expect(h.host).toBe(`h.test:${origin.port}`);
    expect(res.headers["x-origin-hop"]).toBeUndefined();
    expect(res.headers["proxy-authenticate"]).toBeUndefined();
    expect(res.headers["x-end-to-end"]).toBe("kept");
  });

  it("passes repeated response headers (Set-Cookie) through as separate fields", async () => {
    const origin = await startOrigin((_req, res) => {
      res.setHeader("set-cookie", ["a=1; Path=/", "b=2; Path=/"]);
      res.end("ok");
    });
    const holder = new PolicyHolder({ policy: allowing({ host: "c.test", port: origin.port, protocol: "http", allowPrivate: LOOPBACK }), revision: 1 });
    const { port } = await startProxy(holder, { resolve: fakeResolver({ "c.test": ["127.0.0.1"] }).resolve });

    const res = await viaProxy(port, `http://c.test:${origin.port}/`);

    expect(res.headers["set-cookie"]).toEqual(["a=1; Path=/", "b=2; Path=/"]);
  });

  it("answers Expect: 100-continue only after the policy allowed the request", async () => {
    const origin = await startOrigin((_req, res, seen) => res.end(seen.bodySha256));
    const holder = new PolicyHolder({ policy: allowing({ host: "e.test", port: origin.port, protocol: "http", allowPrivate: LOOPBACK, rules: [{ methods: ["PUT"] }] }), revision: 1 });
    const { port } = await startProxy(holder, { resolve: fakeResolver({ "e.test": ["127.0.0.1"] }).resolve });
    const body = randomBytes(200_000);

    const send = (method: string): Promise<{ status: number; continued: boolean; body: string }> =>
      new Promise((resolve, reject) => {
        let continued = false;
        const req = http.request({
          host: "127.0.0.1",
          port,
          method,
          path: `http://e.test:${origin.port}/x`,
          headers: { expect: "100-continue", "content-length": body.length },
          agent: false,
        });
        req.on("continue", () => {
          continued = true;
          req.end(body);
        });
        req.on("response", (res) => {
          let text = "";
          res.setEncoding("utf8");
          res.on("data", (c: string) => (text += c));
          res.on("end", () => resolve({ status: res.statusCode ?? 0, continued, body: text }));
        });
        req.on("error", reject);
        req.flushHeaders();
      });

    const allowed = await send("PUT");
    const denied = await send("POST");

    expect(allowed).toEqual({ status: 200, continued: true, body: sha256(body) });
    expect(denied.status).toBe(403);
    expect(denied.continued).toBe(false);
    expect(origin.seen.map((x) => x.method)).toEqual(["PUT"]);
  });

  it("cuts the client connection when the upstream body is cut, instead of ending it cleanly", async () => {
    const origin = await startOrigin((_req, res) => {
      res.writeHead(200, { "content-length": "1000" });
      res.write("x".repeat(100));
      setTimeout(() => res.socket?.destroy(), 20);
    });
    const holder = new PolicyHolder({ policy: allowing({ host: "cut.test", port: origin.port, protocol: "http", allowPrivate: LOOPBACK }), revision: 1 });
    const { port } = await startProxy(holder, { resolve: fakeResolver({ "cut.test": ["127.0.0.1"] }).resolve });

    await expect(viaProxy(port, `http://cut.test:${origin.port}/`)).rejects.toThrow(/aborted|socket hang up|ECONNRESET/);
  });

  it("keeps the client connection alive and reuses the upstream connection", async () => {
    const origin = await startOrigin();
    const dns = fakeResolver({ "ka.test": ["127.0.0.1"] });
    const holder = new PolicyHolder({ policy: allowing({ host: "ka.test", port: origin.port, protocol: "http", allowPrivate: LOOPBACK }), revision: 1 });
    const { port } = await startProxy(holder, { resolve: dns.resolve });
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    cleanups.push(async () => {
      agent.destroy();
      await Promise.resolve();
    });

    const results: ProxyResponse[] = [];
    for (let i = 0; i < 3; i++) results.push(await viaProxy(port, `http://ka.test:${origin.port}/${i}`, { agent }));

    expect(results.map((r) => r.status)).toEqual([200, 200, 200]);
    expect(results.map((r) => r.reusedSocket)).toEqual([false, true, true]);
    expect(origin.sockets()).toBe(1);
  });

  it("answers 400 to a request that is not absolute-form", async () => {
    const holder = new PolicyHolder({ policy: allowing({ host: "x.test", port: 80, protocol: "http" }), revision: 1 });
    const { port, audits } = await startProxy(holder, { resolve: fakeResolver({}).resolve });

    const res = await viaProxy(port, "/just/a/path");

    expect(res.status).toBe(400);
    expect(json(res.body)).toMatchObject({ error: "bad_request" });
    expect(audits).toEqual([]);
  });
});

describe("egress proxy: CONNECT", () => {
  it("tunnels bytes both ways to a host:port a tcp endpoint allows, including bytes sent right after CONNECT", async () => {
    const echoPort = await startEcho();
    const dns = fakeResolver({ "echo.test": ["127.0.0.1"] });
    const holder = new PolicyHolder({ policy: allowing({ host: "echo.test", port: echoPort, protocol: "tcp", allowPrivate: LOOPBACK }), revision: 1 });
    const { port, audits } = await startProxy(holder, { resolve: dns.resolve });

    const early = Buffer.from("early-bytes|");
    const r = await connectVia(port, `echo.test:${echoPort}`, early);
    expect(r.status).toBe(200);
    expect(r.head).toBe("HTTP/1.1 200 Connection Established");
    const payload = randomBytes(256 * 1024);
    r.socket.write(payload);
    const back = await readBytes(r.socket, r.rest, early.length + payload.length);

    expect(sha256(back)).toBe(sha256(Buffer.concat([early, payload])));
    expect(audits).toEqual([
      expect.objectContaining({ decision: "allow", protocol: "tcp", host: "echo.test", port: echoPort, address: "127.0.0.1", rule: "test" }),
    ]);
    expect(audits[0]!.method).toBeUndefined();
  });

  it("answers a denied CONNECT with 403 and the policy JSON on the raw socket, then closes", async () => {
    const echoPort = await startEcho();
    const holder = new PolicyHolder({ policy: allowing({ host: "echo.test", port: echoPort, protocol: "https", allowPrivate: LOOPBACK }), revision: 1 });
    const { port } = await startProxy(holder, { resolve: fakeResolver({ "echo.test": ["127.0.0.1"] }).resolve });

    const r = await connectVia(port, `echo.test:${echoPort + 1 > 65535 ? echoPort - 1 : echoPort + 1}`);
    const body = await readAll(r.socket, r.rest);

    expect(r.status).toBe(403);
    expect(r.head).toMatch(/\r\nX-Proxy-Error: sandgate-policy\r\n/);
    expect(json(body)).toMatchObject({ error: "policy_denied", host: "echo.test", method: "CONNECT", reason: "no_matching_rule" });
  });

  it("answers 502 sandgate-upstream when the tunnel target refuses", async () => {
    const dead = await closedPort();
    const holder = new PolicyHolder({ policy: allowing({ host: "dead.test", port: dead, protocol: "https", allowPrivate: LOOPBACK }), revision: 1 });
    const { port } = await startProxy(holder, { resolve: fakeResolver({ "dead.test": ["127.0.0.1"] }).resolve });

    const r = await connectVia(port, `dead.test:${dead}`);
    const body = await readAll(r.socket, r.rest);

    expect(r.status).toBe(502);
    expect(r.head).toMatch(/\r\nX-Proxy-Error: sandgate-upstream\r\n/);
    expect(json(body)).toMatchObject({ error: "upstream_unreachable", code: "ECONNREFUSED", address: "127.0.0.1" });
  });
});

describe("egress proxy: audit records with traffic, and audit mode", () => {
  it("a request's record goes out once it is over: status, bytes each way (headers included), duration, the revision that decided", async () => {
    const origin = await startOrigin((_req, res) => res.end(Buffer.alloc(5000, 97)));
    const holder = new PolicyHolder({ policy: allowing({ host: "origin.test", port: origin.port, protocol: "http", allowPrivate: LOOPBACK }), revision: 7 });
    const { port, audits } = await startProxy(holder, { resolve: fakeResolver({ "origin.test": ["127.0.0.1"] }).resolve });
    const res = await viaProxy(port, `http://origin.test:${origin.port}/up`, { method: "POST", body: Buffer.alloc(3000, 98) });
    expect(res.status).toBe(200);
    await expect.poll(() => audits.length).toBe(1);
    const a = audits[0]!;
    expect(a).toMatchObject({ decision: "allow", method: "POST", path: "/up", status: 200, revision: 7 });
    expect(a.bytesOut).toBeGreaterThan(3000);
    expect(a.bytesIn).toBeGreaterThan(5000);
    expect(a.durationMs).toBeGreaterThanOrEqual(0);
    expect(a.activity).toBeUndefined();
  });

  it("a tunnel is recorded when it opens, and when it closes with what it carried", async () => {
    const echoPort = await startEcho();
    const holder = new PolicyHolder({ policy: allowing({ host: "echo.test", port: echoPort, protocol: "tcp", allowPrivate: LOOPBACK }), revision: 1 });
    const { port, audits } = await startProxy(holder, { resolve: fakeResolver({ "echo.test": ["127.0.0.1"] }).resolve });
    const r = await connectVia(port, `echo.test:${echoPort}`);
    const payload = randomBytes(64 * 1024);
    r.socket.write(payload);
    await readBytes(r.socket, r.rest, payload.length);
    expect(audits).toEqual([expect.objectContaining({ decision: "allow", protocol: "tcp" })]);
    expect(audits[0]!.activity).toBeUndefined();
    r.socket.destroy();
    await expect.poll(() => audits.length).toBe(2);
    expect(audits[1]).toMatchObject({ decision: "allow", activity: "close", protocol: "tcp", host: "echo.test", rule: "test" });
    expect(audits[1]!.bytesOut).toBeGreaterThanOrEqual(payload.length);
    expect(audits[1]!.bytesIn).toBeGreaterThanOrEqual(payload.length);
  });

  it("an audit-mode rule lets a refused path through: the origin answers, the record says would_deny and why", async () => {
    const origin = await startOrigin();
    const policy = policyOf({
      rules: [{ name: "api", enforcement: "audit", endpoints: [{ host: "api.test", port: origin.port, protocol: "http", allowPrivate: LOOPBACK, rules: [{ methods: ["GET"], paths: ["/v1/**"] }] }] }],
    });
    const { port, audits } = await startProxy(new PolicyHolder({ policy, revision: 2 }), { resolve: fakeResolver({ "api.test": ["127.0.0.1"] }).resolve });
    expect((await viaProxy(port, `http://api.test:${origin.port}/admin`)).status).toBe(200);
    expect((await viaProxy(port, `http://api.test:${origin.port}/v1/ok`)).status).toBe(200);
    expect(origin.seen.map((r) => r.url)).toEqual(["/admin", "/v1/ok"]);
    await expect.poll(() => audits.length).toBe(2);
    expect(audits[0]).toMatchObject({ decision: "would_deny", reason: "path_not_allowed", rule: "api", path: "/admin", status: 200, revision: 2 });
    expect(audits[1]).toMatchObject({ decision: "allow", rule: "api", path: "/v1/ok" });
    expect(audits[1]!.reason).toBeUndefined();
  });

  it("the whole policy in audit mode lets an unknown host through raw, but never to a private address or the gateway's host, nor under lockdown", async () => {
    const echoPort = await startEcho();
    const holder = new PolicyHolder({ policy: policyOf({ enforcement: "audit", rules: [] }), revision: 3 });
    let locked: string | null = null;
    const audits: AuditEvent[] = [];
    // Public-looking name resolved to loopback: audit mode must not open the private-address check.
    const proxy = createEgressProxy({ policy: holder, logger: silentLogger, onAudit: (e) => audits.push(e), resolve: fakeResolver({ "echo.test": ["127.0.0.1"] }).resolve, lockdown: () => locked });
    const { port } = await proxy.listen(0, "127.0.0.1");
    cleanups.push(() => proxy.close(100));
    const r = await connectVia(port, `echo.test:${echoPort}`);
    expect(r.status).toBe(403);
    expect(json(await readAll(r.socket, r.rest))).toMatchObject({ reason: "private_address" });
    expect(audits.at(-1)).toMatchObject({ decision: "deny", reason: "private_address", protocol: "tcp" });

    // Named with its range by a rule: covered, so let through (no would-deny).
    holder.replace(policyOf({ enforcement: "audit", rules: [{ name: "echo", endpoints: [{ host: "echo.test", port: echoPort, protocol: "tcp", allowPrivate: LOOPBACK }] }] }), 4);
    const ok = await connectVia(port, `echo.test:${echoPort}`);
    expect(ok.status).toBe(200);
    ok.socket.destroy();
    expect(audits.at(-1)).toMatchObject({ decision: "allow", rule: "echo", revision: 4 });

    locked = "lockdown_session_lost";
    const l = await connectVia(port, `echo.test:${echoPort}`);
    expect(l.status).toBe(403);
    await expect.poll(() => audits.at(-1)?.reason).toBe("lockdown_session_lost");
  });

  it("the whole policy in audit mode: a method a covering endpoint refuses goes through as would_deny, with that endpoint's private range", async () => {
    const origin = await startOrigin();
    const policy = policyOf({ enforcement: "audit", rules: [{ name: "api", endpoints: [{ host: "api.test", port: origin.port, protocol: "http", allowPrivate: LOOPBACK, rules: [{ methods: ["GET"] }] }] }] });
    const { port, audits } = await startProxy(new PolicyHolder({ policy, revision: 5 }), { resolve: fakeResolver({ "api.test": ["127.0.0.1"] }).resolve });
    expect((await viaProxy(port, `http://api.test:${origin.port}/x`, { method: "DELETE" })).status).toBe(200);
    expect(origin.seen.map((r) => r.method)).toEqual(["DELETE"]);
    await expect.poll(() => audits.length).toBe(1);
    expect(audits[0]).toMatchObject({ decision: "would_deny", reason: "method_not_allowed", rule: "api", method: "DELETE", revision: 5 });
  });
});

describe("egress proxy: upstream failures are not policy denials", () => {
  it("answers 502 sandgate-upstream when the origin refuses the connection", async () => {
    const dead = await closedPort();
    const holder = new PolicyHolder({ policy: allowing({ host: "dead.test", port: dead, protocol: "http", allowPrivate: LOOPBACK }), revision: 1 });
    const { port, audits } = await startProxy(holder, { resolve: fakeResolver({ "dead.test": ["127.0.0.1"] }).resolve });

    const res = await viaProxy(port, `http://dead.test:${dead}/`, { method: "POST", body: Buffer.from("payload") });

    expect(res.status).toBe(502);
    expect(res.headers["x-proxy-error"]).toBe("sandgate-upstream");
    expect(json(res.body)).toMatchObject({ error: "upstream_unreachable", host: "dead.test", port: dead, code: "ECONNREFUSED" });
    expect(audits[0]).toEqual(expect.objectContaining({ decision: "allow", address: "127.0.0.1" }));
    // The request's own record says the origin failed: allowed by the policy, not an exchange.
    expect(await eventually(() => audits.find((e) => e.status !== undefined), 10_000, "the request's record")).toMatchObject({ status: 502, reason: "upstream_unreachable" });
  });

  it("answers 502 on NXDOMAIN and 504 when DNS does not answer in time", async () => {
    const dns = fakeResolver({
      "nx.test": Object.assign(new Error("fake getaddrinfo ENOTFOUND nx.test"), { code: "ENOTFOUND" }),
      "slow.test": "hang",
    });
    const holder = new PolicyHolder({
      policy: allowing({ host: "nx.test", port: 80, protocol: "http" }, { host: "slow.test", port: 80, protocol: "http" }),
      revision: 1,
    });
    const { port } = await startProxy(holder, { resolve: dns.resolve, resolveTimeoutMs: 100 });

    const nx = await viaProxy(port, "http://nx.test/");
    const slow = await viaProxy(port, "http://slow.test/");

    expect(nx.status).toBe(502);
    expect(nx.headers["x-proxy-error"]).toBe("sandgate-upstream");
    expect(json(nx.body)).toMatchObject({ error: "upstream_unreachable", code: "ENOTFOUND" });
    expect(slow.status).toBe(504);
    expect(slow.headers["x-proxy-error"]).toBe("sandgate-upstream");
    expect(json(slow.body)).toMatchObject({ error: "upstream_unreachable", code: "ETIMEDOUT" });
  });
});

describe("egress proxy: resolved-address checks", () => {
  it("refuses an allowed public-looking name that resolves to a private address", async () => {
    const origin = await startOrigin();
    const dns = fakeResolver({ "public.example.com": ["127.0.0.1"] });
    const holder = new PolicyHolder({ policy: allowing({ host: "public.example.com", port: origin.port, protocol: "http" }), revision: 1 });
    const { port, audits } = await startProxy(holder, { resolve: dns.resolve });

    const res = await viaProxy(port, `http://public.example.com:${origin.port}/`);

    expect(res.status).toBe(403);
    expect(res.headers["x-proxy-error"]).toBe("sandgate-policy");
    expect(json(res.body)).toMatchObject({ error: "policy_denied", reason: "private_address", rule: "test", address: "127.0.0.1" });
    expect(origin.seen).toHaveLength(0);
    expect(dns.calls).toEqual(["public.example.com"]);
    expect(audits).toEqual([expect.objectContaining({ decision: "deny", reason: "private_address", address: "127.0.0.1" })]);
  });

  it("uses a cached answer without a lookup, and checks it like any other: a private address is refused, an allowed one connected to", async () => {
    const origin = await startOrigin();
    const dns = fakeResolver({});
    const cache: Record<string, string[]> = { "cached.test": ["127.0.0.1"], "public.example.com": ["127.0.0.1"] };
    const holder = new PolicyHolder({
      policy: allowing({ host: "cached.test", port: origin.port, protocol: "http", allowPrivate: LOOPBACK }, { host: "public.example.com", port: origin.port, protocol: "http" }),
      revision: 1,
    });
    const { port } = await startProxy(holder, { resolve: dns.resolve, cachedAddresses: (h) => cache[h] });

    const allowed = await viaProxy(port, `http://cached.test:${origin.port}/`);
    expect(allowed.status).toBe(200);
    expect(origin.seen).toHaveLength(1);
    const refused = await viaProxy(port, `http://public.example.com:${origin.port}/`);
    expect(refused.status).toBe(403);
    expect(json(refused.body)).toMatchObject({ reason: "private_address", address: "127.0.0.1" });
    expect(origin.seen).toHaveLength(1);
    expect(dns.calls).toEqual([]);
  });

  it("refuses the whole name when any candidate address is private, even if another is allowed", async () => {
    const origin = await startOrigin();
    const dns = fakeResolver({ "mixed.test": ["127.0.0.1", "169.254.169.254"] });
    const holder = new PolicyHolder({ policy: allowing({ host: "mixed.test", port: origin.port, protocol: "http", allowPrivate: LOOPBACK }), revision: 1 });
    const { port } = await startProxy(holder, { resolve: dns.resolve });

    const res = await viaProxy(port, `http://mixed.test:${origin.port}/`);

    expect(res.status).toBe(403);
    expect(json(res.body)).toMatchObject({ reason: "private_address", address: "169.254.169.254" });
    expect(origin.seen).toHaveLength(0);
  });

  it("refuses CONNECT to a name resolving into a private range", async () => {
    const echoPort = await startEcho();
    const holder = new PolicyHolder({ policy: allowing({ host: "tls.example.com", port: echoPort, protocol: "https" }), revision: 1 });
    const { port } = await startProxy(holder, { resolve: fakeResolver({ "tls.example.com": ["127.0.0.1"] }).resolve });

    const r = await connectVia(port, `tls.example.com:${echoPort}`);
    const body = await readAll(r.socket, r.rest);

    expect(r.status).toBe(403);
    expect(json(body)).toMatchObject({ reason: "private_address", address: "127.0.0.1" });
  });

  it("refuses localhost through the real resolver when the endpoint has no allowPrivate", async () => {
    const origin = await startOrigin();
    const holder = new PolicyHolder({ policy: allowing({ host: "localhost", port: origin.port, protocol: "http" }), revision: 1 });
    const { port } = await startProxy(holder); // default resolver: dns.lookup via /etc/hosts

    const res = await viaProxy(port, `http://localhost:${origin.port}/`);

    expect(res.status).toBe(403);
    expect(json(res.body)).toMatchObject({ reason: "private_address" });
    expect(origin.seen).toHaveLength(0);
  });

  it("connects to the address it checked, resolving once (no second lookup to rebind)", async () => {
    // The origin listens on 127.0.0.2 only: a request reaching it proves the proxy
    // dialled the IP from the single (fake) resolution, not the name again.
    const origin = await startOrigin(undefined, "127.0.0.2");
    let answers = 0;
    const calls: string[] = [];
    const rebinding: Resolver = (host) => {
      calls.push(host);
      // A rebinding DNS server: the first answer is the allowed one, later ones point elsewhere.
      return Promise.resolve(answers++ === 0 ? ["127.0.0.2"] : ["127.0.0.1"]);
    };
    const holder = new PolicyHolder({ policy: allowing({ host: "api.example.com", port: origin.port, protocol: "http", allowPrivate: ["127.0.0.2/32"] }), revision: 1 });
    const { port, audits } = await startProxy(holder, { resolve: rebinding });

    const res = await viaProxy(port, `http://api.example.com:${origin.port}/data`);

    expect(res.status).toBe(200);
    expect(calls).toEqual(["api.example.com"]);
    expect(origin.seen).toHaveLength(1);
    expect(origin.seen[0]!.localAddress).toBe("127.0.0.2");
    expect(origin.seen[0]!.headers.host).toBe(`api.example.com:${origin.port}`);
    expect(audits[0]).toMatchObject({ decision: "allow", address: "127.0.0.2" });

    // The second request resolves again (once) and gets 127.0.0.1, outside allowPrivate.
    const second = await viaProxy(port, `http://api.example.com:${origin.port}/data`);
    expect(second.status).toBe(403);
    expect(json(second.body)).toMatchObject({ reason: "private_address", address: "127.0.0.1" });
    expect(calls).toHaveLength(2);
  });
});

describe("egress proxy: policy holder", () => {
  it("denies everything while no policy is loaded (HTTP and CONNECT)", async () => {
    const origin = await startOrigin();
    const echoPort = await startEcho();
    const dns = fakeResolver({ "origin.test": ["127.0.0.1"] });
    const { port, audits } = await startProxy(new PolicyHolder(), { resolve: dns.resolve });

    const res = await viaProxy(port, `http://origin.test:${origin.port}/`);
    const r = await connectVia(port, `127.0.0.1:${echoPort}`);
    const body = await readAll(r.socket, r.rest);

    expect(res.status).toBe(403);
    expect(json(res.body)).toMatchObject({ error: "policy_denied", reason: "policy_missing" });
    expect(r.status).toBe(403);
    expect(json(body)).toMatchObject({ reason: "policy_missing" });
    expect(origin.seen).toHaveLength(0);
    expect(dns.calls).toEqual([]);
    expect(audits.map((a) => a.decision)).toEqual(["deny", "deny"]);
  });

  it("applies a replaced policy to the next request and ignores an older revision", async () => {
    const origin = await startOrigin();
    const dns = fakeResolver({ "origin.test": ["127.0.0.1"] });
    const holder = new PolicyHolder({ policy: allowing({ host: "elsewhere.test", port: 80, protocol: "http" }), revision: 3 });
    const changes: (number | undefined)[] = [];
    holder.onChange((p) => changes.push(p?.revision));
    const { port } = await startProxy(holder, { resolve: dns.resolve });
    const url = `http://origin.test:${origin.port}/`;
    const open = allowing({ host: "origin.test", port: origin.port, protocol: "http", allowPrivate: LOOPBACK });

    expect((await viaProxy(port, url)).status).toBe(403);
    expect(holder.replace(open, 2)).toBe(false);
    expect((await viaProxy(port, url)).status).toBe(403);
    expect(holder.replace(open, 4)).toBe(true);
    expect((await viaProxy(port, url)).status).toBe(200);
    holder.clear();
    expect((await viaProxy(port, url)).status).toBe(403);
    expect(changes).toEqual([4, undefined]);
  });

  it("close() lets an in-flight request finish", async () => {
    // The origin holds its answer until close() has been called: the request is surely in flight.
    let arrived!: () => void;
    const atOrigin = new Promise<void>((r) => (arrived = r));
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    const origin = await startOrigin((_req, res) => {
      arrived();
      void released.then(() => res.end("late"));
    });
    const holder = new PolicyHolder({ policy: allowing({ host: "origin.test", port: origin.port, protocol: "http", allowPrivate: LOOPBACK }), revision: 1 });
    const { proxy, port } = await startProxy(holder, { resolve: fakeResolver({ "origin.test": ["127.0.0.1"] }).resolve });

    const pending = viaProxy(port, `http://origin.test:${origin.port}/`);
    await atOrigin;
    // A grace the test never reaches: close() waits for the request, not for the grace.
    const closed = proxy.close(60_000);
    release();
    const res = await pending;
    await closed;

    expect(res.status).toBe(200);
    expect(res.body.toString()).toBe("late");
    expect(proxy.isListening()).toBe(false);
  });
});

describe("egress proxy: a second listener's plain HTTP (EgressProxy.entries)", () => {
  /** TEST reader: origin-form requests, the target named by the Host header (as the transparent path will read them). */
  const originForm: TargetReader = {
    read(req): HttpTarget | undefined {
      const host = req.headers.host;
      if (host === undefined || req.url?.startsWith("/") !== true) return undefined;
      const url = new URL(req.url, `http://${host}`);
      return { host: url.hostname, port: url.port === "" ? 80 : Number(url.port), protocol: "http", method: req.method ?? "GET", path: url.pathname, authority: url.host, requestPath: url.pathname + url.search };
    },
    refusal: () => ({ error: "bad_request", message: "origin form with a Host header" }),
  };

  it("origin form, its target from Host: the same request upstream and the same record as proxied; revocation closes its kept-alive connection", async () => {
    const origin = await startOrigin();
    const holder = new PolicyHolder({ policy: allowing({ host: "web.test", port: origin.port, protocol: "http", allowPrivate: LOOPBACK }), revision: 1 });
    const { proxy, port, audits } = await startProxy(holder, { resolve: fakeResolver({ "web.test": ["127.0.0.1"] }).resolve });
    const inner = http.createServer();
    const plain = proxy.entries.plainHttp(originForm);
    inner.on("request", (req, res) => plain.request(req, res, false));
    const second = await secondListener((s) => {
      proxy.entries.addClient(s);
      inner.emit("connection", s);
    }, cleanups);
    const agent = new http.Agent({ keepAlive: true });
    cleanups.push(async () => {
      agent.destroy();
      await Promise.resolve();
    });

    const proxied = await viaProxy(port, `http://web.test:${origin.port}/x?q=1`, { agent });
    const joined = await viaProxy(second, "/x?q=1", { headers: { host: `web.test:${origin.port}` }, agent });
    expect([proxied.status, joined.status]).toEqual([200, 200]);
    expect(joined.body.toString()).toBe("hello from origin");
    expect(origin.seen.map((r) => `${r.method} ${r.url} ${r.headers.host ?? ""}`)).toEqual([`GET /x?q=1 web.test:${origin.port}`, `GET /x?q=1 web.test:${origin.port}`]);
    await expect.poll(() => audits.length).toBe(2);
    expect(sameDecision(audits[1]!)).toEqual(sameDecision(audits[0]!));
    expect(audits[0]).toMatchObject({ decision: "allow", protocol: "http", method: "GET", path: "/x", rule: "test", status: 200 });

    holder.replace(allowing({ host: "other.test", port: 1, protocol: "http" }), 2);
    // Both kept-alive client connections (the proxy's and the second listener's) sit idle after a request no longer allowed.
    expect(proxy.revoke()).toMatchObject({ clients: 2 });
  });
});

describe("health endpoint", () => {
  /** The health server on a Unix socket (as in the container); its path. */
  async function startHealth(holder: PolicyHolder, proxyListening: () => boolean): Promise<string> {
    const health: HealthServer = createHealthServer({ identity: { sandboxId: "sb-1", generation: 7 }, policy: holder, proxyListening });
    const dir = mkdtempSync(join(tmpdir(), "sg-health-"));
    await health.listenUnix(join(dir, "health.sock"));
    cleanups.push(async () => {
      await health.close();
      rmSync(dir, { recursive: true, force: true });
    });
    return join(dir, "health.sock");
  }

  const getHealth = (socketPath: string): ReturnType<typeof getOverUnix> => getOverUnix(socketPath);

  it("reports 200 with identity and revision when the proxy listens and a policy is loaded", async () => {
    const holder = new PolicyHolder({ policy: allowing({ host: "x.test", port: 80, protocol: "http" }), revision: 5 });
    const { proxy } = await startProxy(holder);
    const port = await startHealth(holder, () => proxy.isListening());

    const h = await getHealth(port);

    expect(h.status).toBe(200);
    expect(h.body).toEqual({ ok: true, sandboxId: "sb-1", generation: 7, policyRevision: 5, policy: "loaded", proxy: "listening", transparent: "disabled", session: "disabled", lockdown: null });
  });

  it("reports 503 when no policy is loaded or the proxy is not listening", async () => {
    const empty = new PolicyHolder();
    const { proxy } = await startProxy(empty);
    const noPolicy = await getHealth(await startHealth(empty, () => proxy.isListening()));

    const loaded = new PolicyHolder({ policy: allowing({ host: "x.test", port: 80, protocol: "http" }), revision: 1 });
    const closedProxy = createEgressProxy({ policy: loaded, logger: silentLogger, onAudit: () => undefined });
    const noProxy = await getHealth(await startHealth(loaded, () => closedProxy.isListening()));

    expect(noPolicy.status).toBe(503);
    expect(noPolicy.body).toMatchObject({ ok: false, policy: "missing", policyRevision: null, proxy: "listening" });
    expect(noProxy.status).toBe(503);
    expect(noProxy.body).toMatchObject({ ok: false, policy: "loaded", proxy: "not_listening" });
  });
});
