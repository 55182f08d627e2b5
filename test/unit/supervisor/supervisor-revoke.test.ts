// Revocation: a new policy revision (or a lockdown) closes the open connections it does
// not allow. Real sockets on loopback: a TLS origin (certificate from the gateway's own
// issuer), an HTTP origin, a WebSocket origin, and the real egress proxy in front.
// Each "closed" is proven by a write after the revocation that gets no answer but the
// close, where an open connection would have answered.
import http from "node:http";
import net from "node:net";
import tls from "node:tls";
import type { AddressInfo } from "node:net";
import WebSocket, { WebSocketServer } from "ws";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { policyFromObject } from "../../../src/policy/index.js";
import type { Policy } from "../../../src/policy/index.js";
import { issueEndpointCertificate } from "../../../src/gateway/control/tls.js";
import type { EndpointTls } from "../../../src/gateway/control/tls.js";
import { PolicyHolder } from "../../../src/supervisor/policy-holder.js";
import { LockdownPolicyHolder } from "../../../src/supervisor/lockdown.js";
import { createEgressProxy } from "../../../src/supervisor/proxy/index.js";
import type { EgressProxy, Resolver } from "../../../src/supervisor/proxy/index.js";
import { silentLogger } from "../../../src/supervisor/logger.js";
import { connect, nextEvent, probe, rawClient, rawRequest, status } from "../../support/proxy-client.js";

const LOOPBACK = ["127.0.0.0/8"];
const cleanups: (() => Promise<void> | void)[] = [];
let cert: EndpointTls;

beforeAll(async () => {
  cert = await issueEndpointCertificate({ commonName: "tls-origin" });
});

afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function policyOf(rules: { name: string; endpoints: object[] }[]): Policy {
  const r = policyFromObject({ version: 1, network: { rules } });
  if (!r.ok) throw new Error(`test policy invalid: ${r.errors.join("; ")}`);
  return r.policy;
}

/** Every *.test name is 127.0.0.1. */
const resolve: Resolver = (host) => Promise.resolve(host.endsWith(".test") ? ["127.0.0.1"] : []);

async function listenOn(server: net.Server): Promise<number> {
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return (server.address() as AddressInfo).port;
}

/** A server plus the sockets it accepted, each with whether it has closed. */
interface Origin {
  port: number;
  accepted: net.Socket[];
  open: () => number;
}

function tracked(server: net.Server, event: "connection" | "secureConnection"): Omit<Origin, "port"> {
  const accepted: net.Socket[] = [];
  server.on(event, (s: net.Socket) => {
    accepted.push(s);
    s.on("error", () => undefined);
  });
  cleanups.push(
    () =>
      new Promise<void>((r) => {
        for (const s of accepted) s.destroy();
        server.close(() => r());
      }),
  );
  return { accepted, open: () => accepted.filter((s) => !s.destroyed && !s.readableEnded).length };
}

/** TLS echo origin. */
async function startTlsEcho(): Promise<Origin> {
  const server = tls.createServer({ cert: cert.certPem, key: cert.keyPem }, (s) => s.pipe(s));
  const t = tracked(server, "secureConnection");
  return { port: await listenOn(server), ...t };
}

/** Plain TCP echo origin. */
async function startEcho(): Promise<Origin> {
  const server = net.createServer((s) => s.pipe(s));
  const t = tracked(server, "connection");
  return { port: await listenOn(server), ...t };
}

/** HTTP origin: "hello <url>"; /hold/* sends its head and a first chunk, the rest on release(). */
async function startHttp(): Promise<Origin & { release: () => void; holding: () => number }> {
  const held: http.ServerResponse[] = [];
  const server = http.createServer((req, res) => {
    if (req.url?.startsWith("/hold/")) {
      res.writeHead(200, { "content-type": "text/plain", "content-length": "10" });
      res.write("first");
      held.push(res);
      return;
    }
    res.end(`hello ${req.url ?? ""}`);
  });
  // Never the origin's idle timeout: only the proxy may close a kept-alive upstream socket here.
  server.keepAliveTimeout = 600_000;
  const t = tracked(server, "connection");
  cleanups.unshift(() => server.closeAllConnections());
  const release = (): void => {
    for (const res of held.splice(0)) if (!res.destroyed) res.end("+rest");
  };
  return { port: await listenOn(server), ...t, release, holding: () => held.length };
}

