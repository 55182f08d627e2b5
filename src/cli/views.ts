// Types of what the gateway API returns, as the CLI reads it.

export interface ContainerIdentityView {
  id: string;
  name: string;
  imageId: string;
  startedAt: string;
  pid: number;
}

export interface BoundaryView {
  session: "up" | "down";
  generation: number | null;
  lastHeartbeatAt: string | null;
  enforcedRevision: number | null;
  desiredRevision: number | null;
  healthy: boolean;
  problem: string | null;
}

export interface SandboxView {
  id: string;
  name: string;
  phase: string;
  generation: number;
  reason: { code: string; exitCode?: number; detail?: string } | null;
  reasonText: string | null;
  spec: { image?: string; command?: string[]; env: Record<string, string>; resources: { memoryMb: number; cpus: number; pids: number }; workdir?: string; ttlSeconds?: number; idleStopSeconds?: number };
  runtime: { generation: number; nonce: string; workload: ContainerIdentityView; supervisor: ContainerIdentityView; proxyUrl: string } | null;
  boundary: BoundaryView | null;
  /** Absent from create/list answers; null for a sandbox without a size limit. */
  disk?: { limitBytes: number; usedBytes: number | null; capacityBytes: number | null } | null;
  labels: Record<string, string>;
  /** Only in `sandbox get`: what --ttl and --idle-stop look at. */
  expiry?: { ttlDeadline: string | null; lastActivityAt: string | null; openSessions: number };
  createdAt: string;
  updatedAt: string;
}

/** A row of GET /v1/sandboxes?view=lean: container ids only of the live generation, else null. */
export interface SandboxSummaryView extends Pick<SandboxView, "id" | "name" | "phase" | "generation" | "reason" | "reasonText" | "labels" | "createdAt" | "updatedAt"> {
  workload: string | null;
  supervisor: string | null;
}

export interface EventView {
  seq: number;
  sandboxId: string;
  sandboxName: string;
  generation: number;
  kind: string;
  oldPhase: string | null;
  newPhase: string | null;
  reasonText: string | null;
  message: string | null;
  time: string;
}
