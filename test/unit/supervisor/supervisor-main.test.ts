// The supervisor as it ships: bundled to one file by esbuild, run by node from a
// directory without node_modules, configured by a launch.json, stopped by a signal.
// Loopback only.
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import http from "node:http";
import net from "node:net";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AddressInfo } from "node:net";
import { build } from "esbuild";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { parseLaunchConfig } from "../../../src/protocol/launch.js";
import { readLaunchConfig } from "../../../src/supervisor/launch-config.js";
import { addressIn } from "../../../src/supervisor/listen.js";
import { networkInterfaces, type NetworkInterfaceInfo } from "node:os";
import { BoundaryRegistry } from "../../../src/gateway/control/boundary.js";
import { LaunchTokens } from "../../../src/gateway/control/launch-tokens.js";
import { startSupervisorEndpoint } from "../../../src/gateway/control/supervisor-endpoint.js";
import { ensureEndpointTls } from "../../../src/gateway/control/tls.js";
import { policyFromObject } from "../../../src/policy/index.js";
import { freePort, getOverUnix } from "../../support/net.js";

let dir: string;
let bundle: string;
/** The files of which esbuild put code into the bundle (not the ones it shook out). */
let bundled: string[];
const cleanups: (() => Promise<void> | void)[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "sandgate-supervisor-"));
  bundle = join(dir, "supervisor.mjs");
  // ESM, as the image's bundle (scripts/bundle-supervisor.ts): the addon is found beside the
  // bundle by import.meta.url; the banner gives bundled CommonJS (yaml) its require().
  const result = await build({
    entryPoints: ["src/supervisor/main.ts"],
    bundle: true,
    platform: "node",
    format: "esm",
    banner: { js: "import { createRequire as __sgCreateRequire } from 'module'; const require = __sgCreateRequire(import.meta.url);" },
    target: "node24",
    outfile: bundle,
    logLevel: "silent",
    metafile: true,
  });
  const [output] = Object.values(result.metafile.outputs);
  bundled = Object.entries(output!.inputs).flatMap(([file, i]) => (i.bytesInOutput > 0 ? [file] : []));
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});


interface Running {
  child: ChildProcess;
  lines: Record<string, unknown>[];
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stdout: () => string;
}

async function runSupervisor(config: unknown): Promise<Running> {
  const configPath = join(dir, `launch-${String(Math.random()).slice(2)}.json`);
  await writeFile(configPath, typeof config === "string" ? config : JSON.stringify(config));
  const child = spawn(process.execPath, [bundle], {
    cwd: dir,
    env: { PATH: process.env.PATH ?? "", SANDGATE_LAUNCH_CONFIG: configPath },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) => child.once("exit", (code, signal) => r({ code, signal })));
  cleanups.push(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    await exited;
  });
  let out = "";
  const lines: Record<string, unknown>[] = [];
  const listening = new Promise<void>((resolve, reject) => {
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (chunk: string) => {
      out += chunk;
      const parts = out.split("\n");
      for (const line of parts.slice(lines.length, -1)) {
        const rec = JSON.parse(line) as Record<string, unknown>;
        lines.push(rec);
        if (rec.msg === "supervisor listening") resolve();
      }
    });
    void exited.then(({ code }) => reject(new Error(`supervisor exited early (${String(code)}): ${out}`)));
  });
  await listening;
  return { child, lines, exited, stdout: () => out };
}

/** A fresh path for a supervisor's health socket. */
const socketPath = (): string => join(dir, `health-${String(Math.random()).slice(2, 10)}.sock`);

function get(port: number, path: string, agent: http.Agent | false = false): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    http
      .get({ host: "127.0.0.1", port, path, agent }, (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (body += c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      })
      .on("error", reject);
  });
}

async function startOrigin(delayMs: number): Promise<number> {
  const server = http.createServer((_req, res) => setTimeout(() => res.end("origin says hi"), delayMs));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  cleanups.push(() => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }));
  return (server.address() as AddressInfo).port;
}

