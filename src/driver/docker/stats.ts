// A workload's resource use from Docker's stats answer, computed as `docker stats` does:
// CPU as the container's share of the host's CPU time between two samples, times the
// online CPUs (100 % = one core); memory less the page cache the kernel can drop. Pure.

import type { WorkloadStats } from "../contract.js";
import type { ContainerStats } from "./engine/types.js";

/** Larger than any real limit: Docker's "no limit" (cgroup "max"), shown as none. */
const UNLIMITED = 2 ** 53;

const limitOrNull = (n: number | undefined): number | null => (n === undefined || n <= 0 || n >= UNLIMITED ? null : n);

export function workloadStatsOf(s: ContainerStats): WorkloadStats {
  return { cpuPercent: cpuPercent(s), memory: memoryOf(s), pids: { current: s.pids_stats?.current ?? 0, limit: limitOrNull(s.pids_stats?.limit) } };
}

function cpuPercent(s: ContainerStats): number | null {
  const now = s.cpu_stats;
  const before = s.precpu_stats;
  const cpu = (now?.cpu_usage?.total_usage ?? 0) - (before?.cpu_usage?.total_usage ?? 0);
  const system = (now?.system_cpu_usage ?? 0) - (before?.system_cpu_usage ?? 0);
  // No earlier sample (or a counter reset): nothing to compare against.
  if (before?.system_cpu_usage === undefined || before.system_cpu_usage === 0 || system <= 0 || cpu < 0) return null;
  const cpus = [now?.online_cpus, now?.cpu_usage?.percpu_usage?.length].find((n) => n !== undefined && n > 0) ?? 1;
  return Math.round((cpu / system) * cpus * 100 * 100) / 100;
}

function memoryOf(s: ContainerStats): WorkloadStats["memory"] {
  const m = s.memory_stats;
  const usage = m?.usage ?? 0;
  const cache = m?.stats?.inactive_file ?? m?.stats?.total_inactive_file ?? 0;
  return { usedBytes: cache < usage ? usage - cache : usage, limitBytes: limitOrNull(m?.limit) };
}
