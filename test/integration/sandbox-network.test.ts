// The network boundary of a Docker sandbox, probed from inside the workload with
// node scripts run through `sandgate sandbox exec`: the only way out is the
// supervisor (its proxy, and the transparent path that accepts every other TCP
// connection and puts it under the same policy); the Docker daemon, the gateway's
// API and host services are out of reach. Because the transparent path accepts any
// connection, a probe counts a target reached only by its answer (PROBE_REACH) and
// by the target's own count of connections. Every "unreachable" is paired with a
// control that shows the same target answers from a container that is allowed
// to reach it, so a probe that could never connect proves nothing by passing.

import { execFile } from "node:child_process";
import { connect, createServer, type Server } from "node:net";
import { networkInterfaces } from "node:os";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { egressNetworkName, networkName } from "../../src/driver/docker/objects.js";
import { startDockerFixture, type DockerFixture } from "../support/docker-fixture.js";
import { PROBE_REACH, PROBE_TCP, cliExec, docker, engineGet, parseProbe, reachedTargets, refusedBySupervisor, waitPhase, type ProbeResults, type SandboxJson } from "../support/sandbox-helpers.js";

const POLICY = `
version: 1
network:
  rules:
    - name: origin
      endpoints:
        - host: origin1
          port: 8080
          protocol: http
          allowPrivate: ["10.0.0.0/8"]
`;

/** node -e program: GET argv[1] (an absolute URL) through $HTTP_PROXY; prints status, headers, body as JSON. */
const VIA_PROXY = `
const http = require("http");
const proxy = new URL(process.env.HTTP_PROXY);
const target = new URL(process.argv[1]);
const req = http.request({ agent: false, host: proxy.hostname, port: proxy.port, path: target.href, headers: { host: target.host } }, (res) => {
  let body = "";
  res.setEncoding("utf8");
  res.on("data", (d) => (body += d));
  res.on("end", () => console.log(JSON.stringify({ status: res.statusCode, headers: res.headers, body })));
});
req.setTimeout(5000, () => req.destroy(new Error("timeout")));
req.on("error", (e) => console.log(JSON.stringify({ error: e.code || e.message })));
req.end();
`;

interface ProxyAnswer {
  status?: number;
  headers?: Record<string, string>;
  body?: string;
  error?: string;
}

let fx: DockerFixture;
let sandbox: SandboxJson;
let workloadImage: string;
let egressNet: string;
let egressGateway: string;
let internalGateway: string | undefined;
let originIp: string;
let hostAddrs: string[];
let hostService: Server;
let hostServicePort: number;
let hostServiceConnections = 0;

async function inWorkload(script: string, arg: unknown): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return cliExec(fx, "net", ["node", "-e", script, typeof arg === "string" ? arg : JSON.stringify(arg)]);
}

async function probeFromWorkload(targets: { host: string; port: number }[]): Promise<ProbeResults> {
  return parseProbe(await inWorkload(PROBE_REACH, targets));
}

/** The same probe from a throwaway container on the egress network (where the supervisor sits). */
async function probeFromEgress(targets: { host: string; port: number }[]): Promise<ProbeResults> {
  const r = await docker(fx, "run", "--rm", "--network", egressNet, workloadImage, "node", "-e", PROBE_TCP, JSON.stringify(targets));
  return parseProbe(r);
}

/** Connections the stand-in daemons accepted: a workload's reaching one counts here. */
let standInConnections = 0;

function listenAll(port: number): Promise<Server> {
  return new Promise((resolve, reject) => {
    const srv = createServer((sock) => {
      standInConnections++;
      sock.on("error", () => undefined);
      sock.end("HTTP/1.1 200 OK\r\nServer: stand-in-daemon\r\n\r\n");
    });
    srv.once("error", reject);
    srv.listen(port, "0.0.0.0", () => resolve(srv));
  });
}

/**
 * listenAll, waiting while another copy of this suite holds the port (the stand-ins need
 * Docker's fixed ports). Taken one after another, lowest first, so two copies never each
 * hold one and wait for the other; the deadline only catches a port held for good.
 */