/** An origin that answers /slow only once released, so a test knows a request is in flight. */
async function startHeldOrigin(): Promise<{ port: number; held: Promise<void>; release: () => void }> {
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  let arrived!: () => void;
  const held = new Promise<void>((r) => (arrived = r));
  const server = http.createServer((req, res) => {
    if (req.url?.endsWith("/slow")) {
      arrived();
      void released.then(() => res.end("origin says hi"));
    } else res.end("origin says hi");
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  cleanups.push(() => new Promise<void>((r) => { release(); server.closeAllConnections(); server.close(() => r()); }));
  return { port: (server.address() as AddressInfo).port, held, release };
}

async function startEcho(): Promise<number> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((s) => {
    sockets.add(s);
    s.pipe(s);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  cleanups.push(() => new Promise<void>((r) => { for (const s of sockets) s.destroy(); server.close(() => r()); }));
  return (server.address() as AddressInfo).port;
}

describe("supervisor bundle", () => {
  it("carries zod/mini and no classic zod or zod locale (they cost each supervisor ~5 MiB)", () => {
    const zod = bundled.filter((f) => f.includes("node_modules/zod/"));
    expect(zod.some((f) => f.includes("/zod/v4/mini/"))).toBe(true);
    expect(zod.filter((f) => /\/zod\/v4\/(classic|locales)\//.test(f))).toEqual([]);
  });

  it("serves health and policy-checked egress, logs audit lines, and exits 0 on SIGTERM after in-flight work", async () => {
    const origin = await startHeldOrigin();
    const originPort = origin.port;
    const echoPort = await startEcho();
    const [proxyPort, healthSocket] = [await freePort(), socketPath()];
    const sup = await runSupervisor({
      sandboxId: "sb-main",
      generation: 4,
      nonce: "secret-nonce-value",
      proxyPort,
      healthSocket,
      policyRevision: 9,
      policy: {
        version: 1,
        network: {
          rules: [
            {
              name: "loopback-test",
              endpoints: [
                { host: "localhost", port: originPort, protocol: "http", allowPrivate: ["127.0.0.0/8", "::1/128"] },
                { host: "localhost", port: echoPort, protocol: "tcp", allowPrivate: ["127.0.0.0/8", "::1/128"] },
              ],
            },
          ],
        },
      },
    });

    const health = await getOverUnix(healthSocket);
    expect(health.status).toBe(200);
    expect(health.body).toEqual({ ok: true, sandboxId: "sb-main", generation: 4, policyRevision: 9, policy: "loaded", proxy: "listening", transparent: "disabled", session: "disabled", lockdown: null });

    // An idle keep-alive client connection and an established tunnel must not hold shutdown up.
    const agent = new http.Agent({ keepAlive: true });
    cleanups.push(() => agent.destroy());
    let idleClosed: Promise<void> | undefined;
    agent.once("free", (socket: net.Socket) => {
      idleClosed = new Promise<void>((r) => socket.once("close", () => r()));
    });
    expect((await get(proxyPort, `http://localhost:${originPort}/a`, agent)).status).toBe(200);
    expect(idleClosed, "the keep-alive socket went idle").toBeDefined();
    const tunnel = net.connect(proxyPort, "127.0.0.1");
    cleanups.push(() => void tunnel.destroy());
    const tunnelClosed = new Promise<void>((r) => tunnel.once("close", () => r()));
    tunnel.on("error", () => undefined);
    const established = new Promise<string>((r) => tunnel.once("data", (d: Buffer) => r(d.toString("latin1"))));
    tunnel.write(`CONNECT localhost:${echoPort} HTTP/1.1\r\nHost: localhost:${echoPort}\r\n\r\n`);
    expect(await established).toMatch(/^HTTP\/1\.1 200 /);

    let inflightDone = false;
    const inflight = get(proxyPort, `http://localhost:${originPort}/slow`).finally(() => (inflightDone = true));
    await origin.held; // the request is at the origin, its answer held back
    sup.child.kill("SIGTERM");

    // The idle keep-alive connection is closed at once, while the request is still in
    // flight: shutdown does not wait for it. Then the request finishes, and the process exits.
    await idleClosed;
    expect(inflightDone).toBe(false);
    expect(sup.lines.map((l) => l.msg)).toContain("shutting down");
    origin.release();
    expect(await inflight).toEqual({ status: 200, body: "origin says hi" });
    // The tunnel is opaque: it is cut, not waited for (the test never closes it).
    await tunnelClosed;
    expect(await sup.exited).toEqual({ code: 0, signal: null });

    const audits = sup.lines.filter((l) => l.type === "egress");
    // A request is recorded once it is over (with its traffic); a tunnel when it opens and when it closes.
    expect(audits.slice(0, 2)).toEqual([
      expect.objectContaining({ decision: "allow", host: "localhost", port: originPort, protocol: "http", path: "/a", sandboxId: "sb-main", rule: "loopback-test", revision: 9, status: 200 }),
      expect.objectContaining({ decision: "allow", host: "localhost", port: echoPort, protocol: "tcp", sandboxId: "sb-main" }),
    ]);
    expect(audits[0]!.bytesIn).toBeGreaterThan("origin says hi".length);
    expect(audits.slice(2)).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ decision: "allow", path: "/slow", status: 200 }),
        expect.objectContaining({ decision: "allow", activity: "close", protocol: "tcp", port: echoPort }),
      ]),
    );
    expect(audits).toHaveLength(4);
    expect(sup.lines.map((l) => l.msg)).toEqual(expect.arrayContaining(["shutting down", "stopped"]));
    expect(sup.stdout()).not.toContain("secret-nonce-value");
  });

  it("fails closed on an invalid policy: health 503, every request denied, SIGINT exits 0", async () => {
    const originPort = await startOrigin(0);
    const [proxyPort, healthSocket] = [await freePort(), socketPath()];
    const sup = await runSupervisor({
      sandboxId: "sb-bad",
      generation: 1,
      nonce: "n",
      proxyPort,
      healthSocket,
      policyRevision: 1,
      // "allow" is not a policy key: the whole policy is refused, nothing falls back to open.
      policy: { version: 1, allow: "*", network: { rules: [{ name: "x", endpoints: [{ host: "localhost", port: originPort, protocol: "http", allowPrivate: ["127.0.0.0/8"] }] }] } },
    });

    const health = await getOverUnix(healthSocket);
    const denied = await get(proxyPort, `http://localhost:${originPort}/`);
    sup.child.kill("SIGINT");

    expect(health.status).toBe(503);
    expect(health.body).toMatchObject({ ok: false, sandboxId: "sb-bad", policy: "missing", proxy: "listening" });
    expect(denied.status).toBe(403);
    expect(JSON.parse(denied.body)).toMatchObject({ error: "policy_denied", reason: "policy_missing" });
    expect(await sup.exited).toEqual({ code: 0, signal: null });
    expect(sup.lines).toEqual(expect.arrayContaining([expect.objectContaining({ level: "error", msg: "launch config invalid: denying all egress" })]));
  });

  it("fails closed when a config field other than the policy is invalid", async () => {
    const [proxyPort, healthSocket] = [await freePort(), socketPath()];
    const sup = await runSupervisor({ sandboxId: "sb-x", generation: "one", nonce: "n", proxyPort, healthSocket, policyRevision: 1, policy: { version: 1 } });

    const health = await getOverUnix(healthSocket);
    sup.child.kill("SIGTERM");

    expect(health.status).toBe(503);
    expect(health.body).toMatchObject({ policy: "missing", sandboxId: "sb-x", generation: null });
    expect(await sup.exited).toEqual({ code: 0, signal: null });
  });
});

