// The control session end to end on loopback: a real TLS supervisor endpoint with a real
// certificate and real Ed25519 launch tokens, the real ControlSession client, and a real
// egress proxy whose decisions must follow what the gateway pushes.
import http from "node:http";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { generateKeyPairSync } from "node:crypto";
import https from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AddressInfo } from "node:net";
import { pino } from "pino";
import WebSocket, { WebSocketServer } from "ws";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { policyFromObject } from "../../../src/policy/index.js";
import type { Policy } from "../../../src/policy/index.js";
import { BoundaryRegistry } from "../../../src/gateway/control/boundary.js";
import type { BoundaryHealth } from "../../../src/gateway/control/boundary.js";
import { LaunchTokens, ensureSigningKey } from "../../../src/gateway/control/launch-tokens.js";
import { startSupervisorEndpoint } from "../../../src/gateway/control/supervisor-endpoint.js";
import type { ExpectedLaunch, SupervisorEndpoint } from "../../../src/gateway/control/supervisor-endpoint.js";
import { ensureEndpointTls, issueEndpointCertificate } from "../../../src/gateway/control/tls.js";
import type { EndpointTls } from "../../../src/gateway/control/tls.js";
import { ControlSession, sessionBackoff } from "../../../src/supervisor/control-session.js";
import { backoffDelay as sharedBackoff } from "../../../src/util/backoff.js";
import { LockdownPolicyHolder, LOCKDOWN_SESSION_LOST } from "../../../src/supervisor/lockdown.js";
import { createEgressProxy } from "../../../src/supervisor/proxy/index.js";
import type { AuditEvent, EgressProxy } from "../../../src/supervisor/proxy/index.js";
import { silentLogger } from "../../../src/supervisor/logger.js";
import type { Logger } from "../../../src/supervisor/logger.js";
import { startSupervisor } from "../../../src/supervisor/supervisor.js";
import { SecretVault } from "../../../src/supervisor/secret-vault.js";
import { SUPERVISOR_PATH, parseSupervisorMessage } from "../../../src/protocol/wire.js";
import type { HeartbeatMessage } from "../../../src/protocol/wire.js";
import { freePort, getOverUnix } from "../../support/net.js";
import { connect, probe, rawClient, rawRequest, status } from "../../support/proxy-client.js";
import net from "node:net";

const GATEWAY_ID = "gw-test";
let stateDir: string;
let tlsId: EndpointTls;
let tokens: LaunchTokens;
let originPort: number;
let origin: http.Server;
const cleanups: (() => Promise<void> | void)[] = [];

beforeAll(async () => {
  stateDir = await mkdtemp(join(tmpdir(), "sandgate-control-"));
  tlsId = await ensureEndpointTls(stateDir);
  tokens = LaunchTokens.open(stateDir, GATEWAY_ID);
  origin = http.createServer((req, res) => res.end(`origin ${req.url ?? ""}`));
  await new Promise<void>((r) => origin.listen(0, "127.0.0.1", r));
  originPort = (origin.address() as AddressInfo).port;
});

afterAll(async () => {
  origin.closeAllConnections();
  await new Promise<void>((r) => origin.close(() => r()));
  await rm(stateDir, { recursive: true, force: true });
});

afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

// ---- helpers ----

/** Polls `probe` until it yields; `timeoutMs` only catches a hang. */
async function waitFor<T>(what: string, probe: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}


function policyOf(network: unknown): Policy {
  const r = policyFromObject({ version: 1, network });
  if (!r.ok) throw new Error(`test policy invalid: ${r.errors.join("; ")}`);
  return r.policy;
}

/** Allows GET on the loopback origin under the given path globs. */
const allowOrigin = (paths: string[] = ["/**"]): Policy =>
  policyOf({
    rules: [{ name: "origin", endpoints: [{ host: "localhost", port: originPort, protocol: "http", allowPrivate: ["127.0.0.0/8"], rules: [{ methods: ["GET"], paths }] }] }],
  });

interface Gateway {
  boundary: BoundaryRegistry;
  endpoint: SupervisorEndpoint;
  logs: Record<string, unknown>[];
  launches: Map<string, ExpectedLaunch>;
  restart(): Promise<void>;
  stop(): Promise<void>;
}

// Timeouts that a test does not exercise are long, so a stalled event loop on a loaded
// machine (gateway and supervisor share this process) cannot end a session by itself.
async function startGatewaySide(opts: { staleMs?: number; idleMs?: number; port?: number; authTimeoutMs?: number; secretValues?: (names: readonly string[]) => Map<string, Buffer> } = {}): Promise<Gateway> {
  const logs: Record<string, unknown>[] = [];
  const log = pino({ level: "info" }, { write: (line: string) => void logs.push(JSON.parse(line) as Record<string, unknown>) });
  const boundary = new BoundaryRegistry({ heartbeatStaleMs: opts.staleMs ?? 1000, sessionIdleMs: opts.idleMs ?? 10_000, log, ...(opts.secretValues === undefined ? {} : { secretValues: opts.secretValues }) });
  const launches = new Map<string, ExpectedLaunch>();
  const start = (port: number): Promise<SupervisorEndpoint> =>
    startSupervisorEndpoint({ host: "127.0.0.1", port, tls: tlsId, tokens, expected: async (id) => launches.get(id) ?? null, boundary, log, authTimeoutMs: opts.authTimeoutMs ?? 10_000 });
  const gw: Gateway = {
    boundary,
    endpoint: await start(opts.port ?? 0),
    logs,
    launches,
    async restart() {
      gw.endpoint = await start(gw.endpoint.address.port);
    },
    async stop() {
      await gw.endpoint.close();
    },
  };
  cleanups.push(async () => {
    boundary.close();
    await gw.endpoint.close();
  });
  return gw;
}

interface SupervisorSide {
  policy: LockdownPolicyHolder;
  proxy: EgressProxy;
  proxyPort: number;
  session: ControlSession;
  audits: AuditEvent[];
  logs: { level: string; msg: string; fields?: Record<string, unknown> }[];
}

function captureLogger(logs: SupervisorSide["logs"]): Logger {
  return {
    info: (msg, fields) => void logs.push({ level: "info", msg, ...(fields === undefined ? {} : { fields }) }),
    warn: (msg, fields) => void logs.push({ level: "warn", msg, ...(fields === undefined ? {} : { fields }) }),
    error: (msg, fields) => void logs.push({ level: "error", msg, ...(fields === undefined ? {} : { fields }) }),
    record: () => undefined,
  };
}

async function startSupervisorSide(
  gw: { endpoint: { url: string } },
  o: {
    sandboxId: string;
    generation: number;
    token: string;
    fingerprint?: string;
    graceMs?: number;
    initial?: { policy: Policy; revision: number };
    url?: string;
    secrets?: SecretVault;
    heartbeatRefreshMs?: number;
    /** Overrides what the session reports of the proxy (default: the real proxy's state). */
    proxyListening?: () => boolean;
    /** What the session calls to close connections a new revision no longer allows (default: none closed). */
    revoke?: () => number;
  },
): Promise<SupervisorSide> {
  const policy = new LockdownPolicyHolder(o.initial);
  const audits: AuditEvent[] = [];
  const logs: SupervisorSide["logs"] = [];
  const logger = captureLogger(logs);
  const proxy = createEgressProxy({
    policy,
    logger: silentLogger,
    ...(o.secrets === undefined ? {} : { credentials: o.secrets }),
    onAudit: (e) => {
      audits.push(e);
      // Audit events only happen after `session` below exists.
      session.audit(e);
    },
  });
  const proxyPort = (await proxy.listen(0, "127.0.0.1")).port;
  const session = new ControlSession({
    url: o.url ?? gw.endpoint.url,
    fingerprint: o.fingerprint ?? tlsId.fingerprint,
    token: () => Promise.resolve(o.token),
    sandboxId: o.sandboxId,
    generation: o.generation,
    policy,
    proxyListening: o.proxyListening ?? (() => proxy.isListening()),
    logger,
    graceMs: o.graceMs ?? 500,
    heartbeatMs: 100,
    ...(o.heartbeatRefreshMs === undefined ? {} : { heartbeatRefreshMs: o.heartbeatRefreshMs }),
    deadAfterMs: 10_000,
    backoffInitialMs: 50,
    backoffMaxMs: 200,
    connectTimeoutMs: 2000,
    ...(o.secrets === undefined ? {} : { secrets: o.secrets }),
    ...(o.revoke === undefined ? {} : { revoke: o.revoke }),
  });
  cleanups.push(async () => {
    await session.stop();
    await proxy.close(0);
  });
  session.start();
  return { policy, proxy, proxyPort, session, audits, logs };
}