async function listenAllWhenFree(ports: number[]): Promise<Server[]> {
  const held: Server[] = [];
  for (const port of [...ports].sort((a, b) => a - b)) {
    const deadline = Date.now() + 300_000;
    for (;;) {
      try {
        held.push(await listenAll(port));
        break;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "EADDRINUSE" || Date.now() > deadline) {
          await Promise.all(held.map((srv) => new Promise<void>((res) => srv.close(() => res()))));
          throw err;
        }
        await new Promise((r) => setTimeout(r, 250));
      }
    }
  }
  return held;
}

function connects(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect({ host, port }, () => {
      s.end();
      resolve(true);
    });
    s.on("error", () => resolve(false));
  });
}

const connectedTargets = (results: ProbeResults): [string, string][] => Object.entries(results).filter(([, r]) => r === "connected");

beforeAll(async () => {
  // A TCP listener of the API besides its socket, so that the probes below have a port to try.
  fx = await startDockerFixture({ liveRestore: true, name: "network", listen: [{ kind: "tcp", host: "127.0.0.1", port: 0 }] });
  workloadImage = fx.driver.imageRefs!.workload.ref;
  egressNet = egressNetworkName(fx.driver.gatewayId);

  const origin = await docker(
    fx, "run", "-d", "--name", "origin1", "--network", egressNet, workloadImage,
    "node", "-e", `require("http").createServer((q, s) => s.end("hello " + q.url)).listen(8080)`,
  );
  if (origin.code !== 0) throw new Error(`origin container: ${origin.stderr}`);
  const oi = await engineGet(fx, "/containers/origin1/json");
  originIp = oi.NetworkSettings.Networks[egressNet].IPAddress as string;

  hostService = createServer((sock) => {
    hostServiceConnections++;
    sock.on("error", () => undefined); // probes hang up at once
    sock.end("host-service\n");
  });
  await new Promise<void>((resolve) => hostService.listen(0, "0.0.0.0", resolve));
  hostServicePort = (hostService.address() as { port: number }).port;

  const created = await fx.t.api("POST", "/v1/sandboxes", { name: "net", policy: POLICY });
  if (created.status !== 201) throw new Error(`create: ${JSON.stringify(created.body)}`);
  sandbox = await waitPhase(fx, "net", "Ready");

  const egress = await engineGet(fx, `/networks/${egressNet}`);
  egressGateway = egress.IPAM.Config[0].Gateway as string;
  const internal = await engineGet(fx, `/networks/${networkName(sandbox.id)}`);
  internalGateway = internal.IPAM.Config?.[0]?.Gateway as string | undefined;
  hostAddrs = Object.values(networkInterfaces())
    .flatMap((list) => list ?? [])
    .filter((a) => a.family === "IPv4")
    .map((a) => a.address);

  // The origin must be listening before the proxy is asked for it.
  for (let i = 0; i < 50; i++) {
    const r = await probeFromEgress([{ host: originIp, port: 8080 }]);
    if (r[`${originIp}:8080`] === "connected") break;
    await new Promise((res) => setTimeout(res, 100));
  }
});

afterAll(async () => {
  await new Promise<void>((resolve) => (hostService ? hostService.close(() => resolve()) : resolve()));
  await fx.close();
});

