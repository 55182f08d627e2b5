// WebSocket upgrades through the proxy, checked as requests and then relayed: inside a
// terminated tunnel (the ws client over TLS trusting the sandbox CA, the proxy's own verified
// TLS to a wss origin) and as plain ws:// absolute-form requests. Real `ws` clients and
// servers on loopback; a hand-made client where each byte matters (test/support/ws-raw.ts).
import http from "node:http";
import https from "node:https";
import net from "node:net";
import tls from "node:tls";
import type { AddressInfo } from "node:net";
import WebSocket, { WebSocketServer } from "ws";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { policyFromObject, type Policy } from "../../../src/policy/index.js";
import { PolicyHolder } from "../../../src/supervisor/policy-holder.js";
import { LockdownPolicyHolder } from "../../../src/supervisor/lockdown.js";
import { createEgressProxy, type AuditEvent, type EgressProxy, type Resolver } from "../../../src/supervisor/proxy/index.js";
import { silentLogger } from "../../../src/supervisor/logger.js";
import { LeafCertificates, issueSandboxCa, type CaMaterial } from "../../../src/supervisor/tls/leaf-certs.js";
import { connect, rawClient } from "../../support/proxy-client.js";
import { maskedFrame, readUpgrade, upgradeRequest } from "../../support/ws-raw.js";

const LOOPBACK = ["127.0.0.0/8"];
const cleanups: (() => Promise<void> | void)[] = [];
let sandboxCa: CaMaterial;
let originCa: CaMaterial;

beforeAll(async () => {
  sandboxCa = await issueSandboxCa("sbx_ws");
  originCa = await issueSandboxCa("ws origins");
});

afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function policyOf(rules: { name: string; endpoints: object[] }[]): Policy {
  const r = policyFromObject({ version: 1, network: { rules } });
  if (!r.ok) throw new Error(`test policy invalid: ${r.errors.join("; ")}`);
  return r.policy;
}

const resolve: Resolver = (host) => Promise.resolve(host.endsWith(".test") ? ["127.0.0.1"] : []);

/**
 * A WebSocket echo origin (wss with a leaf for ws.test, or ws); /ws/refuse is answered 400,
 * never upgraded; /ws/hold is upgraded only on release().
 */
async function startWsOrigin(secure: boolean): Promise<{ port: number; upgrades: string[]; open: () => number; release: () => void }> {
  const server = secure ? https.createServer(await new LeafCertificates(originCa).issuePem("ws.test").then((p) => ({ cert: p.certPem, key: p.keyPem }))) : http.createServer();
  const wss = new WebSocketServer({ noServer: true });
  const upgrades: string[] = [];
  server.on("upgrade", (req: http.IncomingMessage, socket: net.Socket, head: Buffer) => {
    socket.on("error", () => undefined);
    upgrades.push(req.url ?? "");
    if (req.url === "/ws/refuse") {
      socket.end("HTTP/1.1 400 Bad Request\r\nContent-Length: 7\r\nConnection: close\r\n\r\nrefused");
      return;
    }
    const accept = (): void => wss.handleUpgrade(req, socket, head, (ws) => ws.on("message", (m: Buffer) => ws.send(`echo ${m.toString()}`)));
    if (req.url === "/ws/hold") held.push(accept);
    else accept();
  });
  const held: (() => void)[] = [];
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  cleanups.push(() => new Promise<void>((r) => {
    for (const c of wss.clients) c.terminate();
    server.closeAllConnections();
    server.close(() => r());
  }));
  return {
    port: (server.address() as AddressInfo).port,
    upgrades,
    open: () => [...wss.clients].filter((c) => c.readyState === WebSocket.OPEN).length,
    release: () => held.splice(0).forEach((accept) => accept()),
  };
}

async function startProxy(holder: PolicyHolder, lockdown?: () => string | null): Promise<{ proxy: EgressProxy; port: number; audits: AuditEvent[] }> {
  const audits: AuditEvent[] = [];
  const proxy = createEgressProxy({
    policy: holder,
    logger: silentLogger,
    onAudit: (e) => audits.push(e),
    resolve,
    tls: new LeafCertificates(sandboxCa),
    upstreamCa: originCa.certPem,
    ...(lockdown === undefined ? {} : { lockdown }),
  });
  const { port } = await proxy.listen(0, "127.0.0.1");
  cleanups.push(() => proxy.close(0));
  return { proxy, port, audits };
}

const terminated = (port: number, paths: string[]) => ({ name: "ws", endpoints: [{ host: "ws.test", port, protocol: "https", allowPrivate: LOOPBACK, rules: [{ methods: ["GET"], paths }] }] });

/** CONNECT, TLS trusting only the sandbox CA (the proxy's leaf), for ws.test. */
async function tlsTunnel(proxyPort: number, originPort: number): Promise<tls.TLSSocket> {
  const c = await connect(proxyPort, `ws.test:${originPort}`, cleanups);
  expect(c.status).toBe(200);
  const t = tls.connect({ socket: c.socket, servername: "ws.test", ca: sandboxCa.certPem });
  t.on("error", () => undefined);
  cleanups.push(() => void t.destroy());
  await new Promise<void>((r) => t.once("secureConnect", () => r()));
  return t;
}