describe("supervisor bundle: where it listens", () => {
  it("with a proxy subnet, the proxy listens on its address in it only: another address of the host is refused", async () => {
    const [proxyPort, healthSocket] = [await freePort(), socketPath()];
    const sup = await runSupervisor({ sandboxId: "sb-addr", generation: 1, nonce: "n", proxyPort, proxySubnet: "127.0.0.0/8", healthSocket, policyRevision: 1, policy: { version: 1 } });
    expect(sup.lines.find((l) => l.msg === "supervisor listening")).toMatchObject({ proxyAddress: "127.0.0.1", proxyPort, healthSocket });
    const other = Object.values(networkInterfaces())
      .flat()
      .find((a) => a?.family === "IPv4" && !a.internal)?.address;
    expect(other, "this host has an IPv4 address besides loopback").toBeDefined();
    const result = (host: string): Promise<string> =>
      new Promise((resolve) => {
        const s = net.connect(proxyPort, host, () => {
          s.destroy();
          resolve("connected");
        });
        s.on("error", (e: NodeJS.ErrnoException) => resolve(e.code ?? e.message));
      });
    expect({ loopback: await result("127.0.0.1"), other: await result(other!) }).toEqual({ loopback: "connected", other: "ECONNREFUSED" });
    expect((await getOverUnix(healthSocket)).status).toBe(200);
    sup.child.kill("SIGTERM");
    expect(await sup.exited).toEqual({ code: 0, signal: null });
  });

  it("with a proxy subnet holding no address of its own, it does not start: exit 1 naming the subnet, nothing listens", async () => {
    const [proxyPort, healthSocket] = [await freePort(), socketPath()];
    await expect(runSupervisor({ sandboxId: "sb-none", generation: 1, nonce: "n", proxyPort, proxySubnet: "203.0.113.0/28", healthSocket, policyRevision: 1, policy: { version: 1 } })).rejects.toThrow(
      /exited early \(1\).*no address of this container is in the sandbox subnet 203\.0\.113\.0\/28/s,
    );
    await expect(getOverUnix(healthSocket)).rejects.toMatchObject({ code: "ENOENT" });
  });
});

