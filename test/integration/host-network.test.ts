// What a sandbox's supervisor knows of its host's network, against a private dockerd:
//  - nothing of the host is reachable through an allowed name: a listener on an address of
//    the host (a dummy interface this test creates) is refused with host_address, also for
//    an address the host gains after launch, and for a client with no proxy (the transparent
//    path); named explicitly (allowPrivate), it answers;
//  - names resolve at the host's DNS server (one this test runs on the dummy interface,
//    given as the gateway's --resolver) without Docker: egress keeps working while the
//    daemon is stopped (live-restore), where Docker's embedded DNS is gone.
//
// Addresses: 192.31.196.0/24 (AS112, globally reachable, so not a special-purpose range the
// proxy refuses anyway), only ever on the dummy interface (or a port-less bridge where the
// kernel has no dummy driver): checked to be local before any
// traffic, so nothing leaves this machine. Docker's own DNS forwards to the same test server
// (dockerd --dns), never to the real resolvers. (Not the harness's resolvConf option: that
// runs dockerd in a mount namespace of its own, and a restarted daemon in a fresh one can
// no longer exec into the containers it left running.)

import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createServer, type Server } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TestDnsServer } from "../support/dns-server.js";
import { deleteAllAndCheckMonitors, startDockerFixture, type DockerFixture } from "../support/docker-fixture.js";
import { eventually } from "../support/gateway-fixture.js";
import { PROXY_GET, createReady, execIn, waitPhase } from "../support/recovery-helpers.js";
import { NO_PROXY_ENV } from "../support/sandbox-helpers.js";

const IFACE = `sgtest${randomBytes(3).toString("hex")}`;

/**
 * Four addresses of 192.31.196.0/24 that no interface of this host has: another copy of the
 * suite may run this file at the same time (its DNS server would hold port 53 on a fixed one).
 */
function freeQuad(): string[] {
  const taken = spawnSync("ip", ["-o", "addr", "show"], { encoding: "utf8" }).stdout;
  for (let tries = 0; tries < 100; tries++) {
    const base = 8 + 4 * Math.floor(Math.random() * 60);
    const quad = [0, 1, 2, 3].map((i) => `192.31.196.${base + i}`);
    if (quad.every((a) => !taken.includes(`inet ${a}/`))) return quad;
  }
  throw new Error("no free addresses in 192.31.196.0/24 for the test interface");
}
const [DNS_ADDR, HOST_SVC, LATE, ORIGIN] = freeQuad() as [string, string, string, string];
const SVC_PORT = 18471;
const ORIGIN_PORT = 18480;

const RECORDS = {
  "svc.hostaddr.test": HOST_SVC,
  "svc-named.hostaddr.test": HOST_SVC,
  "late.hostaddr.test": LATE,
  "origin.resolve.test": ORIGIN,
};

let direct: TestDnsServer;
let fx: DockerFixture;
const servers: Server[] = [];

