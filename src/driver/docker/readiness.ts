// The runtime's evidence that a generation's boundary is up, after its identities
// have been checked (identity.ts): the supervisor's health endpoint answers on its Unix
// socket, and a probe command runs in the workload. Used at provisioning
// (DockerDriver.verify) and in recovery (the monitor, which skips the exec probe
// only where an unbroken control session proves the same: docs/recovery.md). The health
// socket is read from the host's side of the supervisor's run directory, so it needs
// neither a network path to the supervisor nor Docker.

import { existsSync } from "node:fs";
import http from "node:http";
import { dirname } from "node:path";
import type { ReadinessCheck, RuntimeRecord } from "../contract.js";
import { withTimeout } from "../../util/timeout.js";
import type { EngineClient } from "./engine/client.js";
import { startExec } from "./exec-session.js";

export interface RuntimeProbes {
  engine: EngineClient;
  /** Command run in the workload as the exec probe. */
  probeCommand: string[];
  /** Where a generation's supervisor serves its health endpoint, on the host (launch-paths.ts: healthSocketOf). */
  healthSocket: (sandboxId: string, generation: number) => string;
  healthTimeoutMs?: number;
  execTimeoutMs?: number;
  /** The transparent path's kernel state of a launch: null when in place (or the launch has none), else what is wrong. */
  transparent?: (launched: Launched, record: RuntimeRecord) => Promise<string | null>;
}

/** The generation a check is about. */
export interface Launched {
  sandboxId: string;
  generation: number;
}

/** Health endpoint, the transparent path, then exec probe; stops at the first failure. */
export async function runtimeChecks(p: RuntimeProbes, launched: Launched, record: RuntimeRecord): Promise<ReadinessCheck[]> {
  const health = await healthCheck(p, launched);
  if (!health.ok) return [health];
  const transparent = await transparentCheck(p, launched, record);
  return transparent.ok ? [health, transparent, await execProbeCheck(p, record)] : [health, transparent];
}

/** The workload's route and its supervisor's redirects are in place (transparent-rules.ts). */
export async function transparentCheck(p: RuntimeProbes, launched: Launched, record: RuntimeRecord): Promise<ReadinessCheck> {
  return asCheck("transparent path", p.transparent === undefined ? null : await p.transparent(launched, record));
}

/** The supervisor's health endpoint answers 200 on its Unix socket. */
export async function healthCheck(p: RuntimeProbes, launched: Launched): Promise<ReadinessCheck> {
  return asCheck("supervisor health", await probeHealth(p.healthSocket(launched.sandboxId, launched.generation), p.healthTimeoutMs ?? 1000));
}

/** The probe command runs in the workload and exits 0. */
export async function execProbeCheck(p: RuntimeProbes, record: RuntimeRecord): Promise<ReadinessCheck> {
  return asCheck("workload exec probe", await execProbe(p, record.workload.id, p.execTimeoutMs ?? 5000));
}

const asCheck = (name: string, problem: string | null): ReadinessCheck => (problem === null ? { name, ok: true } : { name, ok: false, detail: problem });

/** What of a health answer is read (its report is a few hundred bytes); the rest is cut. */
const HEALTH_BODY_BYTES = 4096;

function probeHealth(socketPath: string, timeoutMs: number): Promise<string | null> {
  return new Promise((resolve) => {
    const req = http.get({ socketPath, path: "/healthz", agent: false, signal: AbortSignal.timeout(timeoutMs) }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        body += chunk;
        if (body.length > HEALTH_BODY_BYTES) res.destroy();
      });
      res.on("close", () => {
        if (!res.complete) resolve(`health endpoint's answer was cut (over ${String(HEALTH_BODY_BYTES)} bytes, or not within ${String(timeoutMs)} ms)`);
        else resolve(res.statusCode === 200 ? null : `health endpoint answered ${String(res.statusCode)}: ${body.slice(0, 200)}`);
      });
    });
    req.on("error", (err: NodeJS.ErrnoException) => resolve(healthUnreachable(socketPath, err)));
  });
}

function healthUnreachable(socketPath: string, err: NodeJS.ErrnoException): string {
  // A launch directory without a run directory: its supervisor was launched by a gateway
  // before health moved to a Unix socket (it serves TCP on the egress network, which nothing
  // here asks any more). It fails closed; a restart launches it anew.
  if (err.code === "ENOENT" && !existsSync(dirname(socketPath))) {
    return `no health socket directory ${dirname(socketPath)}: the supervisor was launched by an older gateway; restart the sandbox`;
  }
  return `health endpoint unreachable at ${socketPath}: ${err.message}`;
}

async function execProbe(p: RuntimeProbes, workloadId: string, timeoutMs: number): Promise<string | null> {
  try {
    const session = await startExec(p.engine, workloadId, { cmd: p.probeCommand, tty: false });
    session.stdin.end();
    session.stdout.resume();
    session.stderr.resume();
    const code = await withTimeout(session.exitCode, timeoutMs, "exec probe timed out").finally(() => session.close());
    return code === 0 ? null : `${p.probeCommand.join(" ")} exited ${code}`;
  } catch (err) {
    return (err as Error).message;
  }
}