describe("supervisor bundle with a control session", () => {
  it("authenticates to a real endpoint, enforces the pushed revision and keeps the token out of its logs", async () => {
    const originPort = await startOrigin(0);
    const [proxyPort, healthSocket] = [await freePort(), socketPath()];
    const stateDir = join(dir, "gateway-state");
    const tls = await ensureEndpointTls(stateDir);
    const tokens = LaunchTokens.open(stateDir, "gw-bundle");
    const boundary = new BoundaryRegistry();
    const endpoint = await startSupervisorEndpoint({
      host: "127.0.0.1",
      tls,
      tokens,
      expected: async (id) => (id === "sb-ctl" ? { generation: 2, nonce: "n-ctl" } : null),
      boundary,
      log: { info: () => undefined, warn: () => undefined },
    });
    cleanups.push(async () => {
      boundary.close();
      await endpoint.close();
    });
    const pushed = policyFromObject({
      version: 1,
      network: { rules: [{ name: "pushed", endpoints: [{ host: "localhost", port: originPort, protocol: "http", allowPrivate: ["127.0.0.0/8"] }] }] },
    });
    if (!pushed.ok) throw new Error(pushed.errors.join("; "));
    boundary.setDesired("sb-ctl", 2, pushed.policy, 3);
    const { token } = await tokens.mint({ sandboxId: "sb-ctl", generation: 2, nonce: "n-ctl" });
    const tokenPath = join(dir, "ctl-token");
    await writeFile(tokenPath, token, { mode: 0o600 });

    // The launch policy allows nothing; only the pushed revision opens the origin.
    const sup = await runSupervisor({
      sandboxId: "sb-ctl",
      generation: 2,
      nonce: "n-ctl",
      proxyPort,
      healthSocket,
      policyRevision: 1,
      policy: { version: 1 },
      control: { url: endpoint.url, fingerprint: tls.fingerprint, tokenPath, graceMs: 5000 },
    });
    expect((await boundary.waitForRevision("sb-ctl", 3, 10_000)).reached).toBe(true);
    expect((await getOverUnix(healthSocket)).body).toMatchObject({ ok: true, session: "up", policyRevision: 3 });
    expect((await get(proxyPort, `http://localhost:${originPort}/x`)).status).toBe(200);
    sup.child.kill("SIGTERM");
    expect(await sup.exited).toEqual({ code: 0, signal: null });
    expect(sup.lines.map((l) => l.msg)).toEqual(expect.arrayContaining(["control session up", "policy pushed"]));
    expect(sup.stdout()).not.toContain(token);
    expect(sup.stdout()).not.toContain("n-ctl");
  });
});

