// A local user on the host reaches nothing of a sandbox over the network (issue 29, item 1).
// Before, the supervisor's proxy (3128) and health endpoint (9901) listened on its leg on the
// gateway's egress bridge, where the host holds an address: any host user could use the
// sandbox's proxy, with its injected secrets, and read its health. Now the proxy listens on the
// supervisor's sandbox-network address only, health is a Unix socket in a directory of the
// supervisor's uid, and the host has an `unreachable` route for the whole sandbox range.
//
// The attacker is a real unprivileged host account (host-user.ts). Every TCP socket listening
// in the supervisor's and the workload's network namespaces, on every address they hold, is
// tried from the host as that account; each must be refused. Before any connect to an address
// in the sandbox range the test proves the host has no way to send it (`ip route get` fails),
// so no packet can leave the machine. Controls: the same ports answer from the workload, and
// the same probe as the same account connects to a loopback listener on the host.

import { execFile } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DockerDriver } from "../../src/driver/docker/docker-driver.js";
import { EngineClient } from "../../src/driver/docker/engine/client.js";
import { DEFAULT_SANDBOX_SUBNETS } from "../../src/driver/docker/sandbox-subnets.js";
import { ensureGatewayId } from "../../src/home.js";
import { egressNetworkName, networkName } from "../../src/driver/docker/objects.js";
import { cidrContains, parseCidr, parseIp } from "../../src/policy/core.js";
import { DNS_PORT, TRANSPARENT_PORT } from "../../src/protocol/launch.js";
import { addressOfHex, tcpSockets } from "../../src/util/proc-net.js";
import { cli } from "../support/cli-runner.js";
import { startDockerFixture, type DockerFixture } from "../support/docker-fixture.js";
import { eventually, startTestGateway, type TestGateway } from "../support/gateway-fixture.js";
import { HostUsers, runAs } from "../support/host-user.js";
import { getOverUnix } from "../support/net.js";
import { PROBE_TCP, cliExec, engineGet, parseProbe, waitPhase, type ProbeResults, type SandboxJson } from "../support/sandbox-helpers.js";

const run = promisify(execFile);

/** The server the workload runs on all of its addresses. */
const WORKLOAD_PORT = 8000;
/** What a refused connect may end in: refused by the peer, or no route on the host. Never "connected", never "timeout". */
const REFUSED = /^(ECONNREFUSED|EHOSTUNREACH|ENETUNREACH)$/;

interface Target {
  host: string;
  port: number;
}

let fx: DockerFixture;
const accounts = new HostUsers();
let attacker: number;
let sandbox: SandboxJson;
let supPid: number;
let wlPid: number;
let egressIp: string;
let sandboxIps: { supervisor: string; workload: string };
let hostLoopback: Server;

const range = (() => {
  const p = parseCidr(DEFAULT_SANDBOX_SUBNETS);
  if (!p.ok) throw new Error(p.error);
  return p.cidr;
})();
const inSandboxRange = (addr: string): boolean => {
  const ip = parseIp(addr);
  return ip !== null && cidrContains(range, ip);
};