function ip(...args: string[]): void {
  const r = spawnSync("ip", args, { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`ip ${args.join(" ")}: ${r.stderr}`);
}

/** The kernel delivers traffic for `addr` locally (it is on our dummy interface). */
function isLocal(addr: string): boolean {
  const r = spawnSync("ip", ["-4", "route", "get", addr], { encoding: "utf8" });
  return r.status === 0 && /^local /.test(r.stdout) && r.stdout.includes(" dev lo ");
}

function addAddress(addr: string): void {
  ip("addr", "add", `${addr}/32`, "dev", IFACE);
  if (!isLocal(addr)) throw new Error(`${addr} is not local after adding it to ${IFACE}: refusing to send traffic there`);
}

/** An HTTP listener on addr:port that records what reaches it, in order. */
async function listener(addr: string, port: number, seen: string[]): Promise<Server> {
  const srv = createServer((req, res) => {
    seen.push(req.url ?? "");
    res.end(`host service ${req.url ?? ""}`);
  });
  srv.on("connection", () => seen.push("(connection)"));
  await new Promise<void>((resolve, reject) => {
    srv.once("error", reject);
    srv.listen(port, addr, () => resolve());
  });
  servers.push(srv);
  return srv;
}

const proxyGet = async (sandbox: string, url: string): Promise<string> => (await execIn(fx, sandbox, PROXY_GET(url))).stdout.trim();

beforeAll(async () => {
  spawnSync("ip", ["link", "del", IFACE], { stdio: "ignore" });
  // A dummy interface; where the kernel has no dummy driver, a bridge with no ports does
  // the same here: an interface that only carries addresses, with nothing behind it.
  if (spawnSync("ip", ["link", "add", IFACE, "type", "dummy"], { stdio: "ignore" }).status !== 0) ip("link", "add", IFACE, "type", "bridge");
  ip("link", "set", IFACE, "up");
  for (const a of [DNS_ADDR, HOST_SVC, ORIGIN]) addAddress(a);
  direct = await TestDnsServer.start(DNS_ADDR, 53, RECORDS);
  fx = await startDockerFixture({ liveRestore: true, name: "hostnet", extraArgs: ["--dns", DNS_ADDR], resolvers: [`${DNS_ADDR}:53`], hostAddressIntervalMs: 300, service: { recoveryDeadlineMs: 120_000 } });
});

afterAll(async () => {
  try {
    if (fx) await deleteAllAndCheckMonitors(fx);
  } finally {
    await fx?.close();
    for (const s of servers) {
      s.closeAllConnections();
      await new Promise<void>((r) => s.close(() => r()));
    }
    await direct?.close();
    spawnSync("ip", ["link", "del", IFACE], { stdio: "ignore" });
  }
});

const HOST_POLICY = `version: 1
network:
  rules:
    - name: svc
      endpoints:
        - host: svc.hostaddr.test
          port: ${SVC_PORT}
          protocol: http
        - host: late.hostaddr.test
          port: ${SVC_PORT}
          protocol: http
    - name: svc-named
      endpoints:
        - host: svc-named.hostaddr.test
          port: ${SVC_PORT}
          protocol: http
          allowPrivate: ["${HOST_SVC}"]
`;

describe("nothing of the host is reachable through an allowed name", () => {
  it("a name resolving to an address of a host interface is refused (403 host_address); named explicitly it answers", async () => {
    const seen: string[] = [];
    await listener(HOST_SVC, SVC_PORT, seen);
    await createReady(fx, "hostaddr", { policy: HOST_POLICY });

    const refused = await proxyGet("hostaddr", `http://svc.hostaddr.test:${SVC_PORT}/secret`);
    expect(refused).toMatch(/^403 /);
    expect(JSON.parse(refused.slice(4))).toMatchObject({ error: "policy_denied", reason: "host_address", rule: "svc", address: HOST_SVC });
    expect(seen).toEqual([]);
    // The name was resolved (at the host's DNS server), so the refusal is the address check's.
    expect(direct.names()).toContain("svc.hostaddr.test");

    // The same from a client that knows no proxy: the name resolves (the policy names it) to the
    // host's address, the workload dials it, and the transparent path refuses it the same way.
    const noProxy = await execIn(fx, "hostaddr", [...NO_PROXY_ENV, "node", "-e", `require("http").get("http://svc.hostaddr.test:${SVC_PORT}/secret-direct", { agent: false }, (r) => { let b = ""; r.on("data", (d) => (b += d)); r.on("end", () => console.log(r.statusCode + " " + b)); }).on("error", (e) => console.log("ERR " + e.code))`]);
    expect(noProxy.stdout.trim()).toMatch(/^403 /);
    expect(JSON.parse(noProxy.stdout.trim().slice(4))).toMatchObject({ error: "policy_denied", reason: "host_address", rule: "svc", address: HOST_SVC });
    expect(seen).toEqual([]);

    // POSITIVE CONTROL: the same listener, through an endpoint that names its address.
    expect(await proxyGet("hostaddr", `http://svc-named.hostaddr.test:${SVC_PORT}/named`)).toBe("200 host service /named");
    expect(seen).toEqual(["(connection)", "/named"]);
  }, 120_000);

  it("an address the host gains after launch is refused once the gateway re-read its interfaces", async () => {
    await waitPhase(fx, "hostaddr", "Ready");
    addAddress(LATE);
    // Nothing listens on LATE yet: before the supervisor has the new set the answer is a
    // refused connection (502), after it a refusal by the address check (403).
    await eventually(async () => ((await proxyGet("hostaddr", `http://late.hostaddr.test:${SVC_PORT}/`)).startsWith("403 ") ? true : undefined), 30_000, "403 for the new host address");
    const seen: string[] = [];
    await listener(LATE, SVC_PORT, seen);
    const refused = await proxyGet("hostaddr", `http://late.hostaddr.test:${SVC_PORT}/late`);
    expect(JSON.parse(refused.slice(4))).toMatchObject({ reason: "host_address", address: LATE });
    expect(seen).toEqual([]);
  }, 120_000);
});

describe("names resolve without Docker", () => {
  it("egress keeps resolving names (at the host's DNS server) and working while dockerd is stopped", async () => {
    // Everything in one ordered log: requests reaching the origin, questions at the host's
    // DNS server, and the test's own markers for the daemon going down and coming back.
    const events: string[] = [];
    const origin = createServer((req, res) => {
      events.push(`request ${req.url ?? ""}`);
      res.end("ok");
    });
    await new Promise<void>((r) => origin.listen(ORIGIN_PORT, ORIGIN, () => r()));
    servers.push(origin);
    const questionsBefore = (): number => direct.questions.filter((q) => q.name === "origin.resolve.test").length;

    const loop = `const u=new URL(process.env.HTTP_PROXY);let n=0;
      setInterval(()=>{n++;require("http").get({agent:false,host:u.hostname,port:u.port,path:"http://origin.resolve.test:${ORIGIN_PORT}/tick/"+n,timeout:2000},r=>r.resume()).on("error",()=>{}).on("timeout",function(){this.destroy()})},200);`;
    await createReady(fx, "resolve", {
      policy: `version: 1
network:
  rules:
    - name: origin
      endpoints:
        - host: origin.resolve.test
          port: ${ORIGIN_PORT}
          protocol: http
          allowPrivate: ["${ORIGIN}"]
`,
      command: ["node", "-e", loop],
    });
    await eventually(() => (events.some((e) => e.startsWith("request /tick/")) ? true : undefined), 30_000, "ticks at the origin");

    await fx.dockerd.stop("SIGTERM");
    try {
      expect(fx.dockerd.pid).toBeUndefined();
      events.push("dockerd down");
      const asked = questionsBefore();
      // Fresh requests reach the origin, and the name is asked again at the host's server once
      // its cached answer expires (the test server's TTL is 5 s): no Docker in the way.
      await eventually(() => (events.slice(events.indexOf("dockerd down")).filter((e) => e.startsWith("request ")).length >= 5 ? true : undefined), 60_000, "ticks while dockerd is down");
      await eventually(() => (questionsBefore() > asked ? true : undefined), 60_000, "a fresh question at the host's DNS server");
      expect(await fx.dockerd.ping()).toBe(false);
      events.push("dockerd back");
    } finally {
      await fx.dockerd.startAgain();
    }

    const during = events.slice(events.indexOf("dockerd down") + 1, events.indexOf("dockerd back"));
    expect(during.length).toBeGreaterThanOrEqual(5);
    expect(during.every((e) => /^request \/tick\/\d+$/.test(e))).toBe(true);
    try {
      await waitPhase(fx, "resolve", "Ready", 90_000);
    } catch (err) {
      const events = (await fx.t.api("GET", "/v1/sandboxes/resolve/events")).body;
      const sb = (await fx.t.api("GET", "/v1/sandboxes/resolve")).body;
      throw new Error(`${(err as Error).message}\n${JSON.stringify(fx.t.gw.read.boundaryOf(sb.id))}\n${JSON.stringify(events).slice(-600)}\n${JSON.stringify((await fx.t.api("GET", "/v1/status")).body.monitor)}`);
    }
  }, 240_000);
});