describe("launch config", () => {
  const valid = { sandboxId: "sb", generation: 0, nonce: "n", policyRevision: 2, policy: { version: 1 } };

  it("loads a valid config with default ports", async () => {
    const path = join(dir, "valid.json");
    await writeFile(path, JSON.stringify(valid));
    const r = await readLaunchConfig(path);
    expect(r.errors).toEqual([]);
    expect(r.settings).toEqual({ sandboxId: "sb", generation: 0, nonce: "n", proxyPort: 3128, proxySubnet: null, healthSocket: null, control: null, hostAddresses: [], resolvers: null, tls: null, transparent: false, connections: { max: 512, headerTimeoutMs: 10_000, idleTimeoutMs: 60_000 } });
    expect(r.policy?.revision).toBe(2);
  });

  it("reads the bounds of the proxy's connections (absent: the defaults); a bad one withholds the policy", () => {
    expect(parseLaunchConfig({ ...valid, connections: { max: 16, headerTimeoutMs: 2000, idleTimeoutMs: 5000 } }).settings.connections).toEqual({ max: 16, headerTimeoutMs: 2000, idleTimeoutMs: 5000 });
    expect(parseLaunchConfig({ ...valid, connections: { max: 16 } }).settings.connections).toEqual({ max: 16, headerTimeoutMs: 10_000, idleTimeoutMs: 60_000 });
    for (const [bad, error] of [
      [{ max: 0 }, "connections.max must be an integer from 1 to 100000"],
      [{ max: 1.5 }, "connections.max must be an integer from 1 to 100000"],
      [{ headerTimeoutMs: "10s" }, "connections.headerTimeoutMs must be an integer from 100 to 600000"],
      [{ idleTimeoutMs: 3_600_001 }, "connections.idleTimeoutMs must be an integer from 100 to 3600000"],
      [512, "connections must be an object"],
    ] as const) {
      const r = parseLaunchConfig({ ...valid, connections: bad });
      expect(r.errors).toEqual([error]);
      expect(r.policy).toBeUndefined();
    }
  });

  it("reads the sandbox CA; a malformed one withholds the policy", () => {
    const cert = "-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n";
    const key = "-----BEGIN PRIVATE KEY-----\nAA==\n-----END PRIVATE KEY-----\n";
    expect(parseLaunchConfig({ ...valid, tls: { caCertPem: cert, caKeyPem: key } }).settings.tls).toEqual({ caCertPem: cert, caKeyPem: key });
    for (const [bad, error] of [
      [{ caCertPem: key, caKeyPem: key }, "tls.caCertPem must be a PEM certificate"],
      [{ caCertPem: cert }, "tls.caKeyPem must be a PEM private key (PKCS#8)"],
      [{ caCertPem: cert, caKeyPem: key, originCaPem: "x" }, "tls.originCaPem must be PEM certificates"],
      ["pem", "tls must be an object"],
    ] as const) {
      const r = parseLaunchConfig({ ...valid, tls: bad });
      expect(r.errors).toContain(error);
      expect(r.policy).toBeUndefined();
    }
  });

  it("reads the proxy subnet in canonical form; a malformed or IPv6 one withholds the policy", () => {
    expect(parseLaunchConfig({ ...valid, proxySubnet: "198.18.3.16/28" }).settings.proxySubnet).toBe("198.18.3.16/28");
    for (const bad of ["10.0.0.0/33", "not-a-cidr", 7, "", "fd00::/64"]) {
      const r = parseLaunchConfig({ ...valid, proxySubnet: bad });
      expect(r.errors).toContain("proxySubnet must be an IPv4 CIDR such as 198.18.0.0/28");
      expect(r.policy).toBeUndefined();
    }
  });

  it("reads the health socket's path: absolute and at most 107 bytes, else the policy is withheld", () => {
    const longest = `/${"s".repeat(106)}`;
    expect(parseLaunchConfig({ ...valid, healthSocket: "/run/sandgate/run/health.sock" }).settings.healthSocket).toBe("/run/sandgate/run/health.sock");
    expect(parseLaunchConfig({ ...valid, healthSocket: longest }).settings.healthSocket).toBe(longest);
    for (const bad of [`${longest}s`, "run/health.sock", "", 9901, "/a\0b"]) {
      const r = parseLaunchConfig({ ...valid, healthSocket: bad });
      expect(r.errors).toContain("healthSocket must be an absolute path of at most 107 bytes");
      expect(r.policy).toBeUndefined();
    }
  });

  it("binds the proxy to the address inside the sandbox subnet only", () => {
    const ifs = {
      eth0: [{ address: "10.201.0.5", family: "IPv4" }],
      eth1: [{ address: "10.200.3.7", family: "IPv4" }, { address: "fe80::1", family: "IPv6" }],
    } as unknown as NodeJS.Dict<NetworkInterfaceInfo[]>;
    expect(addressIn("10.200.3.0/24", ifs)).toBe("10.200.3.7");
    expect(addressIn("10.202.0.0/16", ifs)).toBeNull();
  });

  it("reads the control section with a canonical pin and a default grace period", () => {
    const fp = "AB:".repeat(31) + "AB";
    const r = parseLaunchConfig({ ...valid, control: { url: "wss://172.18.0.1:7421/v1/supervisor", fingerprint: fp, tokenPath: "/run/sandgate/token" } });
    expect(r.errors).toEqual([]);
    expect(r.settings.control).toEqual({ url: "wss://172.18.0.1:7421/v1/supervisor", fingerprint: `sha256:${"ab".repeat(32)}`, tokenPath: "/run/sandgate/token", graceMs: 15_000 });
    expect(parseLaunchConfig({ ...valid, control: { url: "wss://h:1/v1/supervisor", fingerprint: fp, tokenPath: "/t", graceMs: 500 } }).settings.control?.graceMs).toBe(500);
  });

  it("fails closed on an invalid control section", () => {
    const fp = `sha256:${"0".repeat(64)}`;
    const bad = [
      { url: "ws://172.18.0.1:7421/v1/supervisor", fingerprint: fp, tokenPath: "/t" },
      { url: "wss://172.18.0.1:7421/v1/supervisor", fingerprint: "sha256:1234", tokenPath: "/t" },
      { url: "wss://172.18.0.1:7421/v1/supervisor", fingerprint: fp, tokenPath: "relative" },
      { url: "wss://172.18.0.1:7421/v1/supervisor", fingerprint: fp, tokenPath: "/t", graceMs: 5 },
      "wss://x",
    ];
    for (const control of bad) {
      const r = parseLaunchConfig({ ...valid, control });
      expect(r.policy).toBeUndefined();
      expect(r.errors.join("; ")).toMatch(/^control/);
    }
  });

  it("yields no policy for a missing file, non-JSON text, a bad port or a bad policy", async () => {
    const notJson = join(dir, "not.json");
    await writeFile(notJson, "{ nope");
    const cases = [
      await readLaunchConfig(join(dir, "absent.json")),
      await readLaunchConfig(notJson),
      parseLaunchConfig({ ...valid, proxyPort: 70000 }),
      parseLaunchConfig({ ...valid, policyRevision: -1 }),
      parseLaunchConfig({ ...valid, policy: { version: 2 } }),
      parseLaunchConfig({ ...valid, policy: undefined }),
      parseLaunchConfig([]),
    ];
    for (const r of cases) {
      expect(r.policy).toBeUndefined();
      expect(r.errors.length).toBeGreaterThan(0);
    }
    expect(cases[0]!.errors[0]).toMatch(/cannot read/);
    expect(cases[1]!.errors[0]).toMatch(/not valid JSON/);
    expect(cases[4]!.errors[0]).toMatch(/^policy: /);
  });
});
