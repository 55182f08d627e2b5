// `sandgate sandbox port-forward` on a real Docker sandbox, through the real CLI: a
// server bound to 127.0.0.1:8080 inside the workload answers on a loopback port of the
// host; several connections at once; 8 MiB intact; a closed port fails that connection
// only; Ctrl-C ends it with 0; stopping the sandbox ends it with 5; and while a forward
// runs the workload still reaches nothing outside.

import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import http from "node:http";
import net from "node:net";
import { networkInterfaces } from "node:os";
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from "vitest";
import { CLI_ARGS } from "../support/cli-runner.js";
import { startDockerFixture, type DockerFixture } from "../support/docker-fixture.js";
import { eventually } from "../support/gateway-fixture.js";
import { PROBE_REACH, cliExec, parseProbe, reachedTargets, waitPhase } from "../support/sandbox-helpers.js";

const NAME = "pf";
let fx: DockerFixture;

// The workload's server: on its own loopback only. /big is 8 MiB (a fixed pattern whose
// sha256 /sum answers); /wait answers only once 4 /wait requests are open at once.
const SERVER = `
const http = require("http"), crypto = require("crypto");
const big = Buffer.alloc(8 << 20); for (let i = 0; i < big.length; i++) big[i] = (i * 31 + (i >> 13)) & 255;
const sum = crypto.createHash("sha256").update(big).digest("hex");
let waiting = [];
http.createServer((q, s) => {
  if (q.url === "/big") return s.end(big);
  if (q.url === "/sum") return s.end(sum);
  if (q.url === "/wait") { waiting.push(s); if (waiting.length >= 4) { for (const w of waiting) w.end("together"); waiting = []; } return; }
  s.end("hello from the workload");
}).listen(8080, "127.0.0.1");
`;

interface Forward {
  p: ChildProcessWithoutNullStreams;
  port: number;
  stdout: () => string;
  stderr: () => string;
  exit: Promise<number | null>;
}

async function forward(spec: string, ...extra: string[]): Promise<Forward> {
  const p = spawn(CLI_ARGS[0]!, [...CLI_ARGS.slice(1), "sandbox", "port-forward", NAME, spec, ...extra], { env: { ...process.env, ...fx.cliEnv }, stdio: ["pipe", "pipe", "pipe"] });
  let out = "";
  let err = "";
  p.stdout.on("data", (b: Buffer) => (out += b.toString()));
  p.stderr.on("data", (b: Buffer) => (err += b.toString()));
  const exit = new Promise<number | null>((r) => p.on("close", (code) => r(code)));
  const port = await eventually(() => {
    const m = /^Forwarding from 127\.0\.0\.1:(\d+) -> \d+\n/.exec(out);
    if (m) return Number(m[1]);
    if (p.exitCode !== null) throw new Error(`port-forward exited ${p.exitCode}: ${err}`);
    return undefined;
  }, 120_000, "Forwarding from ...");
  return { p, port, stdout: () => out, stderr: () => err, exit };
}

function get(port: number, path: string): Promise<{ status: number; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: "127.0.0.1", port, path, agent: false }, (res) => {
      const parts: Buffer[] = [];
      res.on("data", (b: Buffer) => parts.push(b));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(parts) }));
      res.on("error", reject);
    });
    req.on("error", reject);
  });
}

beforeAll(async () => {
  fx = await startDockerFixture({ liveRestore: true, name: "portfwd" });
  // The server is the workload's own command.
  const created = await fx.t.api("POST", "/v1/sandboxes", { name: NAME, command: ["node", "-e", SERVER] });
  if (created.status !== 201) throw new Error(`create: ${JSON.stringify(created.body)}`);
  await waitPhase(fx, NAME, "Ready");
  await eventually(async () => ((await cliExec(fx, NAME, ["node", "-e", 'require("http").get("http://127.0.0.1:8080/", (r) => r.pipe(process.stdout)).on("error", () => undefined)'])).stdout === "hello from the workload" ? true : undefined), 60_000, "the workload's server");
}, 600_000);

afterAll(async () => {
  await fx?.close();
}, 600_000);