describe("egress from a Docker sandbox", () => {
  // (Not probed by name: a failed lookup may be forwarded to the host's resolver.)
  it("cannot reach the origin directly by its IP: the transparent path refuses the address the policy does not name", async () => {
    expect(originIp).toMatch(/^10\.\d+\.\d+\.\d+$/);
    const r = await probeFromWorkload([{ host: originIp, port: 8080 }]);
    expect(refusedBySupervisor(r[`${originIp}:8080`]!), r[`${originIp}:8080`]).toBe(true);
    expect(r[`${originIp}:8080`]).not.toContain("hello");
    // Control: the origin answers from the egress network.
    expect(await probeFromEgress([{ host: originIp, port: 8080 }])).toEqual({ [`${originIp}:8080`]: "connected" });
  });

  it("reaches the allowed origin through the supervisor proxy", async () => {
    // The proxy is the supervisor's address on the sandbox's own network: a /28 of the
    // gateway's --sandbox-subnets range (default 198.18.0.0/15), not of Docker's pools.
    const net = await engineGet(fx, `/networks/${networkName(sandbox.id)}`);
    const subnet = net.IPAM.Config[0].Subnet as string;
    expect(subnet).toMatch(/^198\.1[89]\.\d+\.\d+\/28$/);
    const [, proxyIp] = /^http:\/\/(\d+\.\d+\.\d+\.\d+):3128$/.exec(sandbox.runtime!.proxyUrl) ?? [];
    expect(proxyIp?.split(".").slice(0, 3)).toEqual(subnet.split(".").slice(0, 3));
    const first = Number(subnet.split("/")[0]!.split(".")[3]);
    expect(Number(proxyIp!.split(".")[3])).toBeGreaterThan(first);
    expect(Number(proxyIp!.split(".")[3])).toBeLessThan(first + 15);
    const r = await inWorkload(VIA_PROXY, "http://origin1:8080/some/path?q=1");
    expect(r.code).toBe(0);
    const a = JSON.parse(r.stdout) as ProxyAnswer;
    expect(a).toMatchObject({ status: 200, body: "hello /some/path?q=1" });
  });

  it("gets 403 policy_denied from the proxy for hosts the policy does not allow", async () => {
    for (const url of ["http://evil.test/", `http://${originIp}:8080/`, "http://origin1:8081/"]) {
      const r = await inWorkload(VIA_PROXY, url);
      expect(r.code).toBe(0);
      const a = JSON.parse(r.stdout) as ProxyAnswer;
      expect(a.status, url).toBe(403);
      expect(a.headers?.["x-proxy-error"], url).toBe("sandgate-policy");
      expect((JSON.parse(a.body!) as { error: string }).error, url).toBe("policy_denied");
    }
  });

  it("has no Docker socket and no TCP path to a daemon", async () => {
    const sockets = ["/var/run/docker.sock", "/run/docker.sock", fx.dockerd.socketPath, "/run/containerd/containerd.sock"];
    const r = await inWorkload(`console.log(JSON.stringify(JSON.parse(process.argv[1]).map((p) => require("fs").existsSync(p))))`, sockets);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual(sockets.map(() => false));

    // STAND-IN DAEMON: something listening on Docker's TCP ports on every host
    // address, as a daemon started with -H tcp:// would.
    const standIns = await listenAllWhenFree([2375, 2376]);
    try {
      const hosts = [egressGateway, ...(internalGateway ? [internalGateway] : []), ...hostAddrs];
      const targets = hosts.flatMap((host) => [2375, 2376].map((port) => ({ host, port })));
      const before = standInConnections;
      expect(reachedTargets(await probeFromWorkload(targets))).toEqual([]);
      expect(standInConnections).toBe(before);
      // Control: at this moment both ports answer from the egress network.
      expect(connectedTargets(await probeFromEgress([2375, 2376].map((port) => ({ host: egressGateway, port }))))).toHaveLength(2);
    } finally {
      await Promise.all(standIns.map((srv) => new Promise<void>((res) => srv.close(() => res()))));
    }
  });

  it("cannot reach the gateway's API (its socket is not mounted; a TCP listener on loopback) nor its supervisor endpoint (7421 on the egress bridge)", async () => {
    const apiPort = Number(new URL(fx.t.gw.listeners.find((l) => l.startsWith("https://"))!).port);
    const supervisorPort = Number(new URL((await fx.t.api("GET", "/v1/status")).body.supervisorEndpoint.url as string).port);
    expect(supervisorPort).toBe(7421);
    const hosts = [egressGateway, ...(internalGateway ? [internalGateway] : []), ...hostAddrs];
    const targets = hosts.flatMap((host) => [apiPort, supervisorPort].map((port) => ({ host, port })));
    const r = await probeFromWorkload(targets);
    expect(Object.keys(r)).toHaveLength(new Set(targets.map((t) => `${t.host}:${t.port}`)).size);
    expect(reachedTargets(r)).toEqual([]);
    // Controls, at the same moment: the API answers on the host's loopback, the
    // supervisor endpoint from the egress network (where supervisors dial it).
    expect(await connects("127.0.0.1", apiPort)).toBe(true);
    expect(await probeFromEgress([{ host: egressGateway, port: supervisorPort }])).toEqual({ [`${egressGateway}:${supervisorPort}`]: "connected" });
  });

  it("reaches nothing of its supervisor but the proxy; other containers on the egress network reach nothing of it", async () => {
    const sup = await engineGet(fx, `/containers/${sandbox.runtime!.supervisor.id}/json`);
    const internalIp = sup.NetworkSettings.Networks[networkName(sandbox.id)].IPAddress as string;
    const egressIp = sup.NetworkSettings.Networks[egressNet].IPAddress as string;
    const r = await probeFromWorkload([
      { host: internalIp, port: 9901 },
      { host: egressIp, port: 9901 },
      { host: internalIp, port: 3128 },
      { host: egressIp, port: 3128 },
    ]);
    // The proxy answers (its 400 to a request that names no absolute target); health has no TCP port.
    expect(r[`${internalIp}:3128`]).toMatch(/^answer:HTTP\/1\.1 4\d\d /);
    expect(r[`${internalIp}:9901`]).toBe("ECONNREFUSED");
    // The egress leg, addressed from the workload, is just another address: the transparent path refuses it.
    expect(reachedTargets({ [`${egressIp}:9901`]: r[`${egressIp}:9901`]!, [`${egressIp}:3128`]: r[`${egressIp}:3128`]! })).toEqual([]);
    // A container on the egress network (as another sandbox's supervisor is): the supervisor has
    // no listening socket on that leg, and the host refuses to route into the sandbox range
    // (proven first: nothing is sent off the machine).
    const route = await new Promise<string>((resolve) => execFile("ip", ["route", "get", internalIp], (err, out, errOut) => resolve(err ? errOut : out)));
    expect(route).toMatch(/No route to host/);
    expect(await probeFromEgress([{ host: egressIp, port: 3128 }, { host: egressIp, port: 9901 }, { host: internalIp, port: 3128 }])).toEqual({
      [`${egressIp}:3128`]: "ECONNREFUSED",
      [`${egressIp}:9901`]: "ECONNREFUSED",
      [`${internalIp}:3128`]: "EHOSTUNREACH",
    });
  });

  it("cannot reach a host service listening on 0.0.0.0, which a container on the egress network can", async () => {
    expect(egressGateway).toMatch(/^10\.\d+\.\d+\.\d+$/);
    const hosts = [egressGateway, ...(internalGateway ? [internalGateway] : []), ...hostAddrs];
    const before = hostServiceConnections;
    const r = await probeFromWorkload(hosts.map((host) => ({ host, port: hostServicePort })));
    expect(reachedTargets(r)).toEqual([]);
    for (const a of Object.values(r)) expect(a).not.toContain("host-service");
    expect(hostServiceConnections).toBe(before);

    // Control: the same address and port answer from the egress network.
    const control = await probeFromEgress([{ host: egressGateway, port: hostServicePort }]);
    expect(control).toEqual({ [`${egressGateway}:${hostServicePort}`]: "connected" });
    expect(hostServiceConnections).toBeGreaterThan(before);
  });
  it("its only resolver is its supervisor: the allowed name resolves, any other does not exist, at once", async () => {
    const conf = await cliExec(fx, "net", ["cat", "/etc/resolv.conf"]);
    const supervisorIp = new URL(sandbox.runtime!.proxyUrl).hostname;
    expect(conf.stdout.split("\n").filter((l) => l.startsWith("nameserver"))).toEqual([`nameserver ${supervisorIp}`]);
    const lookup = 'require("dns").lookup(process.argv[1], (e, a) => console.log(e ? "ERR " + e.code : "OK " + a))';
    expect((await inWorkload(lookup, "origin1")).stdout.trim()).toMatch(/^OK \d+\.\d+\.\d+\.\d+$/);
    expect((await inWorkload(lookup, "evil.test")).stdout.trim()).toBe("ERR ENOTFOUND");
    // "At once": the supervisor answers NXDOMAIN; a query left unanswered would end as ETIMEOUT after 20 s.
    const direct = await inWorkload(
      'const r = new (require("dns").Resolver)({ timeout: 20000, tries: 1 }); r.resolve4(process.argv[1], (e) => console.log(JSON.stringify(r.getServers()) + " " + (e ? e.code : "answered")))',
      "evil.test",
    );
    expect(direct.stdout.trim()).toBe(`${JSON.stringify([supervisorIp])} ENOTFOUND`);
  });
});