function proxyGet(proxyPort: number, path: string): Promise<{ status: number; body: Record<string, unknown> | string }> {
  return new Promise((resolve, reject) => {
    http
      .get({ host: "127.0.0.1", port: proxyPort, path: `http://localhost:${String(originPort)}${path}`, agent: false }, (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (text += c));
        res.on("end", () => {
          let body: Record<string, unknown> | string = text;
          if ((res.headers["content-type"] ?? "").includes("json")) body = JSON.parse(text) as Record<string, unknown>;
          resolve({ status: res.statusCode ?? 0, body });
        });
      })
      .on("error", reject);
  });
}

async function launch(gw: Gateway, sandboxId: string, generation: number, nonce: string, desired?: { policy: Policy; revision: number }): Promise<string> {
  gw.launches.set(sandboxId, { generation, nonce });
  if (desired !== undefined) gw.boundary.setDesired(sandboxId, generation, desired.policy, desired.revision);
  return (await tokens.mint({ sandboxId, generation, nonce })).token;
}

const healthy = (gw: Gateway, id: string): Promise<BoundaryHealth> => waitFor(`${id} healthy`, () => (gw.boundary.health(id).healthy ? gw.boundary.health(id) : undefined));

function refusalLogs(gw: Gateway, reason: string): Record<string, unknown>[] {
  return gw.logs.filter((l) => l.event === "supervisor_session_refused" && l.reason === reason);
}

// ---- tests ----

describe("control session: handshake, push, ack, heartbeats", () => {
  it("authenticates, pushes the desired revision, and reports healthy once acked with fresh heartbeats", async () => {
    const gw = await startGatewaySide();
    const token = await launch(gw, "sb-a", 3, "nonce-a", { policy: allowOrigin(["/ok/**"]), revision: 7 });
    const changes: BoundaryHealth[] = [];
    gw.boundary.onChange((h) => changes.push(h));
    const gatewayAudits: { sandboxId: string; decision: string; path?: string }[] = [];
    gw.boundary.onAudit((sandboxId, _gen, e) => gatewayAudits.push({ sandboxId, decision: e.decision, ...(e.path === undefined ? {} : { path: e.path }) }));

    // The supervisor starts with its launch policy (revision 1, allows nothing) and gets 7 pushed.
    const sup = await startSupervisorSide(gw, { sandboxId: "sb-a", generation: 3, token, initial: { policy: policyOf({ rules: [] }), revision: 1 } });
    const h = await healthy(gw, "sb-a");
    expect(h).toMatchObject({ session: "up", generation: 3, enforcedRevision: 7, desiredRevision: 7, proxy: "listening", lockdown: false, problem: null });
    expect(sup.policy.current()?.revision).toBe(7);
    expect(sup.session.status()).toMatchObject({ state: "up", lockdown: null });
    expect(gw.endpoint.stats()).toMatchObject({ accepted: 1, refused: {}, malformed: 0 });

    // Heartbeats keep arriving (every 100 ms here).
    const first = gw.boundary.health("sb-a").lastHeartbeatAt;
    await waitFor("a later heartbeat", () => gw.boundary.health("sb-a").lastHeartbeatAt !== first);

    // The pushed policy is what the proxy enforces; audit events reach the gateway.
    expect((await proxyGet(sup.proxyPort, "/ok/1")).status).toBe(200);
    expect((await proxyGet(sup.proxyPort, "/nope")).status).toBe(403);
    await waitFor("audits at the gateway", () => gatewayAudits.length >= 2);
    expect(gatewayAudits).toEqual([
      { sandboxId: "sb-a", decision: "allow", path: "/ok/1" },
      { sandboxId: "sb-a", decision: "deny", path: "/nope" },
    ]);
    expect(changes.some((c) => c.healthy && c.enforcedRevision === 7)).toBe(true);
  });

  it("hot-replaces the policy: the running proxy changes what it allows, and waitForRevision resolves on the ack", async () => {
    const gw = await startGatewaySide();
    const token = await launch(gw, "sb-hot", 1, "n-hot", { policy: allowOrigin(["/a/**"]), revision: 1 });
    const sup = await startSupervisorSide(gw, { sandboxId: "sb-hot", generation: 1, token });
    await healthy(gw, "sb-hot");
    expect((await proxyGet(sup.proxyPort, "/a/x")).status).toBe(200);
    expect((await proxyGet(sup.proxyPort, "/b/x")).status).toBe(403);

    expect(gw.boundary.setDesired("sb-hot", 1, allowOrigin(["/b/**"]), 2)).toBe(true);
    expect(gw.boundary.health("sb-hot")).toMatchObject({ healthy: false, desiredRevision: 2 });
    const waited = await gw.boundary.waitForRevision("sb-hot", 2, 30_000);
    expect(waited.reached).toBe(true);
    expect(waited.health).toMatchObject({ enforcedRevision: 2, desiredRevision: 2 });

    const a = await proxyGet(sup.proxyPort, "/a/x");
    expect(a.status).toBe(403);
    expect(a.body).toMatchObject({ error: "policy_denied", reason: "path_not_allowed" });
    expect((await proxyGet(sup.proxyPort, "/b/x")).status).toBe(200);
    // Same proxy instance all along.
    expect(sup.proxy.isListening()).toBe(true);

    // An older revision in the same generation is ignored by the gateway; waiting for a revision nobody pushes times out.
    expect(gw.boundary.setDesired("sb-hot", 1, allowOrigin(["/a/**"]), 1)).toBe(false);
    const never = await gw.boundary.waitForRevision("sb-hot", 5, 200);
    expect(never.reached).toBe(false);
  });
});

describe("control session: the closed count of a revision", () => {
  it("a re-push of the revision the supervisor holds (a new session) reports what applying it closed, not 0", async () => {
    const gw = await startGatewaySide();
    const token = await launch(gw, "sb-rp", 1, "n-rp", { policy: allowOrigin(["/a/**"]), revision: 1 });
    let toClose = 0;
    const sup = await startSupervisorSide(gw, {
      sandboxId: "sb-rp",
      generation: 1,
      token,
      graceMs: 60_000,
      revoke: () => {
        const n = toClose;
        toClose = 0;
        return n;
      },
    });
    await healthy(gw, "sb-rp");
    // Revision 2 no longer allows two open connections: closed when it is applied.
    toClose = 2;
    expect(gw.boundary.setDesired("sb-rp", 1, allowOrigin(["/b/**"]), 2)).toBe(true);
    expect(await gw.boundary.waitForRevision("sb-rp", 2, 30_000)).toMatchObject({ reached: true, connectionsClosed: 2 });
    // The session ends and a new one begins; the gateway pushes revision 2 again, which closes nothing new.
    const pushes = (): number => sup.logs.filter((l) => l.msg === "policy pushed" && l.fields?.revision === 2).length;
    await gw.stop();
    await gw.restart();
    await waitFor("revision 2 pushed again over a new session", () => (pushes() >= 2 ? true : undefined));
    const again = await waitFor("the re-push's ack at the gateway", async () => {
      const w = await gw.boundary.waitForRevision("sb-rp", 2, 1000);
      return w.reached && w.connectionsClosed !== null ? w : undefined;
    });
    expect(again.connectionsClosed).toBe(2);
  });
});