async function startProxy(holder: PolicyHolder, lockdown?: () => string | null): Promise<{ proxy: EgressProxy; port: number }> {
  const proxy = createEgressProxy({ policy: holder, logger: silentLogger, onAudit: () => undefined, resolve, ...(lockdown === undefined ? {} : { lockdown }) });
  const { port } = await proxy.listen(0, "127.0.0.1");
  cleanups.push(() => proxy.close(0));
  return { proxy, port };
}

/** A TLS session over a CONNECT tunnel, one echo exchanged. */
async function tlsTunnel(proxyPort: number, authority: string): Promise<tls.TLSSocket> {
  const c = await connect(proxyPort, authority, cleanups);
  expect(c.status).toBe(200);
  // SNI is the CONNECT host (a blind tunnel checks it); the certificate is pinned, its name not checked.
  const t = tls.connect({ socket: c.socket, ca: cert.certPem, servername: authority.split(":")[0]!, checkServerIdentity: () => undefined });
  t.on("error", () => undefined);
  await new Promise<void>((r) => t.once("secureConnect", () => r()));
  expect(await probe(t, "ping")).toBe("data:ping");
  return t;
}


describe("a new revision revokes what it no longer allows", () => {
  it("closes a TLS tunnel whose rule is gone, keeps the one still allowed; a new CONNECT gets 403", async () => {
    const tlsOrigin = await startTlsEcho();
    const echo = await startEcho();
    const tlsRule = { name: "tls", endpoints: [{ host: "tls.test", port: tlsOrigin.port, protocol: "https", allowPrivate: LOOPBACK }] };
    const echoRule = { name: "echo", endpoints: [{ host: "echo.test", port: echo.port, protocol: "tcp", allowPrivate: LOOPBACK }] };
    const holder = new PolicyHolder({ policy: policyOf([tlsRule, echoRule]), revision: 1 });
    const { proxy, port } = await startProxy(holder);

    const revoked = await tlsTunnel(port, `tls.test:${tlsOrigin.port}`);
    const kept = await connect(port, `echo.test:${echo.port}`, cleanups);
    expect(await probe(kept.socket, "a")).toBe("data:a");

    expect(holder.replace(policyOf([echoRule]), 2)).toBe(true);
    expect(proxy.revoke()).toEqual({ closed: 1, tunnels: 1, clients: 0, upstream: 0 });

    // Written after the revocation: an open tunnel would echo it.
    expect(await probe(revoked, "after")).toBe("closed");
    await expect.poll(() => tlsOrigin.open(), { timeout: 10_000 }).toBe(0);
    expect(await probe(kept.socket, "b")).toBe("data:b");
    expect((await connect(port, `tls.test:${tlsOrigin.port}`, cleanups)).status).toBe(403);
  });

  it("closes a tunnel whose address the new revision no longer admits (allowPrivate narrowed)", async () => {
    const echo = await startEcho();
    const rule = (allowPrivate: string[]) => ({ name: "echo", endpoints: [{ host: "echo.test", port: echo.port, protocol: "tcp", allowPrivate }] });
    const holder = new PolicyHolder({ policy: policyOf([rule(LOOPBACK)]), revision: 1 });
    const { proxy, port } = await startProxy(holder);
    const c = await connect(port, `echo.test:${echo.port}`, cleanups);
    expect(await probe(c.socket, "a")).toBe("data:a");

    holder.replace(policyOf([rule(["10.0.0.0/8"])]), 2);
    expect(proxy.revoke().tunnels).toBe(1);
    expect(await probe(c.socket, "b")).toBe("closed");
  });

  it("closes an upgraded WebSocket inside a tcp tunnel", async () => {
    const wss = new WebSocketServer({ host: "127.0.0.1", port: 0 });
    await new Promise<void>((r) => wss.once("listening", () => r()));
    wss.on("connection", (ws) => ws.on("message", (m: Buffer) => ws.send(m.toString())));
    cleanups.push(() => new Promise<void>((r) => {
      for (const c of wss.clients) c.terminate();
      wss.close(() => r());
    }));
    const wsPort = (wss.address() as AddressInfo).port;
    const holder = new PolicyHolder({ policy: policyOf([{ name: "ws", endpoints: [{ host: "ws.test", port: wsPort, protocol: "tcp", allowPrivate: LOOPBACK }] }]), revision: 1 });
    const { proxy, port } = await startProxy(holder);
    const c = await connect(port, `ws.test:${wsPort}`, cleanups);
    c.socket.resume();
    const ws = new WebSocket(`ws://ws.test:${wsPort}/`, { createConnection: () => c.socket });
    ws.on("error", () => undefined);
    await new Promise<void>((r) => ws.once("open", () => r()));
    const reply = (): Promise<string> => new Promise((r) => {
      ws.once("message", (m: Buffer) => r(m.toString()));
      ws.once("close", () => r("closed"));
    });
    let next = reply();
    ws.send("hi");
    expect(await next).toBe("hi");

    holder.replace(policyOf([]), 2);
    expect(proxy.revoke().tunnels).toBe(1);
    next = reply();
    if (ws.readyState === WebSocket.OPEN) ws.send("after");
    expect(await next).toBe("closed");
  });

  it("closes an idle kept-alive client connection and its pooled upstream socket; a connection still allowed stays and its next request is judged anew", async () => {
    const origin = await startHttp();
    const other = await startHttp();
    const originRule = { name: "origin", endpoints: [{ host: "origin.test", port: origin.port, protocol: "http", allowPrivate: LOOPBACK }] };
    const otherRule = { name: "other", endpoints: [{ host: "other.test", port: other.port, protocol: "http", allowPrivate: LOOPBACK }] };
    const holder = new PolicyHolder({ policy: policyOf([originRule, otherRule]), revision: 1 });
    const { proxy, port } = await startProxy(holder);

    const toOrigin = await rawClient(port, cleanups);
    expect(status(await rawRequest(toOrigin, `http://origin.test:${origin.port}/1`))).toBe("200");
    expect(status(await rawRequest(toOrigin, `http://origin.test:${origin.port}/2`))).toBe("200");
    const toOther = await rawClient(port, cleanups);
    expect(status(await rawRequest(toOther, `http://other.test:${other.port}/1`))).toBe("200");
    // One kept-alive upstream socket to each origin, idle in the proxy's pool.
    expect(origin.accepted).toHaveLength(1);
    expect(origin.open()).toBe(1);

    holder.replace(policyOf([otherRule]), 2);
    expect(proxy.revoke()).toEqual({ closed: 2, tunnels: 0, clients: 1, upstream: 1 });

    // Written after the revocation: an open connection would answer (with a 403).
    expect(await rawRequest(toOrigin, `http://origin.test:${origin.port}/3`)).toBe("closed");
    await expect.poll(() => origin.open(), { timeout: 10_000 }).toBe(0);
    expect(other.open()).toBe(1);
    // The connection still allowed stays open; its next request is evaluated under revision 2.
    expect(status(await rawRequest(toOther, `http://origin.test:${origin.port}/4`))).toBe("403");
    expect(status(await rawRequest(toOther, `http://other.test:${other.port}/2`))).toBe("200");
    // A new connection to the revoked origin is denied.
    expect(status(await rawRequest(await rawClient(port, cleanups), `http://origin.test:${origin.port}/5`))).toBe("403");
    expect(origin.accepted).toHaveLength(1);
  });

  it("cuts a response in flight that the new revision denies (L7: path no longer allowed)", async () => {
    const origin = await startHttp();
    const rule = (paths: string[]) => ({ name: "origin", endpoints: [{ host: "origin.test", port: origin.port, protocol: "http", allowPrivate: LOOPBACK, rules: [{ methods: ["GET"], paths }] }] });
    const holder = new PolicyHolder({ policy: policyOf([rule(["/hold/**", "/ok"])]), revision: 1 });
    const { proxy, port } = await startProxy(holder);

    const s = await rawClient(port, cleanups);
    const first = nextEvent(s);
    s.write(`GET http://origin.test:${origin.port}/hold/x HTTP/1.1\r\nHost: origin.test\r\n\r\n`);
    expect(await first).toMatch(/^data:HTTP\/1.1 200 /);

    holder.replace(policyOf([rule(["/ok"])]), 2);
    expect(proxy.revoke()).toMatchObject({ closed: 1, clients: 1 });
    const next = nextEvent(s);
    // The origin now sends the rest: a response that was not cut would pass it on.
    origin.release();
    expect(await next).toBe("closed");
    await expect.poll(() => origin.open(), { timeout: 10_000 }).toBe(0);
  });

  it("lets a response still allowed finish, then closes its connection and upstream socket that carried one no longer allowed", async () => {
    const origin = await startHttp();
    const rule = (paths: string[]) => ({ name: "origin", endpoints: [{ host: "origin.test", port: origin.port, protocol: "http", allowPrivate: LOOPBACK, rules: [{ methods: ["GET"], paths }] }] });
    const holder = new PolicyHolder({ policy: policyOf([rule(["/hold/**", "/old"])]), revision: 1 });
    const { proxy, port } = await startProxy(holder);

    const s = await rawClient(port, cleanups);
    expect(status(await rawRequest(s, `http://origin.test:${origin.port}/old`))).toBe("200");
    const answer = rawRequest(s, `http://origin.test:${origin.port}/hold/x`);
    await expect.poll(() => origin.holding()).toBe(1);
    // The held request reached the origin over the one kept-alive upstream socket.
    expect(origin.accepted).toHaveLength(1);

    holder.replace(policyOf([rule(["/hold/**"])]), 2);
    expect(proxy.revoke()).toEqual({ closed: 0, tunnels: 0, clients: 0, upstream: 0 });
    origin.release();
    const full = await answer;
    expect(full).toMatch(/^HTTP\/1.1 200 [\s\S]*\r\n\r\nfirst\+rest$/);
    // Then, idle, the connection that carried /old is closed (a next request is not answered),
    // and so is the upstream socket.
    expect(await rawRequest(s, `http://origin.test:${origin.port}/old`)).toBe("closed");
    await expect.poll(() => origin.open(), { timeout: 10_000 }).toBe(0);
  });

  it("a request whose lookup spans a new revision is decided under the new one", async () => {
    const origin = await startHttp();
    let answer!: () => void;
    const slow: Resolver = (host) => new Promise((r) => (answer = () => r(host === "slow.test" ? ["127.0.0.1"] : [])));
    const holder = new PolicyHolder({ policy: policyOf([{ name: "slow", endpoints: [{ host: "slow.test", port: origin.port, protocol: "http", allowPrivate: LOOPBACK }] }]), revision: 1 });
    const proxy = createEgressProxy({ policy: holder, logger: silentLogger, onAudit: () => undefined, resolve: slow });
    const { port } = await proxy.listen(0, "127.0.0.1");
    cleanups.push(() => proxy.close(0));

    const s = await rawClient(port, cleanups);
    const pending = rawRequest(s, `http://slow.test:${origin.port}/`);
    await expect.poll(() => typeof answer).toBe("function");
    holder.replace(policyOf([]), 2);
    proxy.revoke();
    answer();
    expect(status(await pending)).toBe("403");
    expect(origin.accepted).toHaveLength(0);
  });
});