/** A `ws` client over a terminated tunnel: opens, or reports the refusal's status and body. */
async function wsOver(proxyPort: number, originPort: number, path: string): Promise<{ ws: WebSocket; status: 101 } | { status: number; body: string }> {
  const t = await tlsTunnel(proxyPort, originPort);
  const ws = new WebSocket(`wss://ws.test:${originPort}${path}`, { createConnection: () => t });
  ws.on("error", () => undefined);
  cleanups.push(() => ws.terminate());
  return new Promise((r) => {
    ws.once("open", () => r({ ws, status: 101 }));
    ws.once("unexpected-response", (_req, res) => {
      let body = "";
      res.on("data", (d: Buffer) => (body += d.toString()));
      res.on("end", () => r({ status: res.statusCode ?? 0, body }));
    });
  });
}

function next(ws: WebSocket): Promise<string> {
  return new Promise((r) => {
    if (ws.readyState !== WebSocket.OPEN) return r("closed");
    const onMessage = (m: Buffer): void => {
      ws.off("close", onClose);
      r(m.toString());
    };
    const onClose = (): void => {
      ws.off("message", onMessage);
      r("closed");
    };
    ws.once("message", onMessage);
    ws.once("close", onClose);
  });
}

function exchange(ws: WebSocket, text: string): Promise<string> {
  const answer = next(ws);
  if (ws.readyState === WebSocket.OPEN) ws.send(text);
  return answer;
}

describe("WebSocket inside a terminated tunnel", () => {
  it("an allowed Upgrade is relayed over the proxy's verified TLS and echoes; it is audited as the GET it is", async () => {
    const origin = await startWsOrigin(true);
    const { port, audits } = await startProxy(new PolicyHolder({ policy: policyOf([terminated(origin.port, ["/ws/**"])]), revision: 1 }));
    const r = await wsOver(port, origin.port, "/ws/echo?token=x");
    expect(r.status).toBe(101);
    const { ws } = r as { ws: WebSocket };
    expect(await exchange(ws, "hi")).toBe("echo hi");
    expect(await exchange(ws, "again")).toBe("echo again");
    expect(origin.upgrades).toEqual(["/ws/echo?token=x"]);
    expect(audits.at(-1)).toMatchObject({ decision: "allow", protocol: "https", host: "ws.test", method: "GET", path: "/ws/echo", rule: "ws" });
  });

  it("a denied Upgrade is a 403 with the policy body; the origin never sees it", async () => {
    const origin = await startWsOrigin(true);
    const { port } = await startProxy(new PolicyHolder({ policy: policyOf([terminated(origin.port, ["/ws/**"])]), revision: 1 }));
    const r = await wsOver(port, origin.port, "/admin/socket");
    expect(r.status).toBe(403);
    expect(JSON.parse((r as { body: string }).body)).toMatchObject({ error: "policy_denied", reason: "path_not_allowed", method: "GET", path: "/admin/socket" });
    expect(origin.upgrades).toEqual([]);
  });

  it("an origin that refuses the upgrade: its answer is passed on, then the connection closed", async () => {
    const origin = await startWsOrigin(true);
    const { port } = await startProxy(new PolicyHolder({ policy: policyOf([terminated(origin.port, ["/ws/**"])]), revision: 1 }));
    const r = await wsOver(port, origin.port, "/ws/refuse");
    expect(r).toEqual({ status: 400, body: "refused" });
  });

  it("another upgrade (h2c) is refused with 400 naming it, never relayed", async () => {
    const origin = await startWsOrigin(true);
    const { port } = await startProxy(new PolicyHolder({ policy: policyOf([terminated(origin.port, ["/**"])]), revision: 1 }));
    const t = await tlsTunnel(port, origin.port);
    const answer = readUpgrade(t);
    t.write("GET /ws/echo HTTP/1.1\r\nHost: ws.test\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n\r\n");
    const r = await answer;
    expect(r.head).toMatch(/^HTTP\/1.1 400 /);
    expect(JSON.parse(r.body)).toMatchObject({ error: "bad_request", message: 'only GET with "Upgrade: websocket" is relayed, got GET with "h2c"' });
    expect(origin.upgrades).toEqual([]);
  });

  it("frames sent before the 101 (with the request, and while the origin holds it) are held, then reach the origin after it, in order", async () => {
    const origin = await startWsOrigin(true);
    const { port } = await startProxy(new PolicyHolder({ policy: policyOf([terminated(origin.port, ["/ws/**"])]), revision: 1 }));
    const t = await tlsTunnel(port, origin.port);
    const answer = readUpgrade(t, 2);
    t.write(Buffer.concat([Buffer.from(upgradeRequest("/ws/hold", "ws.test")), maskedFrame("early")]));
    await expect.poll(() => origin.upgrades).toEqual(["/ws/hold"]);
    t.write(maskedFrame("later"));
    origin.release();
    const r = await answer;
    expect(r.head).toMatch(/^HTTP\/1.1 101 /);
    expect(r.frames).toEqual(["echo early", "echo later"]);
  });

  it("revocation closes an upgraded WebSocket whose path the new revision no longer allows, though its host still is", async () => {
    const origin = await startWsOrigin(true);
    const holder = new PolicyHolder({ policy: policyOf([terminated(origin.port, ["/ws/**", "/other/**"])]), revision: 1 });
    const { proxy, port } = await startProxy(holder);
    const gone = (await wsOver(port, origin.port, "/ws/echo")) as { ws: WebSocket };
    const kept = (await wsOver(port, origin.port, "/other/echo")) as { ws: WebSocket };
    expect(await exchange(gone.ws, "a")).toBe("echo a");

    holder.replace(policyOf([terminated(origin.port, ["/other/**"])]), 2);
    expect(proxy.revoke()).toEqual({ closed: 1, tunnels: 1, clients: 0, upstream: 0 });
    expect(await exchange(gone.ws, "after")).toBe("closed");
    expect(await exchange(kept.ws, "still")).toBe("echo still");
    await expect.poll(() => origin.open(), { timeout: 10_000 }).toBe(1);
  });

  it("lockdown closes it", async () => {
    const origin = await startWsOrigin(true);
    const holder = new LockdownPolicyHolder({ policy: policyOf([terminated(origin.port, ["/ws/**"])]), revision: 1 });
    const { proxy, port } = await startProxy(holder, () => holder.lockdownReason());
    const r = (await wsOver(port, origin.port, "/ws/echo")) as { ws: WebSocket };
    expect(await exchange(r.ws, "a")).toBe("echo a");
    holder.lock("test");
    expect(proxy.revoke().tunnels).toBe(1);
    expect(await exchange(r.ws, "after")).toBe("closed");
    await expect.poll(() => origin.open(), { timeout: 10_000 }).toBe(0);
  });
});