describe("control session: refusals", () => {
  /** Runs a supervisor until its first refused attempt; returns the close text it saw. */
  async function refusedAttempt(gw: Gateway, o: { sandboxId: string; generation: number; token: string }): Promise<string> {
    const sup = await startSupervisorSide(gw, { ...o, graceMs: 60_000 });
    const err = await waitFor("a refused attempt", () => {
      const e = sup.session.status().lastError;
      return e !== null && e.startsWith("closed 44") ? e : undefined;
    });
    await sup.session.stop();
    return err;
  }

  it("refuses a forged token (valid format, signed by another key)", async () => {
    const gw = await startGatewaySide();
    await launch(gw, "sb-f", 1, "n-f");
    const forger = new LaunchTokens(generateKeyPairSync("ed25519").privateKey, GATEWAY_ID);
    const forged = (await forger.mint({ sandboxId: "sb-f", generation: 1, nonce: "n-f" })).token;
    expect(await refusedAttempt(gw, { sandboxId: "sb-f", generation: 1, token: forged })).toBe("closed 4401 bad_signature");
    expect(refusalLogs(gw, "bad_signature")[0]).toMatchObject({ level: 40, sandboxId: "sb-f", msg: "supervisor session refused" });
    expect(gw.endpoint.stats().refused.bad_signature).toBeGreaterThanOrEqual(1);
    expect(gw.endpoint.stats().accepted).toBe(0);
    expect(gw.boundary.health("sb-f").session).toBe("down");
  });

  it("refuses a token of another sandbox", async () => {
    const gw = await startGatewaySide();
    await launch(gw, "sb-mine", 1, "n-mine");
    const other = await launch(gw, "sb-other", 1, "n-other");
    expect(await refusedAttempt(gw, { sandboxId: "sb-mine", generation: 1, token: other })).toBe("closed 4401 sandbox_mismatch");
    expect(refusalLogs(gw, "sandbox_mismatch")).not.toHaveLength(0);
    expect(gw.boundary.health("sb-mine").session).toBe("down");
    expect(gw.boundary.health("sb-other").session).toBe("down");
  });

  it("refuses a token of an older generation, and of another (newer) generation", async () => {
    const gw = await startGatewaySide();
    const old = await launch(gw, "sb-g", 1, "n-g1");
    await launch(gw, "sb-g", 2, "n-g2");
    expect(await refusedAttempt(gw, { sandboxId: "sb-g", generation: 1, token: old })).toBe("closed 4401 stale_generation");
    const future = (await tokens.mint({ sandboxId: "sb-g", generation: 5, nonce: "n-g2" })).token;
    expect(await refusedAttempt(gw, { sandboxId: "sb-g", generation: 5, token: future })).toBe("closed 4401 generation_mismatch");
    expect(gw.endpoint.stats().refused).toMatchObject({ stale_generation: expect.any(Number) as number, generation_mismatch: expect.any(Number) as number });
  });

  it("refuses an expired token", async () => {
    const gw = await startGatewaySide();
    await launch(gw, "sb-e", 1, "n-e");
    // Minted 31 days ago with the default 30-day lifetime, by the gateway's own key.
    const past = new LaunchTokens(ensureSigningKey(stateDir), GATEWAY_ID, { now: () => Date.now() - 31 * 24 * 3600_000 });
    const expired = (await past.mint({ sandboxId: "sb-e", generation: 1, nonce: "n-e" })).token;
    expect(await refusedAttempt(gw, { sandboxId: "sb-e", generation: 1, token: expired })).toBe("closed 4401 expired");
    expect(refusalLogs(gw, "expired")).not.toHaveLength(0);
  });

  it("refuses a wrong nonce and a sandbox with no current launch", async () => {
    const gw = await startGatewaySide();
    await launch(gw, "sb-n", 4, "the-real-nonce");
    const wrong = (await tokens.mint({ sandboxId: "sb-n", generation: 4, nonce: "a-guess" })).token;
    expect(await refusedAttempt(gw, { sandboxId: "sb-n", generation: 4, token: wrong })).toBe("closed 4401 nonce_mismatch");
    const ghost = (await tokens.mint({ sandboxId: "sb-ghost", generation: 1, nonce: "x" })).token;
    expect(await refusedAttempt(gw, { sandboxId: "sb-ghost", generation: 1, token: ghost })).toBe("closed 4401 unknown_sandbox");
    expect(refusalLogs(gw, "nonce_mismatch")).not.toHaveLength(0);
    expect(refusalLogs(gw, "unknown_sandbox")).not.toHaveLength(0);
    // A wrong nonce is a warning; a launch the gateway let go (a supervisor redialling while its
    // sandbox is deleted) is expected, and only information (pino: warn 40, info 30).
    expect(refusalLogs(gw, "nonce_mismatch").map((l) => l.level)).toEqual(refusalLogs(gw, "nonce_mismatch").map(() => 40));
    expect(refusalLogs(gw, "unknown_sandbox").map((l) => l.level)).toEqual(refusalLogs(gw, "unknown_sandbox").map(() => 30));
  });

  it("refuses a second concurrent session for the same launch and keeps the established one", async () => {
    const gw = await startGatewaySide();
    const token = await launch(gw, "sb-dup", 1, "n-dup", { policy: allowOrigin(), revision: 1 });
    const first = await startSupervisorSide(gw, { sandboxId: "sb-dup", generation: 1, token });
    await healthy(gw, "sb-dup");
    const acceptedBefore = gw.endpoint.stats().accepted;

    expect(await refusedAttempt(gw, { sandboxId: "sb-dup", generation: 1, token })).toBe("closed 4409 duplicate_session");
    expect(refusalLogs(gw, "duplicate_session")[0]).toMatchObject({ sandboxId: "sb-dup", generation: 1 });
    expect(gw.endpoint.stats().accepted).toBe(acceptedBefore);
    // The established session is untouched and still heartbeating.
    expect(first.session.status().state).toBe("up");
    const hb = gw.boundary.health("sb-dup").lastHeartbeatAt;
    await waitFor("heartbeat after the refusal", () => gw.boundary.health("sb-dup").lastHeartbeatAt !== hb);
    expect(gw.boundary.health("sb-dup").healthy).toBe(true);
  });

  it("refuses a connection that does not authenticate in time, or opens with something other than hello", async () => {
    const gw = await startGatewaySide({ authTimeoutMs: 1000 });
    const silent = new WebSocket(gw.endpoint.url, { rejectUnauthorized: false });
    const closed = new Promise<number>((r) => silent.once("close", (code) => r(code)));
    expect(await closed).toBe(4408);
    expect(gw.endpoint.stats().refused).toEqual({ auth_timeout: 1 });
    // On a gateway whose auth timeout cannot fire first, however slow the machine.
    const patient = await startGatewaySide();
    const rude = new WebSocket(patient.endpoint.url, { rejectUnauthorized: false });
    rude.once("open", () => rude.send(JSON.stringify({ type: "heartbeat", enforcedRevision: 1, proxy: "listening", lockdown: false, auditDropped: 0 })));
    expect(await new Promise<number>((r) => rude.once("close", (code) => r(code)))).toBe(4400);
    expect(patient.endpoint.stats().refused).toEqual({ malformed_hello: 1 });
  });
});

