// The egress proxy's connection bounds against real loopback servers: a per-sandbox cap on
// the workload's open connections (a CONNECT tunnel counts as its client connection) past
// which a new one is reset at once and the refusals go to the audit trail through the
// supervisor's aggregator (one record, then one with a count); a header timeout and an idle
// timeout for client connections, which never cut a tunnel.
import http from "node:http";
import net from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { policyFromObject } from "../../../src/policy/index.js";
import { PolicyHolder } from "../../../src/supervisor/policy-holder.js";
import { createEgressProxy, type AuditEvent, type EgressProxyOptions } from "../../../src/supervisor/proxy/index.js";
import { AuditAggregator } from "../../../src/supervisor/audit-aggregator.js";
import { silentLogger } from "../../../src/supervisor/logger.js";
import { connect, rawClient, rawRequest } from "../../support/proxy-client.js";
import { eventually } from "../../support/gateway-fixture.js";
import { listenOn } from "../../support/net.js";

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const listen = (server: net.Server): Promise<number> => listenOn(server, cleanups);

/** An origin (http) and an echo server (tcp) on loopback, and a proxy whose policy allows both. */
async function setup(connections: NonNullable<EgressProxyOptions["connections"]>): Promise<{ proxyPort: number; originPort: number; echoPort: number; audits: AuditEvent[]; sent: AuditEvent[] }> {
  const originPort = await listen(http.createServer((_req, res) => res.end("hello")));
  const echo = net.createServer((s) => s.pipe(s));
  const echoSockets = new Set<net.Socket>();
  echo.on("connection", (s) => {
    echoSockets.add(s);
    s.on("close", () => echoSockets.delete(s));
  });
  cleanups.push(() => {
    for (const s of echoSockets) s.destroy();
  });
  const echoPort = await listen(echo);
  const r = policyFromObject({
    version: 1,
    network: {
      rules: [
        {
          name: "local",
          endpoints: [
            { host: "127.0.0.1", port: originPort, protocol: "http", allowPrivate: ["127.0.0.0/8"] },
            { host: "127.0.0.1", port: echoPort, protocol: "tcp", allowPrivate: ["127.0.0.0/8"] },
          ],
        },
      ],
    },
  });
  if (!r.ok) throw new Error(r.errors.join("; "));
  const audits: AuditEvent[] = [];
  const sent: AuditEvent[] = [];
  // The supervisor's path: proxy → aggregator → the control session.
  const aggregator = new AuditAggregator((e) => sent.push(e), { flushMs: 100 });
  cleanups.push(() => aggregator.close());
  const proxy = createEgressProxy({
    policy: new PolicyHolder({ policy: r.policy, revision: 1 }),
    logger: silentLogger,
    onAudit: (e) => {
      audits.push(e);
      aggregator.record(e);
    },
    connections,
  });
  const proxyPort = (await proxy.listen(0, "127.0.0.1")).port;
  cleanups.push(() => proxy.close(0));
  return { proxyPort, originPort, echoPort, audits, sent };
}

/** A connection to the proxy that reports how it ended: reset at once, or closed. */
function attempt(port: number): Promise<"reset" | "closed" | "open"> {
  return new Promise((resolve) => {
    const s = net.connect(port, "127.0.0.1");
    cleanups.push(() => s.destroy());
    let reset = false;
    s.on("error", (e: NodeJS.ErrnoException) => (reset ||= e.code === "ECONNRESET"));
    s.on("close", () => resolve(reset ? "reset" : "closed"));
    // A request the proxy answers tells an admitted connection from a refused one.
    s.on("connect", () => s.write("GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n"));
    s.on("data", () => resolve("open"));
  });
}

const limitRecords = (events: AuditEvent[]): AuditEvent[] => events.filter((e) => e.reason === "connection_limit");

describe("egress proxy: a cap on the workload's open connections", () => {
  it("past the cap a new connection is reset at once; the refusals reach the audit trail as one record, then one with a count", async () => {
    const { proxyPort, echoPort, audits, sent } = await setup({ max: 3, headerTimeoutMs: 60_000, idleTimeoutMs: 60_000 });
    // Three held: two tunnels (a tunnel counts as its client connection) and one kept-alive.
    const t1 = await connect(proxyPort, `127.0.0.1:${echoPort}`, cleanups);
    const t2 = await connect(proxyPort, `127.0.0.1:${echoPort}`, cleanups);
    expect([t1.status, t2.status]).toEqual([200, 200]);
    const kept = await rawClient(proxyPort, cleanups);
    const refusals: string[] = [];
    for (let i = 0; i < 5; i++) refusals.push(await attempt(proxyPort));
    expect(refusals).toEqual(["reset", "reset", "reset", "reset", "reset"]);
    // What was held still works.
    t1.socket.resume();
    const echoed = new Promise<string>((r) => t1.socket.once("data", (b: Buffer) => r(b.toString())));
    t1.socket.write("still here");
    expect(await echoed).toBe("still here");
    expect(await rawRequest(kept, "http://127.0.0.1:1/denied")).toMatch(/^HTTP\/1\.1 403/);

    expect(limitRecords(audits)).toHaveLength(5);
    expect(limitRecords(audits)[0]).toMatchObject({ type: "egress", decision: "deny", reason: "connection_limit", host: "127.0.0.1", port: proxyPort, protocol: "tcp" });
    // Aggregated like repeated denials: the first at once, the other four as one record with a count.
    await eventually(() => (limitRecords(sent).length === 2 ? true : undefined), 10_000, "the aggregated record");
    expect(limitRecords(sent).map((e) => e.count ?? 1)).toEqual([1, 4]);

    // A slot freed is a slot taken.
    t2.socket.destroy();
    await eventually(async () => ((await attempt(proxyPort)) === "open" ? true : undefined), 10_000, "a connection admitted again");
  });
});

describe("egress proxy: header and idle timeouts", () => {
  it("closes a client connection whose request head never ends, and a kept-alive one left idle; a tunnel is neither", async () => {
    const { proxyPort, originPort, echoPort } = await setup({ max: 100, headerTimeoutMs: 300, idleTimeoutMs: 1000 });
    const tunnel = await connect(proxyPort, `127.0.0.1:${echoPort}`, cleanups);
    const slow = await rawClient(proxyPort, cleanups);
    slow.on("error", () => undefined);
    const slowClosed = new Promise<void>((r) => slow.once("close", () => r()));
    const text = "GET http://127.0.0.1/ HTTP/1.1\r\nHost: x\r\nX-Slow: " + "a".repeat(10_000);
    let i = 0;
    const t = setInterval(() => {
      if (slow.destroyed) clearInterval(t);
      else slow.write(text[i++]!);
    }, 40);
    cleanups.push(() => clearInterval(t));
    const kept = await rawClient(proxyPort, cleanups);
    kept.on("error", () => undefined);
    expect(await rawRequest(kept, `http://127.0.0.1:${originPort}/`)).toMatch(/^HTTP\/1\.1 200[^]*hello$/);
    const keptClosed = new Promise<void>((r) => kept.once("close", () => r()));
    await slowClosed;
    await keptClosed;
    // The tunnel, open all along, still carries bytes.
    tunnel.socket.resume();
    const echoed = new Promise<string>((r) => tunnel.socket.once("data", (b: Buffer) => r(b.toString())));
    tunnel.socket.write("ping");
    expect(await echoed).toBe("ping");
  });
});
