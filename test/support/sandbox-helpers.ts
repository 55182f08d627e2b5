// Helpers for integration tests that drive sandboxes on a real private dockerd:
// wait for a phase, exec through the real CLI, run the docker CLI, read raw
// inspect JSON, and probe TCP reachability from inside a container.

import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { promisify } from "node:util";
import { cli, type CliRun } from "./cli-runner.js";
import type { DockerFixture } from "./docker-fixture.js";
import { eventually } from "./gateway-fixture.js";

const run = promisify(execFile);
const DOCKER_CLI = ["/usr/local/bin/docker", "/usr/bin/docker"].find((p) => existsSync(p)) ?? "docker";

/** The parts of GET /v1/sandboxes/:name the tests read. */
export interface SandboxJson {
  id: string;
  name: string;
  phase: string;
  generation: number;
  reason: { code: string; detail?: string } | null;
  runtime: {
    generation: number;
    proxyUrl: string;
    workload: { id: string; name: string; imageId: string; startedAt: string };
    supervisor: { id: string; name: string; imageId: string; startedAt: string };
  } | null;
}

export async function getSandbox(fx: DockerFixture, name: string): Promise<{ status: number; body: SandboxJson }> {
  const r = await fx.t.api("GET", `/v1/sandboxes/${encodeURIComponent(name)}`);
  return { status: r.status, body: r.body as SandboxJson };
}

/**
 * Polls until the sandbox is in `phase` at `generation` (if given). Fails at once
 * when it settles in another terminal phase, naming the reason, so a broken
 * launch does not look like a timeout.
 */
export async function waitPhase(fx: DockerFixture, name: string, phase: string, opts: { generation?: number; ms?: number } = {}): Promise<SandboxJson> {
  let last: SandboxJson | undefined;
  try {
    return await eventually(
      async () => {
        const { status, body } = await getSandbox(fx, name);
        if (status !== 200) throw new Error(`GET ${name} answered ${status}: ${JSON.stringify(body)}`);
        last = body;
        if (body.phase === phase && (opts.generation === undefined || body.generation === opts.generation)) return body;
        if (body.phase !== phase && ["Error", "Stopped", "Ready", "Completed"].includes(body.phase)) {
          throw new Error(`sandbox ${name} settled in ${body.phase} (${JSON.stringify(body.reason)}) while waiting for ${phase}`);
        }
        return undefined;
      },
      opts.ms ?? 30_000,
      `${name} to be ${phase}`,
    );
  } catch (err) {
    throw new Error(`${(err as Error).message}; last seen: ${JSON.stringify(last)}`, { cause: err });
  }
}

/** Waits until GET answers 404: the sandbox and its record are gone. */
export async function waitDeleted(fx: DockerFixture, name: string, ms = 30_000): Promise<void> {
  await eventually(async () => ((await getSandbox(fx, name)).status === 404 ? true : undefined), ms, `${name} to be deleted`);
}

/** `sandgate sandbox exec NAME -- CMD...` through the real CLI. */
export function cliExec(fx: DockerFixture, name: string, cmd: string[], stdin?: string): Promise<CliRun> {
  return cli(["sandbox", "exec", name, "--", ...cmd], fx.cliEnv, stdin);
}

export interface DockerRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** The docker CLI against the fixture's private daemon; never throws on a non-zero exit. */
export async function docker(fx: DockerFixture, ...args: string[]): Promise<DockerRun> {
  try {
    const { stdout, stderr } = await run(DOCKER_CLI, ["-H", fx.dockerd.dockerHost, ...args], { timeout: 60_000, maxBuffer: 16 << 20 });
    return { code: 0, stdout: stdout.trim(), stderr: stderr.trim() };
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; code?: number };
    return { code: typeof e.code === "number" ? e.code : -1, stdout: (e.stdout ?? "").trim(), stderr: (e.stderr ?? "").trim() };
  }
}

/** Raw GET of an Engine API object (the typed client narrows inspect bodies). */
export async function engineGet(fx: DockerFixture, path: string): Promise<any> {
  const r = await fx.engine.request("GET", path);
  if (r.kind !== "ok") throw new Error(`GET ${path}: ${JSON.stringify(r)}`);
  return r.body;
}

/**
 * A node program for `node -e PROBE_TCP '[{"host":..,"port":..}, ...]'`: tries
 * every target at once with a 2 s connect timeout and prints one JSON object
 * mapping "host:port" to "connected" or the error (code or "timeout").
 */
export const PROBE_TCP = `
const net = require("net");
const targets = JSON.parse(process.argv[1]);
Promise.all(targets.map((t) => new Promise((resolve) => {
  const s = net.connect({ host: t.host, port: t.port });
  const done = (r) => { s.destroy(); resolve([t.host + ":" + t.port, r]); };
  s.setTimeout(2000, () => done("timeout"));
  s.on("connect", () => done("connected"));
  s.on("error", (e) => done(e.code || e.message));
}))).then((rs) => console.log(JSON.stringify(Object.fromEntries(rs))));
`;

/**
 * PROBE_TCP for a workload whose every connection the transparent path accepts (so
 * "connected" proves nothing): writes an HTTP request to each target and prints, per
 * "host:port", the connect error, or "answer:" and the first 300 bytes it got back
 * ("answer:" alone when it was closed without a byte). See notReached.
 */
export const PROBE_REACH = `
const net = require("net");
const targets = JSON.parse(process.argv[1]);
Promise.all(targets.map((t) => new Promise((resolve) => {
  const s = net.connect({ host: t.host, port: t.port });
  let got = "";
  let connected = false;
  const done = (r) => { s.destroy(); resolve([t.host + ":" + t.port, r]); };
  s.setTimeout(3000, () => done(connected ? "answer:" + got : "timeout"));
  s.on("connect", () => { connected = true; s.write("GET /sandgate-probe HTTP/1.1\\r\\nHost: " + t.host + ":" + t.port + "\\r\\nConnection: close\\r\\n\\r\\n"); });
  s.on("data", (b) => { got = (got + b.toString("latin1")).slice(0, 300); });
  s.on("end", () => done("answer:" + got));
  s.on("error", (e) => done(connected ? "answer:" + got : (e.code || e.message)));
}))).then((rs) => console.log(JSON.stringify(Object.fromEntries(rs))));
`;

/** The supervisor's refusal of a request on the transparent path: its 403, marked as Sandgate's. */
export const refusedBySupervisor = (result: string): boolean => /^answer:HTTP\/1\.1 403 /.test(result) && /\r\nx-proxy-error: sandgate-policy\r\n/i.test(result);

/**
 * The targets a PROBE_REACH result shows reached: anything but a connect error, a close without
 * a byte, or the supervisor's own refusal. (The targets' own counters say the same from their side.)
 */
export const reachedTargets = (results: ProbeResults): [string, string][] =>
  Object.entries(results).filter(([, r]) => r.startsWith("answer:") && r !== "answer:" && !refusedBySupervisor(r));

export type ProbeResults = Record<string, string>;

/** `env` with the workload's proxy variables taken away: a command after it is a client that knows no proxy. */
export const NO_PROXY_ENV = ["env", "-u", "HTTP_PROXY", "-u", "HTTPS_PROXY", "-u", "http_proxy", "-u", "https_proxy", "-u", "NODE_USE_ENV_PROXY"];

export function parseProbe(r: { code: number | null; stdout: string; stderr: string }): ProbeResults {
  if (r.code !== 0) throw new Error(`probe exited ${r.code}: ${r.stderr}`);
  return JSON.parse(r.stdout.trim()) as ProbeResults;
}