describe("WebSocket through the plain-http forward proxy (ws://, absolute form)", () => {
  const plain = (port: number, paths: string[]) => ({ name: "ws", endpoints: [{ host: "ws.test", port, protocol: "http", allowPrivate: LOOPBACK, rules: [{ methods: ["GET"], paths }] }] });

  it("allowed: 101 and echo; denied: 403 with the policy body, the origin never sees it", async () => {
    const origin = await startWsOrigin(false);
    const { port, audits } = await startProxy(new PolicyHolder({ policy: policyOf([plain(origin.port, ["/ws/**"])]), revision: 1 }));
    const s = await rawClient(port, cleanups);
    const answer = readUpgrade(s);
    s.write(Buffer.concat([Buffer.from(upgradeRequest(`http://ws.test:${origin.port}/ws/echo`, `ws.test:${origin.port}`)), maskedFrame("plain")]));
    const r = await answer;
    expect(r.head).toMatch(/^HTTP\/1.1 101 /);
    expect(r.head).toMatch(/\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK\+xOo=/i);
    expect(r.frame).toBe("echo plain");
    expect(audits.at(-1)).toMatchObject({ decision: "allow", protocol: "http", method: "GET", path: "/ws/echo" });

    const d = await rawClient(port, cleanups);
    const denied = readUpgrade(d);
    d.write(upgradeRequest(`http://ws.test:${origin.port}/private`, `ws.test:${origin.port}`));
    const refused = await denied;
    expect(refused.head).toMatch(/^HTTP\/1.1 403 /);
    expect(JSON.parse(refused.body)).toMatchObject({ error: "policy_denied", reason: "path_not_allowed", path: "/private" });
    expect(origin.upgrades).toEqual(["/ws/echo"]);
  });

  it("the upgraded connection is registered: revocation closes it", async () => {
    const origin = await startWsOrigin(false);
    const holder = new PolicyHolder({ policy: policyOf([plain(origin.port, ["/ws/**"])]), revision: 1 });
    const { proxy, port } = await startProxy(holder);
    const s = await rawClient(port, cleanups);
    const answer = readUpgrade(s);
    s.write(Buffer.concat([Buffer.from(upgradeRequest(`http://ws.test:${origin.port}/ws/echo`, `ws.test:${origin.port}`)), maskedFrame("x")]));
    expect(await answer).toMatchObject({ frame: "echo x" });
    expect(origin.open()).toBe(1);

    holder.replace(policyOf([plain(origin.port, ["/other"])]), 2);
    expect(proxy.revoke()).toEqual({ closed: 1, tunnels: 1, clients: 0, upstream: 0 });
    await expect.poll(() => s.destroyed || s.readableEnded).toBe(true);
    await expect.poll(() => origin.open(), { timeout: 10_000 }).toBe(0);
  });
});