describe("lockdown revokes everything", () => {
  it("closes every tunnel, kept-alive and fresh client connection and pooled upstream socket at once", async () => {
    const tlsOrigin = await startTlsEcho();
    const origin = await startHttp();
    const holder = new LockdownPolicyHolder({
      policy: policyOf([
        { name: "tls", endpoints: [{ host: "tls.test", port: tlsOrigin.port, protocol: "https", allowPrivate: LOOPBACK }] },
        { name: "origin", endpoints: [{ host: "origin.test", port: origin.port, protocol: "http", allowPrivate: LOOPBACK }] },
      ]),
      revision: 1,
    });
    const { proxy, port } = await startProxy(holder, () => holder.lockdownReason());

    const tunnel = await tlsTunnel(port, `tls.test:${tlsOrigin.port}`);
    const keptAlive = await rawClient(port, cleanups);
    expect(status(await rawRequest(keptAlive, `http://origin.test:${origin.port}/1`))).toBe("200");
    const fresh = await rawClient(port, cleanups);
    await expect.poll(() => origin.open()).toBe(1);

    holder.lock("test");
    // The policy itself allows all of it: only the lockdown closes it.
    expect(proxy.revoke()).toEqual({ closed: 4, tunnels: 1, clients: 2, upstream: 1 });

    expect(await probe(tunnel, "after")).toBe("closed");
    expect(await rawRequest(keptAlive, `http://origin.test:${origin.port}/2`)).toBe("closed");
    expect(await rawRequest(fresh, `http://origin.test:${origin.port}/3`)).toBe("closed");
    await expect.poll(() => origin.open() + tlsOrigin.open(), { timeout: 10_000 }).toBe(0);
    expect((await connect(port, `tls.test:${tlsOrigin.port}`, cleanups)).status).toBe(403);
  });
});