describe("sandgate sandbox port-forward", () => {
  it("reaches a server on the workload's 127.0.0.1: one answer, four connections at once, 8 MiB intact; Ctrl-C ends it with 0", async () => {
    const f = await forward(":8080");
    onTestFailed(() => console.error(`port-forward's stderr:\n${f.stderr()}`));
    expect(f.port).toBeGreaterThan(0);
    expect(f.stdout()).toBe(`Forwarding from 127.0.0.1:${f.port} -> 8080\n`);
    const one = await get(f.port, "/");
    expect(one).toEqual({ status: 200, body: Buffer.from("hello from the workload") });
    // /wait answers only when four requests are open at the same time.
    const four = await Promise.all([1, 2, 3, 4].map(() => get(f.port, "/wait")));
    expect(four.map((r) => r.body.toString())).toEqual(["together", "together", "together", "together"]);
    const [big, sum] = await Promise.all([get(f.port, "/big"), get(f.port, "/sum")]);
    expect(big.body.length).toBe(8 << 20);
    const { createHash } = await import("node:crypto");
    expect(createHash("sha256").update(big.body).digest("hex")).toBe(sum.body.toString());
    // The gateway holds no relay once the connections are done.
    await eventually(async () => ((await fx.t.api("GET", "/v1/status")).body.portForward.open === 0 ? true : undefined), 60_000, "no open relay");
    f.p.kill("SIGINT");
    expect(await f.exit).toBe(0);
  }, 600_000);

  it("a closed port fails that connection with a message naming it; the forward keeps serving", async () => {
    const f = await forward("0:8081");
    await expect(get(f.port, "/")).rejects.toThrow(/socket hang up|ECONNRESET/);
    await eventually(() => (f.stderr().includes(`cannot connect to 127.0.0.1:8081 inside sandbox "${NAME}": nothing is listening there (ECONNREFUSED)`) ? true : undefined), 60_000, "the message");
    expect(f.p.exitCode).toBeNull();
    await expect(get(f.port, "/")).rejects.toThrow(/socket hang up|ECONNRESET/); // still listening, still refusing
    await eventually(() => (f.stderr().trim().split("\n").length >= 2 ? true : undefined), 60_000, "the second refusal");
    f.p.kill("SIGINT");
    expect(await f.exit).toBe(0);
    // One line per refused connection, nothing after it (issue 31, item 10).
    expect(f.stderr().trim().split("\n")).toEqual([expect.stringMatching(/nothing is listening there \(ECONNREFUSED\)$/), expect.stringMatching(/nothing is listening there \(ECONNREFUSED\)$/)]);
  }, 600_000);

  it("refuses a bad REMOTE and a non-loopback --address in one line with exit 2", async () => {
    for (const [args, message] of [
      [["abc"], 'REMOTE must be a port from 1 to 65535; got "abc"'],
      [["70000"], 'REMOTE must be a port from 1 to 65535; got "70000"'],
      [["8080", "--address", "0.0.0.0"], '--address "0.0.0.0" is not a loopback address'],
    ] as const) {
      const p = spawn(CLI_ARGS[0]!, [...CLI_ARGS.slice(1), "sandbox", "port-forward", NAME, ...args], { env: { ...process.env, ...fx.cliEnv } });
      let err = "";
      p.stderr.on("data", (b: Buffer) => (err += b.toString()));
      const code = await new Promise<number | null>((r) => p.on("close", r));
      expect(code, args.join(" ")).toBe(2);
      expect(err.trim().split("\n")).toHaveLength(1);
      expect(err).toContain(message);
    }
  }, 600_000);

  it("while a forward is open the workload still reaches nothing outside; stopping the sandbox ends the forward with 5", async () => {
    // A host service on every interface, the positive control: the host reaches it.
    let hostConnections = 0;
    const hostService = net.createServer((s) => {
      hostConnections++;
      s.on("error", () => undefined);
      s.end("host");
    });
    await new Promise<void>((r) => hostService.listen(0, "0.0.0.0", r));
    const hostPort = (hostService.address() as net.AddressInfo).port;
    const hostIp = Object.values(networkInterfaces()).flat().find((a) => a && a.family === "IPv4" && !a.internal)!.address;
    try {
      const f = await forward(":8080");
      // A connection held open through the forward while the workload probes.
      const held = net.connect(f.port, "127.0.0.1");
      await new Promise<void>((r) => held.once("connect", () => r()));
      held.write("GET /wait HTTP/1.1\r\nHost: x\r\n\r\n");
      await eventually(async () => ((await fx.t.api("GET", "/v1/status")).body.portForward.open === 1 ? true : undefined), 60_000, "one relay open");
      const control = await new Promise<string>((resolve, reject) => {
        const s = net.connect(hostPort, hostIp, () => s.once("data", (b) => resolve(b.toString())));
        s.on("error", reject);
      });
      expect(control).toBe("host");
      const before = hostConnections;
      // (203.0.113.0/24 is TEST-NET-3: the supervisor refuses it, nothing is sent anywhere.)
      const r = parseProbe(
        await cliExec(fx, NAME, ["node", "-e", PROBE_REACH, JSON.stringify([{ host: hostIp, port: hostPort }, { host: hostIp, port: f.port }, { host: "203.0.113.7", port: 443 }])]),
      );
      expect(reachedTargets(r)).toEqual([]);
      expect(hostConnections).toBe(before);

      const heldClosed = new Promise<void>((r) => held.once("close", () => r()));
      held.on("error", () => undefined);
      expect((await fx.t.api("POST", `/v1/sandboxes/${NAME}/stop`)).status).toBe(202);
      expect(await f.exit).toBe(5);
      expect(f.stderr()).toMatch(new RegExp(`sandbox "${NAME}" is (Stopping|Stopped): the forward from 127\\.0\\.0\\.1:${f.port} ended`));
      await heldClosed;
      await expect(get(f.port, "/")).rejects.toThrow(/ECONNREFUSED/); // the listener is gone
    } finally {
      hostService.close();
    }
  }, 600_000);
});