describe("control session: certificate pinning", () => {
  it("refuses to talk to a gateway whose certificate does not match the pin: the token is never sent", async () => {
    // An impostor endpoint with its own certificate, recording anything a client sends.
    const impostorTls = await issueEndpointCertificate();
    const received: string[] = [];
    const server = https.createServer({ cert: impostorTls.certPem, key: impostorTls.keyPem });
    const wss = new WebSocketServer({ server, path: SUPERVISOR_PATH });
    let connections = 0;
    let closedConnections = 0;
    wss.on("connection", (ws) => {
      connections++;
      ws.on("message", (d: Buffer) => received.push(d.toString("utf8")));
      ws.on("close", () => closedConnections++);
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    cleanups.push(() => new Promise<void>((r) => { wss.close(); server.closeAllConnections(); server.close(() => r()); }));
    const url = `wss://127.0.0.1:${String((server.address() as AddressInfo).port)}${SUPERVISOR_PATH}`;

    const token = (await tokens.mint({ sandboxId: "sb-pin", generation: 1, nonce: "n-pin" })).token;
    const sup = await startSupervisorSide({ endpoint: { url } }, { sandboxId: "sb-pin", generation: 1, token, fingerprint: tlsId.fingerprint });
    await waitFor("a pin mismatch", () => sup.session.status().lastError === "gateway certificate does not match the pinned fingerprint");
    await waitFor("a retry", () => sup.session.status().attempts >= 2);
    // Anything the client sent on a connection arrives before the impostor sees it close.
    await waitFor("the impostor to see a connection close", () => closedConnections >= 1);
    expect(received).toEqual([]);
    expect(sup.session.status().state).not.toBe("up");
    expect(sup.logs.some((l) => l.level === "error" && l.msg.includes("pinned fingerprint") && l.fields?.presented === impostorTls.fingerprint)).toBe(true);
    // The TLS + WebSocket handshake did happen: the refusal was the client's own decision.
    expect(connections).toBeGreaterThanOrEqual(1);
  });

  it("closes the session on a malformed message from the gateway", async () => {
    // A gateway-side peer with the real certificate that answers hello with garbage.
    const server = https.createServer({ cert: tlsId.certPem, key: tlsId.keyPem });
    const wss = new WebSocketServer({ server, path: SUPERVISOR_PATH });
    const closes: number[] = [];
    wss.on("connection", (ws) => {
      ws.once("message", () => {
        ws.send(JSON.stringify({ type: "welcome", sessionId: "s", sandboxId: "sb-mal", generation: 1 }));
        ws.send(JSON.stringify({ type: "policy", revision: "seven", policy: {} }));
      });
      ws.on("close", (code) => closes.push(code));
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    cleanups.push(() => new Promise<void>((r) => { wss.close(); server.closeAllConnections(); server.close(() => r()); }));
    const url = `wss://127.0.0.1:${String((server.address() as AddressInfo).port)}${SUPERVISOR_PATH}`;
    const initial = { policy: allowOrigin(), revision: 3 };
    const sup = await startSupervisorSide({ endpoint: { url } }, { sandboxId: "sb-mal", generation: 1, token: "t", initial, graceMs: 60_000 });
    await waitFor("the supervisor closing with 4400", () => closes.includes(4400));
    expect(sup.session.status().lastError).toMatch(/^protocol error: revision/);
    // Nothing from the malformed push was applied.
    expect(sup.policy.current()?.revision).toBe(3);
  });
});

describe("control session: fail closed when the gateway is gone", () => {
  it("denies all egress after the grace period, then re-authenticates, gets the desired revision re-pushed and allows again", async () => {
    const gw = await startGatewaySide();
    const token = await launch(gw, "sb-k", 2, "n-k", { policy: allowOrigin(), revision: 4 });
    // A grace period no single loopback request outlasts, even on a loaded machine.
    const sup = await startSupervisorSide(gw, { sandboxId: "sb-k", generation: 2, token, graceMs: 3000 });
    await healthy(gw, "sb-k");
    expect((await proxyGet(sup.proxyPort, "/before")).status).toBe(200);

    await gw.stop();
    await waitFor("session down", () => sup.session.status().state !== "up");
    await waitFor("session down at the gateway", () => gw.boundary.health("sb-k").session === "down");
    expect(gw.boundary.health("sb-k")).toMatchObject({ session: "down", healthy: false });
    // Within the grace period the last confirmed policy still applies: not locked at once.
    expect((await proxyGet(sup.proxyPort, "/within-grace")).status).toBe(200);

    await waitFor("lockdown", () => sup.session.status().lockdown === LOCKDOWN_SESSION_LOST);
    // In that order: the session was lost, then (after the allowed request) the lockdown.
    const lost = sup.logs.findIndex((l) => l.msg === "control session lost");
    const locked = sup.logs.findIndex((l) => l.msg.includes("denying all egress"));
    expect(lost).toBeGreaterThanOrEqual(0);
    expect(locked).toBeGreaterThan(lost);
    const denied = await proxyGet(sup.proxyPort, "/after-grace");
    expect(denied.status).toBe(403);
    expect(denied.body).toMatchObject({ error: "policy_denied", reason: "policy_missing" });
    expect(sup.audits.map((a) => `${a.decision} ${a.path ?? ""}`)).toEqual(["allow /before", "allow /within-grace", "deny /after-grace"]);
    expect(sup.audits.at(-1)).toMatchObject({ decision: "deny", reason: "policy_missing", path: "/after-grace" });
    // The policy is held, not lost: it comes back only through the gateway.
    expect(sup.policy.held()?.revision).toBe(4);
    expect(sup.logs.some((l) => l.level === "error" && l.msg.includes("denying all egress"))).toBe(true);

    // While the gateway was down the desired revision moved on.
    gw.boundary.setDesired("sb-k", 2, allowOrigin(["/new/**"]), 5);
    await gw.restart();
    const h = await healthy(gw, "sb-k");
    expect(h).toMatchObject({ enforcedRevision: 5, desiredRevision: 5, lockdown: false });
    expect(sup.session.status()).toMatchObject({ state: "up", lockdown: null });
    expect((await proxyGet(sup.proxyPort, "/new/ok")).status).toBe(200);
    expect((await proxyGet(sup.proxyPort, "/before")).status).toBe(403);
    expect(gw.endpoint.stats().accepted).toBe(1); // the new endpoint instance's count
  });

  it("locks down when it never reaches the gateway at all", async () => {
    const port = await freePort(); // nothing listens there
    const sup = await startSupervisorSide(
      { endpoint: { url: `wss://127.0.0.1:${String(port)}${SUPERVISOR_PATH}` } },
      { sandboxId: "sb-never", generation: 1, token: "t", graceMs: 3000, initial: { policy: allowOrigin(), revision: 1 } },
    );
    expect((await proxyGet(sup.proxyPort, "/early")).status).toBe(200);
    await waitFor("lockdown", () => sup.session.status().lockdown !== null);
    expect((await proxyGet(sup.proxyPort, "/late")).status).toBe(403);
    expect(sup.session.status().attempts).toBeGreaterThan(1);
  });
});

describe("boundary health", () => {
  /** A supervisor driven by hand over a real authenticated session, to stop heartbeats or acks at will. */
  async function handDriven(gw: Gateway, sandboxId: string, token: string): Promise<{ ws: WebSocket; pushes: unknown[]; send: (m: object) => void; closed: Promise<number> }> {
    const ws = new WebSocket(gw.endpoint.url, { rejectUnauthorized: false });
    cleanups.push(() => ws.terminate());
    // Listened for from the start: a close may come before the caller looks.
    const closed = new Promise<number>((r) => ws.once("close", (code) => r(code)));
    const pushes: unknown[] = [];
    ws.on("message", (d: Buffer) => pushes.push(JSON.parse(d.toString("utf8"))));
    await new Promise<void>((r) => ws.once("open", () => r()));
    const send = (m: object): void => ws.send(JSON.stringify(m));
    send({ type: "hello", token, sandboxId, generation: 1, enforcedRevision: null, proxy: "listening" });
    await waitFor("welcome", () => pushes.length >= 1);
    return { ws, pushes, send, closed };
  }
  const beat = (rev: number | null) => ({ type: "heartbeat", enforcedRevision: rev, proxy: "listening", lockdown: false, auditDropped: 0 });

  it("goes unhealthy when heartbeats stop, and when enforced != desired", async () => {
    // Only one heartbeat at a time here: health is read from the change it causes,
    // at that instant, not polled afterwards (by then it may be 300 ms old).
    const gw = await startGatewaySide({ staleMs: 300, idleMs: 60_000 });
    const token = await launch(gw, "sb-h", 1, "n-h", { policy: allowOrigin(), revision: 2 });
    const changes: BoundaryHealth[] = [];
    gw.boundary.onChange((h) => changes.push(h));
    const changeAfter = (mark: number, what: string, ok: (h: BoundaryHealth) => boolean): Promise<BoundaryHealth> =>
      waitFor(what, () => changes.slice(mark).find(ok));
    const peer = await handDriven(gw, "sb-h", token);
    await waitFor("the policy push", () => peer.pushes.length >= 2);
    expect(peer.pushes[1]).toMatchObject({ type: "policy", revision: 2 });

    // Heartbeats alone are not enough: enforcing counts only after an ack.
    peer.send(beat(2));
    await waitFor("the heartbeat to arrive", () => gw.boundary.health("sb-h").lastHeartbeatAt !== null);
    expect(gw.boundary.health("sb-h")).toMatchObject({ session: "up", healthy: false, problem: "policy not acknowledged yet" });
    let mark = changes.length;
    peer.send({ type: "ack", revision: 2, applied: true });
    peer.send(beat(2));
    await changeAfter(mark, "healthy", (h) => h.healthy);

    // Heartbeats stop: stale after 300 ms, and onChange says so without any new message.
    mark = changes.length;
    await changeAfter(mark, "stale", (h) => h.problem === "heartbeat stale");
    expect(gw.boundary.health("sb-h")).toMatchObject({ session: "up", healthy: false });
    mark = changes.length;
    peer.send(beat(2));
    await changeAfter(mark, "healthy again", (h) => h.healthy);

    // A new desired revision that the peer does not apply. Stale first (no beats), so
    // the fresh beat after the ack is a change of its own.
    mark = changes.length;
    gw.boundary.setDesired("sb-h", 1, allowOrigin(["/x"]), 3);
    await waitFor("the second push", () => peer.pushes.length >= 3);
    await changeAfter(mark, "stale again", (x) => x.problem === "heartbeat stale");
    mark = changes.length;
    peer.send({ type: "ack", revision: 2, applied: false });
    peer.send(beat(2));
    const h = await changeAfter(mark, "enforcing the old revision", (x) => x.problem === "enforcing revision 2, want 3");
    expect(h).toMatchObject({ healthy: false, enforcedRevision: 2, desiredRevision: 3 });
    expect((await gw.boundary.waitForRevision("sb-h", 3, 150)).reached).toBe(false);
  });

  it("an ack may carry the closed count; one without it (an older supervisor) still counts, with the count unknown", async () => {
    expect(parseSupervisorMessage(JSON.stringify({ type: "ack", revision: 2, applied: true }))).toMatchObject({ ok: true });
    expect(parseSupervisorMessage(JSON.stringify({ type: "ack", revision: 2, applied: true, closed: 3 }))).toEqual({ ok: true, message: { type: "ack", revision: 2, applied: true, closed: 3 } });
    expect(parseSupervisorMessage(JSON.stringify({ type: "ack", revision: 2, applied: true, closed: -1 }))).toMatchObject({ ok: false });
    expect(parseSupervisorMessage(JSON.stringify({ type: "ack", revision: 2, applied: true, closed: 1.5 }))).toMatchObject({ ok: false });

    const gw = await startGatewaySide({ idleMs: 60_000 });
    const token = await launch(gw, "sb-ack", 1, "n-ack", { policy: allowOrigin(), revision: 2 });
    const peer = await handDriven(gw, "sb-ack", token);
    peer.send({ type: "ack", revision: 2, applied: true });
    peer.send(beat(2));
    expect(await gw.boundary.waitForRevision("sb-ack", 2, 30_000)).toMatchObject({ reached: true, connectionsClosed: null });

    gw.boundary.setDesired("sb-ack", 1, allowOrigin(["/x"]), 3);
    gw.boundary.setDesired("sb-ack", 1, allowOrigin(["/y"]), 4);
    const w3 = gw.boundary.waitForRevision("sb-ack", 3, 30_000);
    const w4 = gw.boundary.waitForRevision("sb-ack", 4, 30_000);
    peer.send({ type: "ack", revision: 3, applied: true, closed: 2 });
    peer.send({ type: "ack", revision: 4, applied: true, closed: 1 });
    peer.send(beat(4));
    expect(await w3).toMatchObject({ reached: true, connectionsClosed: 2 });
    expect(await w4).toMatchObject({ reached: true, connectionsClosed: 1 });
    // Asked after the fact: the ack of that revision still answers.
    expect((await gw.boundary.waitForRevision("sb-ack", 3, 30_000)).connectionsClosed).toBe(2);
  });

  it("closes the session on a malformed message, and disconnect() ends a live session", async () => {
    const gw = await startGatewaySide();
    const token = await launch(gw, "sb-m", 1, "n-m", { policy: allowOrigin(), revision: 1 });
    const peer = await handDriven(gw, "sb-m", token);
    const closed = new Promise<number>((r) => peer.ws.once("close", (code) => r(code)));
    peer.send({ type: "heartbeat", enforcedRevision: "one" });
    expect(await closed).toBe(4400);
    expect(gw.endpoint.stats().malformed).toBe(1);
    expect(gw.logs.some((l) => l.event === "supervisor_message_malformed")).toBe(true);
    expect(gw.boundary.health("sb-m").session).toBe("down");

    const again = await handDriven(gw, "sb-m", token);
    expect(gw.boundary.health("sb-m").session).toBe("up");
    const closed2 = new Promise<number>((r) => again.ws.once("close", (code) => r(code)));
    gw.boundary.disconnect("sb-m", "stopped");
    expect(await closed2).toBe(4410);
    expect(gw.boundary.health("sb-m").session).toBe("down");
  });

  it("closes a silent session after the idle timeout so a reconnecting supervisor can take the slot", async () => {
    const gw = await startGatewaySide({ idleMs: 300 });
    const token = await launch(gw, "sb-i", 1, "n-i", { policy: allowOrigin(), revision: 1 });
    const peer = await handDriven(gw, "sb-i", token);
    expect(await peer.closed).toBe(4411);
    expect(gw.boundary.health("sb-i").session).toBe("down");
  });
});

describe("liveness: pings every beat, the full heartbeat on change or refresh", () => {
  /** Counts what reaches the registry from the endpoint: full heartbeats and pings. */
  function countBeats(gw: Gateway): { heartbeats: HeartbeatMessage[]; pings: () => number } {
    const heartbeats: HeartbeatMessage[] = [];
    let pings = 0;
    const heartbeat = gw.boundary.heartbeat.bind(gw.boundary);
    const alive = gw.boundary.alive.bind(gw.boundary);
    gw.boundary.heartbeat = (link, m) => {
      heartbeats.push(m);
      heartbeat(link, m);
    };
    gw.boundary.alive = (link) => {
      pings++;
      alive(link);
    };
    return { heartbeats, pings: () => pings };
  }

  it("sends the full heartbeat only when what it says changes; pings alone keep the session fresh", async () => {
    const gw = await startGatewaySide();
    const token = await launch(gw, "sb-beat", 1, "n-beat", { policy: allowOrigin(), revision: 2 });
    const seen = countBeats(gw);
    let listening = true;
    await startSupervisorSide(gw, { sandboxId: "sb-beat", generation: 1, token, heartbeatRefreshMs: 600_000, proxyListening: () => listening });
    await healthy(gw, "sb-beat");
    await waitFor("the heartbeat after the ack", () => seen.heartbeats.some((m) => m.enforcedRevision === 2));
    // Ten beats on, nothing changed: pings only, not one more heartbeat.
    const settled = seen.heartbeats.length;
    const from = seen.pings();
    await waitFor("ten more pings", () => seen.pings() >= from + 10);
    expect(seen.heartbeats.length).toBe(settled);
    // The proxy stops listening: the next beat carries it, and the gateway knows.
    listening = false;
    await waitFor("not listening reported", () => (gw.boundary.health("sb-beat").problem === "proxy not listening" ? true : undefined));
    expect(seen.heartbeats.at(-1)).toMatchObject({ proxy: "not_listening" });
    expect(seen.heartbeats.length).toBe(settled + 1);
  });

  it("refreshes the full heartbeat at least every heartbeatRefreshMs", async () => {
    const gw = await startGatewaySide();
    const token = await launch(gw, "sb-refresh", 1, "n-refresh", { policy: allowOrigin(), revision: 2 });
    const seen = countBeats(gw);
    await startSupervisorSide(gw, { sandboxId: "sb-refresh", generation: 1, token, heartbeatRefreshMs: 300 });
    await healthy(gw, "sb-refresh");
    await waitFor("the heartbeat after the ack", () => seen.heartbeats.some((m) => m.enforcedRevision === 2));
    const settled = seen.heartbeats.length;
    await waitFor("a refresh with nothing changed", () => seen.heartbeats.length >= settled + 2);
    expect(seen.heartbeats.slice(settled)).toEqual([expect.objectContaining({ enforcedRevision: 2, proxy: "listening" }), expect.objectContaining({ enforcedRevision: 2, proxy: "listening" })]);
  });

  it("a ping makes a stale session fresh again, without a heartbeat message", async () => {
    const gw = await startGatewaySide({ staleMs: 300, idleMs: 60_000 });
    const token = await launch(gw, "sb-ping", 1, "n-ping", { policy: allowOrigin(), revision: 2 });
    const changes: BoundaryHealth[] = [];
    gw.boundary.onChange((h) => changes.push(h));
    const peer = new WebSocket(gw.endpoint.url, { rejectUnauthorized: false });
    cleanups.push(() => peer.terminate());
    const pushes: { type: string }[] = [];
    peer.on("message", (d: Buffer) => pushes.push(JSON.parse(d.toString("utf8")) as { type: string }));
    await new Promise<void>((r) => peer.once("open", () => r()));
    const send = (m: object): void => peer.send(JSON.stringify(m));
    send({ type: "hello", token, sandboxId: "sb-ping", generation: 1, enforcedRevision: null, proxy: "listening" });
    await waitFor("the policy push", () => pushes.some((m) => m.type === "policy"));
    send({ type: "ack", revision: 2, applied: true });
    send({ type: "heartbeat", enforcedRevision: 2, proxy: "listening", lockdown: false, auditDropped: 0 });
    await waitFor("healthy", () => changes.find((h) => h.healthy));
    let mark = changes.length;
    await waitFor("stale", () => changes.slice(mark).find((h) => h.problem === "heartbeat stale"));
    // A ping, no heartbeat message: alive again.
    mark = changes.length;
    peer.ping();
    const back = await waitFor("healthy after a ping", () => changes.slice(mark).find((h) => h.healthy));
    expect(back).toMatchObject({ session: "up", enforcedRevision: 2, problem: null });
  });
});

describe("supervisor program with a control section", () => {
  it("dials the gateway from its launch config, reports the session on /healthz and enforces the pushed policy", async () => {
    const gw = await startGatewaySide();
    const token = await launch(gw, "sb-prog", 6, "n-prog", { policy: allowOrigin(["/pushed/**"]), revision: 12 });
    const dir = await mkdtemp(join(tmpdir(), "sandgate-launch-"));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    await writeFile(join(dir, "token"), token + "\n", { mode: 0o600 });
    await writeFile(
      join(dir, "launch.json"),
      JSON.stringify({
        sandboxId: "sb-prog",
        generation: 6,
        nonce: "n-prog",
        proxyPort: await freePort(),
        healthSocket: join(dir, "health.sock"),
        policyRevision: 1,
        policy: { version: 1 },
        control: { url: gw.endpoint.url, fingerprint: tlsId.fingerprint, tokenPath: join(dir, "token"), graceMs: 400 },
      }),
    );
    const recorded: object[] = [];
    const sup = await startSupervisor({
      configPath: join(dir, "launch.json"),
      logger: { ...silentLogger, record: (o) => void recorded.push(o) },
      host: "127.0.0.1",
      control: { heartbeatMs: 100, backoffInitialMs: 50, backoffMaxMs: 200 },
    });
    cleanups.push(() => sup.close());
    await healthy(gw, "sb-prog");

    const healthz = async (): Promise<Record<string, unknown>> => {
      const h = await getOverUnix(sup.healthSocket!);
      return { status: h.status, ...h.body };
    };
    expect(await healthz()).toMatchObject({ status: 200, ok: true, session: "up", lockdown: null, policyRevision: 12 });
    expect((await proxyGet(sup.proxyAddress.port, "/pushed/a")).status).toBe(200);

    await gw.stop();
    await waitFor("lockdown", () => sup.control?.status().lockdown === LOCKDOWN_SESSION_LOST);
    // "connecting" or "down": it keeps retrying.
    expect(await healthz()).toMatchObject({ status: 503, ok: false, session: expect.stringMatching(/^(down|connecting)$/) as string, lockdown: LOCKDOWN_SESSION_LOST });
    expect((await proxyGet(sup.proxyAddress.port, "/pushed/a")).status).toBe(403);
    expect(recorded.at(-1)).toMatchObject({ type: "egress", decision: "deny", reason: "lockdown_control_session_lost", lockdown: LOCKDOWN_SESSION_LOST, sandboxId: "sb-prog" });
  });
});

describe("supervisor program: the gateway host's addresses", () => {
  // Loopback stands in for a host address so nothing leaves this machine: 127.0.0.2 and
  // 127.0.0.3 are refused either way (loopback), so what tells the plumbing works is the
  // reason, host_address rather than private_address.
  const names: Record<string, string[]> = { "two.test": ["127.0.0.2"], "three.test": ["127.0.0.3"] };
  const resolve = (host: string): Promise<string[]> => Promise.resolve(names[host] ?? []);
  const policyAllowingNames = {
    rules: [{ name: "names", endpoints: [...["two.test", "three.test"].map((host) => ({ host, port: 80, protocol: "http", allowPrivate: ["127.0.0.1"] }))] }],
  };
  const reasonFor = async (proxyPort: number, host: string): Promise<unknown> =>
    new Promise((resolveReason, reject) => {
      http
        .get({ host: "127.0.0.1", port: proxyPort, path: `http://${host}/`, agent: false }, (res) => {
          let t = "";
          res.setEncoding("utf8");
          res.on("data", (c: string) => (t += c));
          res.on("end", () => resolveReason((JSON.parse(t) as { reason?: unknown }).reason));
        })
        .on("error", reject);
    });

  async function launchFile(extra: Record<string, unknown>): Promise<string> {
    const dir = await mkdtemp(join(tmpdir(), "sandgate-launch-"));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    await writeFile(
      join(dir, "launch.json"),
      JSON.stringify({ sandboxId: "sb-host", generation: 1, nonce: "n-host", proxyPort: await freePort(), policyRevision: 1, policy: { version: 1, network: policyAllowingNames }, ...extra }),
    );
    return dir;
  }

  it("refuses the addresses its launch file names", async () => {
    const dir = await launchFile({ hostAddresses: ["127.0.0.2"] });
    const sup = await startSupervisor({ configPath: join(dir, "launch.json"), logger: silentLogger, host: "127.0.0.1", resolve });
    cleanups.push(() => sup.close());
    expect(await reasonFor(sup.proxyAddress.port, "two.test")).toBe("host_address");
    expect(await reasonFor(sup.proxyAddress.port, "three.test")).toBe("private_address");
  });

  it("takes the gateway's set on every session and each change after", async () => {
    const gw = await startGatewaySide();
    gw.boundary.setHostAddresses(["127.0.0.3"]);
    const token = await launch(gw, "sb-host", 1, "n-host", { policy: policyOf(policyAllowingNames), revision: 2 });
    const dir = await launchFile({});
    await writeFile(join(dir, "token"), token + "\n", { mode: 0o600 });
    const config = JSON.parse(await readFile(join(dir, "launch.json"), "utf8")) as Record<string, unknown>;
    await writeFile(join(dir, "launch.json"), JSON.stringify({ ...config, hostAddresses: ["127.0.0.2"], control: { url: gw.endpoint.url, fingerprint: tlsId.fingerprint, tokenPath: join(dir, "token"), graceMs: 5000 } }));
    const sup = await startSupervisor({ configPath: join(dir, "launch.json"), logger: silentLogger, host: "127.0.0.1", resolve, control: { heartbeatMs: 100, backoffInitialMs: 50, backoffMaxMs: 200 } });
    cleanups.push(() => sup.close());
    // Acked revision 2: the set sent before the policy is in place.
    expect((await gw.boundary.waitForRevision("sb-host", 2, 30_000)).reached).toBe(true);
    expect(await reasonFor(sup.proxyAddress.port, "three.test")).toBe("host_address");
    expect(await reasonFor(sup.proxyAddress.port, "two.test")).toBe("private_address");

    gw.boundary.setHostAddresses(["127.0.0.2"]);
    await waitFor("the new set", async () => (await reasonFor(sup.proxyAddress.port, "two.test")) === "host_address");
    expect(await reasonFor(sup.proxyAddress.port, "three.test")).toBe("private_address");
  });
});

describe("revocation through the control session", () => {
  /** The real supervisor program (its wiring of proxy, policy and session), launched with `policy` pushed as revision 2. */
  async function supervisorWith(gw: Gateway, sandboxId: string, policy: Policy) {
    const token = await launch(gw, sandboxId, 1, `n-${sandboxId}`, { policy, revision: 2 });
    const dir = await mkdtemp(join(tmpdir(), "sandgate-launch-"));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    await writeFile(join(dir, "token"), token, { mode: 0o600 });
    await writeFile(
      join(dir, "launch.json"),
      JSON.stringify({
        sandboxId,
        generation: 1,
        nonce: `n-${sandboxId}`,
        proxyPort: await freePort(),
        policyRevision: 1,
        policy: { version: 1 },
        control: { url: gw.endpoint.url, fingerprint: tlsId.fingerprint, tokenPath: join(dir, "token"), graceMs: 60_000 },
      }),
    );
    const sup = await startSupervisor({ configPath: join(dir, "launch.json"), logger: silentLogger, host: "127.0.0.1", control: { heartbeatMs: 100, backoffInitialMs: 50, backoffMaxMs: 200 } });
    cleanups.push(() => sup.close());
    await healthy(gw, sandboxId);
    return sup;
  }

  async function startEcho(): Promise<number> {
    const sockets = new Set<net.Socket>();
    const server = net.createServer((c) => {
      sockets.add(c);
      c.on("error", () => undefined);
      c.pipe(c);
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    cleanups.push(() => new Promise<void>((r) => {
      for (const c of sockets) c.destroy();
      server.close(() => r());
    }));
    return (server.address() as AddressInfo).port;
  }

  const originAndEcho = (echoPort: number, paths: string[], withEcho: boolean): Policy =>
    policyOf({
      rules: [
        { name: "origin", endpoints: [{ host: "localhost", port: originPort, protocol: "http", allowPrivate: ["127.0.0.0/8"], rules: [{ methods: ["GET"], paths }] }] },
        ...(withEcho ? [{ name: "echo", endpoints: [{ host: "localhost", port: echoPort, protocol: "tcp", allowPrivate: ["127.0.0.0/8"] }] }] : []),
      ],
    });

  it("a new revision closes the tunnel and the kept-alive connection it no longer allows before its ack; the wait reports how many", async () => {
    const gw = await startGatewaySide();
    const echoPort = await startEcho();
    const sup = await supervisorWith(gw, "sb-rev", originAndEcho(echoPort, ["/a/**"], true));
    const proxyPort = sup.proxyAddress.port;

    const tunnel = await connect(proxyPort, `localhost:${echoPort}`, cleanups);
    expect(tunnel.status).toBe(200);
    expect(await probe(tunnel.socket, "ping")).toBe("data:ping");
    const keptAlive = await rawClient(proxyPort, cleanups);
    expect(status(await rawRequest(keptAlive, `http://localhost:${originPort}/a/1`))).toBe("200");

    gw.boundary.setDesired("sb-rev", 1, originAndEcho(echoPort, ["/b/**"], false), 3);
    const waited = await gw.boundary.waitForRevision("sb-rev", 3, 30_000);
    expect(waited.reached).toBe(true);
    // The tunnel, the kept-alive client connection and its pooled upstream socket.
    expect(waited.connectionsClosed).toBe(3);

    // Written after the wait returned: a connection still open would answer.
    expect(await probe(tunnel.socket, "after")).toBe("closed");
    expect(await rawRequest(keptAlive, `http://localhost:${originPort}/a/2`)).toBe("closed");
    expect((await connect(proxyPort, `localhost:${echoPort}`, cleanups)).status).toBe(403);
    expect(status(await rawRequest(await rawClient(proxyPort, cleanups), `http://localhost:${originPort}/a/3`))).toBe("403");
    expect(status(await rawRequest(await rawClient(proxyPort, cleanups), `http://localhost:${originPort}/b/1`))).toBe("200");

    // A revision that takes nothing away closes nothing, and says so.
    const kept = await rawClient(proxyPort, cleanups);
    expect(status(await rawRequest(kept, `http://localhost:${originPort}/b/2`))).toBe("200");
    gw.boundary.setDesired("sb-rev", 1, originAndEcho(echoPort, ["/b/**", "/c/**"], false), 4);
    expect(await gw.boundary.waitForRevision("sb-rev", 4, 30_000)).toMatchObject({ reached: true, connectionsClosed: 0 });
    expect(status(await rawRequest(kept, `http://localhost:${originPort}/c/1`))).toBe("200");
  });

  it("a lockdown ordered by the gateway closes every connection at once", async () => {
    const gw = await startGatewaySide();
    const echoPort = await startEcho();
    const sup = await supervisorWith(gw, "sb-lock", originAndEcho(echoPort, ["/**"], true));
    const proxyPort = sup.proxyAddress.port;
    const tunnel = await connect(proxyPort, `localhost:${echoPort}`, cleanups);
    expect(await probe(tunnel.socket, "ping")).toBe("data:ping");
    const keptAlive = await rawClient(proxyPort, cleanups);
    expect(status(await rawRequest(keptAlive, `http://localhost:${originPort}/1`))).toBe("200");

    gw.boundary.lockdown("sb-lock", "sandbox_stopping");
    await waitFor("the lockdown", () => sup.policy.lockdownReason() !== null);

    expect(await probe(tunnel.socket, "after")).toBe("closed");
    expect(await rawRequest(keptAlive, `http://localhost:${originPort}/2`)).toBe("closed");
    expect((await connect(proxyPort, `localhost:${echoPort}`, cleanups)).status).toBe(403);
  });

  it("a lockdown after the session is lost past the grace period closes every connection", async () => {
    const gw = await startGatewaySide();
    const echoPort = await startEcho();
    const token = await launch(gw, "sb-grace", 1, "n-grace", { policy: originAndEcho(echoPort, ["/**"], true), revision: 2 });
    const dir = await mkdtemp(join(tmpdir(), "sandgate-launch-"));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    await writeFile(join(dir, "token"), token, { mode: 0o600 });
    await writeFile(join(dir, "launch.json"), JSON.stringify({
      sandboxId: "sb-grace", generation: 1, nonce: "n-grace", proxyPort: await freePort(), policyRevision: 1, policy: { version: 1 },
      control: { url: gw.endpoint.url, fingerprint: tlsId.fingerprint, tokenPath: join(dir, "token"), graceMs: 300 },
    }));
    const sup = await startSupervisor({ configPath: join(dir, "launch.json"), logger: silentLogger, host: "127.0.0.1", control: { heartbeatMs: 100, backoffInitialMs: 50, backoffMaxMs: 200 } });
    cleanups.push(() => sup.close());
    await healthy(gw, "sb-grace");
    const tunnel = await connect(sup.proxyAddress.port, `localhost:${echoPort}`, cleanups);
    expect(await probe(tunnel.socket, "ping")).toBe("data:ping");

    await gw.stop();
    await waitFor("the lockdown", () => sup.policy.lockdownReason() === LOCKDOWN_SESSION_LOST);
    expect(await probe(tunnel.socket, "after")).toBe("closed");
  });
});

const backoffDelay = (attempt: number, initialMs: number, maxMs: number, random: () => number): number =>
  sharedBackoff(attempt, random(), sessionBackoff(initialMs, maxMs));

describe("backoff", () => {
  it("grows exponentially, is capped, and is jittered within [cap/2, cap]", () => {
    expect(backoffDelay(0, 100, 10_000, () => 0)).toBe(50);
    expect(backoffDelay(0, 100, 10_000, () => 1)).toBe(100);
    expect(backoffDelay(3, 100, 10_000, () => 1)).toBe(800);
    expect(backoffDelay(50, 100, 10_000, () => 1)).toBe(10_000);
    expect(backoffDelay(50, 100, 10_000, () => 0)).toBe(5000);
  });
});

describe("lockdown ordered by the gateway", () => {
  it("denies all egress at once, and nothing lifts it: not the session coming back, not a re-push of the policy", async () => {
    const gw = await startGatewaySide();
    const token = await launch(gw, "sb-l", 1, "nonce-l", { policy: allowOrigin(["/ok/**"]), revision: 2 });
    const sup = await startSupervisorSide(gw, { sandboxId: "sb-l", generation: 1, token, initial: { policy: policyOf({ rules: [] }), revision: 1 } });
    await healthy(gw, "sb-l");
    expect((await proxyGet(sup.proxyPort, "/ok/1")).status).toBe(200);

    gw.boundary.lockdown("sb-l", "sandbox_failed");
    await waitFor("locked down", () => (sup.policy.lockdownReason() === "gateway_sandbox_failed" ? true : undefined));
    const denied = await proxyGet(sup.proxyPort, "/ok/2");
    expect(denied.status).toBe(403);
    // (This harness's proxy reads only the holder, so a lockdown shows as "no policy".)
    expect(denied.body).toMatchObject({ error: "policy_denied", reason: "policy_missing" });

    // The launch is still admitted here (this fake gateway does not know the sandbox
    // failed): the supervisor reconnects and gets its policy pushed again. Still locked.
    await waitFor("session up again", () => (gw.boundary.health("sb-l").session === "up" && gw.boundary.health("sb-l").enforcedRevision === 2 ? true : undefined));
    expect(sup.policy.lockdownReason()).toBe("gateway_sandbox_failed");
    expect((await proxyGet(sup.proxyPort, "/ok/3")).status).toBe(403);
    expect(gw.boundary.health("sb-l")).toMatchObject({ lockdown: true, healthy: false, problem: "supervisor in lockdown" });
  });
});

describe("secrets over the control session", () => {
  const VALUE = "s3cret-over-the-wire-4b1d";
  const credPolicy = (secret: string): Policy =>
    policyOf({ rules: [{ name: "gh", endpoints: [{ host: "api.test", port: 443, protocol: "https", credentials: [{ secret }] }] }] });

  it("only the secrets the policy references, sent before the policy and acked; a change is pushed and waited for; no value in any log", async () => {
    const store = new Map([["github", Buffer.from(VALUE)], ["unrelated", Buffer.from("not-for-this-sandbox")]]);
    const asked: string[][] = [];
    const gw = await startGatewaySide({
      secretValues: (names) => {
        asked.push([...names]);
        return new Map(names.flatMap((n) => (store.has(n) ? [[n, Buffer.from(store.get(n)!)] as const] : [])));
      },
    });
    const token = await launch(gw, "sb-sec", 1, "n-sec", { policy: credPolicy("github"), revision: 1 });
    const vault = new SecretVault();
    const sup = await startSupervisorSide(gw, { sandboxId: "sb-sec", generation: 1, token, secrets: vault });
    await healthy(gw, "sb-sec");
    // The policy's ack came after the values: enforcing revision 1 means holding them.
    expect(vault.get("github")?.toString()).toBe(VALUE);
    expect(vault.names()).toEqual(["github"]);
    expect(asked[0]).toEqual(["github"]);

    // `secret set` of a referenced secret: a new version reaches the running supervisor, acked.
    store.set("github", Buffer.from(`${VALUE}-v2`));
    const pushes = gw.boundary.secretChanged("github");
    expect(pushes).toEqual([{ sandboxId: "sb-sec", version: expect.any(Number) as number }]);
    expect(await gw.boundary.waitForSecrets("sb-sec", pushes[0]!.version, 30_000)).toBe(true);
    expect(vault.get("github")?.toString()).toBe(`${VALUE}-v2`);
    // A secret this sandbox does not reference is not sent to it.
    expect(gw.boundary.secretChanged("unrelated")).toEqual([]);

    // Deleted: the next set leaves it out and the supervisor drops it.
    store.delete("github");
    const del = gw.boundary.secretChanged("github");
    expect(await gw.boundary.waitForSecrets("sb-sec", del[0]!.version, 30_000)).toBe(true);
    expect(vault.get("github")).toBeUndefined();

    const everything = JSON.stringify(gw.logs) + JSON.stringify(sup.logs);
    expect(everything).toContain("secrets received");
    expect(everything).not.toContain(VALUE);
    expect(everything).not.toContain(Buffer.from(VALUE).toString("base64"));
  });

  it("lockdown drops every value: ordered by the gateway, for good", async () => {
    const gw = await startGatewaySide({ secretValues: (names) => new Map(names.map((n) => [n, Buffer.from(VALUE)])) });
    const token = await launch(gw, "sb-sec-lock", 1, "n-lock", { policy: credPolicy("github"), revision: 1 });
    const vault = new SecretVault();
    const sup = await startSupervisorSide(gw, { sandboxId: "sb-sec-lock", generation: 1, token, secrets: vault });
    await healthy(gw, "sb-sec-lock");
    const held = vault.get("github")!;
    expect(held.toString()).toBe(VALUE);
    gw.boundary.lockdown("sb-sec-lock", "sandbox_stopped");
    await waitFor("the supervisor sealed", () => sup.policy.sealed);
    expect(vault.get("github")).toBeUndefined();
    expect(vault.names()).toEqual([]);
    // The buffer it held is overwritten, not only forgotten.
    expect(held.every((b) => b === 0)).toBe(true);
  });

  it("the grace-period lockdown drops them too; the re-push on reconnect brings them back with the policy", async () => {
    const gw = await startGatewaySide({ secretValues: (names) => new Map(names.map((n) => [n, Buffer.from(VALUE)])) });
    const token = await launch(gw, "sb-sec-grace", 1, "n-grace", { policy: credPolicy("github"), revision: 1 });
    const vault = new SecretVault();
    const sup = await startSupervisorSide(gw, { sandboxId: "sb-sec-grace", generation: 1, token, secrets: vault, graceMs: 300 });
    await healthy(gw, "sb-sec-grace");
    await gw.stop();
    await waitFor("grace lockdown", () => sup.policy.lockdownReason() === LOCKDOWN_SESSION_LOST);
    expect(vault.get("github")).toBeUndefined();
    await gw.restart();
    await healthy(gw, "sb-sec-grace");
    expect(vault.get("github")?.toString()).toBe(VALUE);
  });
});
