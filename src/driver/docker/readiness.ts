// The runtime's evidence that a generation's boundary is up, after its identities
// have been checked (identity.ts): the supervisor's health endpoint answers on the
// egress network, and a probe command runs in the workload. Used at provisioning
// (DockerDriver.verify) and in recovery (the monitor, which skips the exec probe
// only where an unbroken control session proves the same: docs/recovery.md), on the same inspect answers
// the identity check read, so each check inspects each container once.

import type { ReadinessCheck, RuntimeRecord } from "../contract.js";
import { HEALTH_PORT } from "../../protocol/launch.js";
import { withTimeout } from "../../util/timeout.js";
import type { EngineClient } from "./engine/client.js";
import type { ContainerInspect } from "./engine/types.js";
import { startExec } from "./exec-session.js";
import { egressNetworkName } from "./objects.js";

export interface RuntimeProbes {
  engine: EngineClient;
  gatewayId: string;
  /** Command run in the workload as the exec probe. */
  probeCommand: string[];
  /** The supervisor's health port (HEALTH_PORT; another only where a test serves it). */
  healthPort?: number;
  healthTimeoutMs?: number;
  execTimeoutMs?: number;
}

/** Health endpoint, then exec probe; stops at the first failure. */
export async function runtimeChecks(p: RuntimeProbes, supervisor: ContainerInspect, record: RuntimeRecord): Promise<ReadinessCheck[]> {
  const health = await healthCheck(p, supervisor);
  return health.ok ? [health, await execProbeCheck(p, record)] : [health];
}

/** The supervisor's health endpoint answers on the egress network. */
export async function healthCheck(p: RuntimeProbes, supervisor: ContainerInspect): Promise<ReadinessCheck> {
  const egressIp = supervisor.NetworkSettings.Networks?.[egressNetworkName(p.gatewayId)]?.IPAddress;
  return asCheck("supervisor health", await probeHealth(egressIp, p.healthPort ?? HEALTH_PORT, p.healthTimeoutMs ?? 1000));
}

/** The probe command runs in the workload and exits 0. */
export async function execProbeCheck(p: RuntimeProbes, record: RuntimeRecord): Promise<ReadinessCheck> {
  return asCheck("workload exec probe", await execProbe(p, record.workload.id, p.execTimeoutMs ?? 5000));
}

const asCheck = (name: string, problem: string | null): ReadinessCheck => (problem === null ? { name, ok: true } : { name, ok: false, detail: problem });

async function probeHealth(ip: string | undefined, port: number, timeoutMs: number): Promise<string | null> {
  if (!ip) return "the supervisor has no egress address";
  try {
    const res = await fetch(`http://${ip}:${port}/healthz`, { signal: AbortSignal.timeout(timeoutMs) });
    const body = await res.text();
    return res.ok ? null : `health endpoint answered ${res.status}: ${body.slice(0, 200)}`;
  } catch (err) {
    return `health endpoint unreachable: ${(err as Error).message}`;
  }
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