/** Every address a network namespace holds but loopback (`ip -o addr` in it). */
async function addressesOf(pid: number): Promise<string[]> {
  const { stdout } = await run("nsenter", ["-t", String(pid), "-n", "ip", "-o", "addr"]);
  return stdout
    .split("\n")
    .map((l) => /\binet6? ([0-9a-f.:]+)\//.exec(l)?.[1])
    .filter((a): a is string => a !== undefined && a !== "::1" && !a.startsWith("127."));
}

/**
 * Every (address, port) a host user might reach of a namespace: each LISTEN socket of its
 * TCP tables, on its own address, or on every address of the namespace when it listens on
 * all of them. Loopback listeners (Docker's DNS on 127.0.0.11) are the namespace's own.
 */
async function listeningTargets(pid: number): Promise<Target[]> {
  const addresses = await addressesOf(pid);
  const out: Target[] = [];
  for (const s of tcpSockets(`/proc/${pid}/net`).filter((t) => t.state === "0A")) {
    const local = addressOfHex(s.localHex);
    if (local === "0.0.0.0") out.push(...addresses.filter((a) => a.includes(".")).map((host) => ({ host, port: s.localPort })));
    else if (/^[0:]+$/.test(local)) out.push(...addresses.map((host) => ({ host, port: s.localPort })));
    else if (!local.startsWith("127.") && !local.startsWith("0:0:0:0:0:0:0:1") && !local.startsWith("0:0:0:0:0:ffff:7f")) out.push({ host: local, port: s.localPort });
  }
  return out;
}

/** The host sends nothing to this address: its route is `unreachable` (ip route get fails: no route to host). */
async function assertNoRouteFromHost(addr: string): Promise<void> {
  const r = await run("ip", ["route", "get", addr]).then(
    (ok) => ({ code: 0, out: ok.stdout + ok.stderr }),
    (err: unknown) => {
      const e = err as { code?: number; stdout?: string; stderr?: string };
      return { code: e.code ?? -1, out: `${e.stdout ?? ""}${e.stderr ?? ""}` };
    },
  );
  expect({ addr, route: r.out.trim(), routed: r.code === 0 }).toEqual({ addr, route: expect.stringMatching(/No route to host/) as string, routed: false });
}

/** PROBE_TCP as the attacker, from the host; an address in the sandbox range only after its route is proven unreachable. */
async function probeAsAttacker(targets: Target[]): Promise<ProbeResults> {
  for (const t of targets) if (inSandboxRange(t.host)) await assertNoRouteFromHost(t.host);
  return parseProbe(await runAs(attacker, [process.execPath, "-e", PROBE_TCP, JSON.stringify(targets)]));
}

const key = (t: Target): string => `${t.host}:${t.port}`;
/** The probe's answer when every target is refused. */
const allRefused = (targets: Target[]): Record<string, unknown> => Object.fromEntries(targets.map((t) => [key(t), expect.stringMatching(REFUSED)]));

beforeAll(async () => {
  fx = await startDockerFixture({ liveRestore: true, name: "localnet" });
  attacker = await accounts.make("net");
  const created = await fx.t.api("POST", "/v1/sandboxes", { name: "reach", policy: "version: 1\n" });
  if (created.status !== 201) throw new Error(`create: ${JSON.stringify(created.body)}`);
  sandbox = await waitPhase(fx, "reach", "Ready");
  const sup = await engineGet(fx, `/containers/${sandbox.runtime!.supervisor.id}/json`);
  const wl = await engineGet(fx, `/containers/${sandbox.runtime!.workload.id}/json`);
  supPid = sup.State.Pid as number;
  wlPid = wl.State.Pid as number;
  egressIp = sup.NetworkSettings.Networks[egressNetworkName(fx.driver.gatewayId)].IPAddress as string;
  sandboxIps = {
    supervisor: sup.NetworkSettings.Networks[networkName(sandbox.id)].IPAddress as string,
    workload: wl.NetworkSettings.Networks[networkName(sandbox.id)].IPAddress as string,
  };
  // A server of the workload's own on every address it has (as an agent's dev server would).
  const server = `require("net").createServer((s) => s.end("workload\\n")).listen(${WORKLOAD_PORT}, "0.0.0.0")`;
  const detached = await cli(["sandbox", "exec", "--detach", "reach", "--", "node", "-e", server], fx.cliEnv);
  if (detached.code !== 0) throw new Error(`exec --detach: ${detached.stderr}`);
  await eventually(() => (tcpSockets(`/proc/${wlPid}/net`).some((s) => s.state === "0A" && s.localPort === WORKLOAD_PORT) ? true : undefined), 20_000, "the workload's server to listen");
  // The control for the attacker's probe: a listener on the host's loopback.
  hostLoopback = createServer((s) => s.end());
  await new Promise<void>((r) => hostLoopback.listen(0, "127.0.0.1", r));
});

afterAll(async () => {
  await new Promise<void>((r) => (hostLoopback ? hostLoopback.close(() => r()) : r()));
  await accounts.removeAll();
  await fx?.close();
});

describe("a local user on the host reaches nothing of a sandbox over the network", () => {
  it("the supervisor's egress address: 3128 and 9901 are refused (the proxy and health endpoint of before)", async () => {
    expect(inSandboxRange(egressIp)).toBe(false);
    const targets = [3128, 9901].map((port) => ({ host: egressIp, port }));
    const r = await probeAsAttacker(targets);
    expect(r).toEqual(allRefused(targets));
    // Control: the same probe, as the same account, connects where something listens for it.
    const loop = { host: "127.0.0.1", port: (hostLoopback.address() as { port: number }).port };
    expect(await probeAsAttacker([loop])).toEqual({ [key(loop)]: "connected" });
  });

  it("the host has no route into the sandbox range: every address of the sandbox network is unreachable", async () => {
    for (const addr of [sandboxIps.supervisor, sandboxIps.workload]) {
      expect(inSandboxRange(addr)).toBe(true);
      await assertNoRouteFromHost(addr);
    }
  });

  it("every TCP port listening in the supervisor's and the workload's namespaces, on every address they hold, is refused", async () => {
    const targets = [...(await listeningTargets(supPid)), ...(await listeningTargets(wlPid))];
    const explicit = [3128, 9901].flatMap((port) => [egressIp, sandboxIps.supervisor].map((host) => ({ host, port })));
    const all = [...new Map([...targets, ...explicit].map((t) => [key(t), t])).values()];
    // What listens: the proxy and the workload's own server at least.
    expect(targets.map(key)).toEqual(expect.arrayContaining([`${sandboxIps.supervisor}:3128`, `${sandboxIps.workload}:${WORKLOAD_PORT}`]));
    const r = await probeAsAttacker(all);
    expect(r).toEqual(allRefused(all));

    // Control, at the same moment: from the workload, the same ports answer where the
    // sandbox network reaches them (the proxy at its address, the workload's own server).
    const reachable = targets.filter((t) => t.host === sandboxIps.supervisor || t.host === sandboxIps.workload);
    expect(reachable.length).toBeGreaterThanOrEqual(2);
    const fromWorkload = parseProbe(await cliExec(fx, "reach", ["node", "-e", PROBE_TCP, JSON.stringify(reachable)]));
    expect(fromWorkload).toEqual(Object.fromEntries(reachable.map((t) => [key(t), "connected"])));
  });

  it("the supervisor listens on nothing but its proxy and its transparent path (listener and resolver), on its sandbox-network address only", async () => {
    const targets = await listeningTargets(supPid);
    expect(targets.map(key).sort()).toEqual([`${sandboxIps.supervisor}:3128`, `${sandboxIps.supervisor}:${TRANSPARENT_PORT}`, `${sandboxIps.supervisor}:${DNS_PORT}`].sort());
  });
});

describe("the health endpoint is a Unix socket only the gateway reaches", () => {
  const socketPath = (): string => join(fx.cliEnv.SANDGATE_HOME!, "launch", `${sandbox.id}-g${sandbox.generation}`, "run", "health.sock");

  const CONNECT_UNIX = `const s = require("net").connect(process.argv[1]); s.on("connect", () => { console.log("connected"); s.destroy(); }); s.on("error", (e) => console.log(e.code));`;

  it("root (the gateway) reads /healthz through it; the host account is refused (EACCES)", async () => {
    expect(await getOverUnix(socketPath())).toMatchObject({ status: 200, body: { ok: true, sandboxId: sandbox.id, generation: sandbox.generation } });
    const r = await runAs(attacker, [process.execPath, "-e", CONNECT_UNIX, socketPath()]);
    expect(r.stdout.trim()).toBe("EACCES");
    // Control: the same program as root connects.
    expect((await runAs("root", [process.execPath, "-e", CONNECT_UNIX, socketPath()])).stdout.trim()).toBe("connected");
  });

  it("is not in the workload's mount namespace", async () => {
    // No mount of the supervisor's run directory (nor of its launch files): mount points and sources.
    const r = await cliExec(fx, "reach", ["cat", "/proc/self/mountinfo"]);
    expect(r.code).toBe(0);
    const mounts = r.stdout.split("\n").filter((l) => l !== "");
    expect(mounts.length).toBeGreaterThan(0);
    // Of the launch directory, one file only: the workload's resolv.conf (read-only; it names the supervisor).
    const isResolvConf = (l: string): boolean => l.split(" ")[4] === "/etc/resolv.conf";
    expect(mounts.filter((l) => /\/run\/sandgate|health|\/launch\/sbx_/.test(l) && !isResolvConf(l))).toEqual([]);
    expect(mounts.filter(isResolvConf).map((l) => l.split(" ")[5]!.split(",")[0])).toEqual(["ro"]);
    expect((await cliExec(fx, "reach", ["cat", "/etc/resolv.conf"])).stdout.split("\n").filter((l) => l.startsWith("nameserver"))).toEqual([`nameserver ${sandboxIps.supervisor}`]);
    const inWorkload = await cliExec(fx, "reach", ["node", "-e", CONNECT_UNIX, "/run/sandgate/run/health.sock"]);
    expect(inWorkload.stdout.trim()).toBe("ENOENT");
  });
});

describe("a route the host already has for the sandbox range", () => {
  // TEST-NET-3 on loopback: a real route of the host's, and nothing sent there leaves the machine.
  const RANGE = "203.0.113.0/24";
  const show = async (): Promise<string> => (await run("ip", ["route", "show", "exact", RANGE])).stdout.trim();

  it("is never replaced: the runtime is not ready, naming the route and the flag; once it is gone, the gateway installs its own", async () => {
    expect(await show()).toBe("");
    await run("ip", ["route", "add", RANGE, "dev", "lo"]);
    let t: TestGateway | undefined;
    try {
      const home = mkdtempSync(join(tmpdir(), "sg-home-route-"));
      const driver = new DockerDriver({
        engine: new EngineClient({ socketPath: fx.dockerd.socketPath }),
        gatewayId: ensureGatewayId(home),
        launchRoot: join(home, "launch"),
        workspaceRoot: join(fx.dockerd.dir, "ws-route"),
        sandboxSubnets: RANGE,
        log: pino({ level: process.env.SANDGATE_TEST_LOG ?? "silent" }),
      });
      t = await startTestGateway(driver, { homeDir: home });
      const runtime = (await t.api("GET", "/v1/status")).body.runtime as { ready: boolean; problem: string };
      expect(runtime).toEqual({
        ready: false,
        problem: `the host already has a route for the sandbox range ${RANGE} ("${RANGE} dev lo scope link"); the gateway installs "unreachable ${RANGE}" there and never replaces a real route: choose a range the host does not route (gateway start --sandbox-subnets)`,
      });
      const refused = await t.api("POST", "/v1/sandboxes", { name: "routed" });
      expect(refused.status).toBe(503);
      expect(await show()).toBe(`${RANGE} dev lo scope link`);

      // The operator removes it: the runtime's retry installs the gateway's route and is ready.
      await run("ip", ["route", "del", RANGE, "dev", "lo"]);
      await eventually(async () => (((await t!.api("GET", "/v1/status")).body.runtime as { ready: boolean }).ready ? true : undefined), 20_000, "the runtime to be ready");
      expect(await show()).toBe(`unreachable ${RANGE}`);
    } finally {
      await t?.close();
      // This test's range only (the product leaves its route in place).
      for (const type of ["unicast", "unreachable"]) await run("ip", ["route", "del", type, RANGE]).catch(() => undefined);
    }
  });
});
