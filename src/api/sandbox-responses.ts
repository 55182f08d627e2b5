// Answer schemas of the sandbox routes: a sandbox (full, detailed, a list row), its
// reason, spec, containers, boundary and workspace, and its event log. Split from
// responses.ts by resource (each file stays readable on its own); responses.ts re-exports
// everything here, so importers name one module. Contract only: zod and pure vocabulary.

import { z } from "zod";
import { Phase, Time, count, next, nullableString, seqCursor } from "./vocabulary.js";

// ---- sandboxes ----

/** Why a sandbox is in Error, or why the gateway stopped it (src/lifecycle/phases.ts SandboxReason). */
export const SandboxReason = z.union([
  z.strictObject({ code: z.enum(["ProvisioningFailed", "SupervisorReplaced", "WorkloadReplaced", "BoundaryUnhealthy", "RuntimeUnavailable", "TtlExpired", "IdleTimeout"]), detail: z.string() }),
  z.strictObject({ code: z.enum(["SupervisorExited", "WorkloadExited"]), exitCode: z.number().int(), detail: z.string().optional() }),
  z.strictObject({ code: z.enum(["SupervisorMissing", "WorkloadMissing"]), detail: z.string().optional() }),
]);

export const SandboxSpecView = z.strictObject({
  image: z.string().optional().describe("absent: the locally built default workload image"),
  command: z.array(z.string()).optional().describe("absent: an idle process that keeps the sandbox up"),
  env: z.record(z.string(), z.string()),
  resources: z.strictObject({ memoryMb: z.number(), cpus: z.number(), pids: z.number().int() }),
  diskBytes: count.optional().describe("the workspace's size; absent only for sandboxes created before workspaces had one"),
  workdir: z.string().optional(),
  ttlSeconds: z.number().min(0).optional().describe("each generation is stopped this long after its launch (reason TtlExpired)"),
  idleStopSeconds: z.number().min(0).optional().describe("stopped after no exec, connect or egress for this long (reason IdleTimeout)"),
});

export const ContainerIdentityView = z.strictObject({ id: z.string(), name: z.string(), imageId: z.string(), startedAt: z.string(), pid: z.number().int() });

export const RuntimeView = z
  .strictObject({ generation: z.number().int(), nonce: z.string(), workload: ContainerIdentityView, supervisor: ContainerIdentityView, proxyUrl: z.string() })
  .describe("The containers of the generation last launched.");

export const BoundaryHealth = z
  .strictObject({
    sandboxId: z.string(),
    session: z.enum(["up", "down"]),
    /** Generation of the live session, null when down. */
    generation: z.number().int().nullable(),
    /** Last sign of life: a heartbeat or a WebSocket ping of the session. */
    lastHeartbeatAt: Time.nullable(),
    /** Revision the supervisor acknowledged / reports enforcing in this session; null before its first ack. */
    enforcedRevision: z.number().int().nullable(),
    desiredRevision: z.number().int().nullable(),
    proxy: z.enum(["listening", "not_listening"]).nullable(),
    lockdown: z.boolean().nullable(),
    healthy: z.boolean(),
    /** Why not healthy; null when healthy. */
    problem: nullableString,
  })
  .describe("The supervisor's control session and what it enforces; null where the runtime has no supervisors.");
export type BoundaryHealth = z.infer<typeof BoundaryHealth>;

export const DiskView = z
  .strictObject({
    limitBytes: count,
    /** Null when the workspace is not mounted (e.g. after a host restart, until the next start). */
    usedBytes: count.nullable(),
    /** What the filesystem holds at most (the limit less its own metadata); null when not mounted. */
    capacityBytes: count.nullable(),
  })
  .describe("The workspace (/sandbox): its limit, and what it uses while mounted.");
export type DiskView = z.infer<typeof DiskView>;

/** What --ttl and --idle-stop look at, for `sandbox get`. */
export const ExpiryView = z.strictObject({
  /** When the current generation's TTL runs out, or null. */
  ttlDeadline: Time.nullable(),
  /** The last exec, connect or egress seen (or the launch), or null when none is known. */
  lastActivityAt: Time.nullable(),
  /** Exec and connect sessions open now. */
  openSessions: count,
});
export type ExpiryView = z.infer<typeof ExpiryView>;

const sandboxHead = {
  id: z.string(),
  name: z.string(),
  phase: Phase,
  generation: z.number().int(),
  reason: SandboxReason.nullable(),
  reasonText: nullableString.describe("the reason as one line for people"),
  host: nullableString.describe("the host whose Docker daemon runs it (its gateway's `--host-name`); null for a sandbox recorded before hosts were"),
  labels: z.record(z.string(), z.string()),
};

export const SandboxView = z
  .strictObject({
    ...sandboxHead,
    spec: SandboxSpecView,
    runtime: RuntimeView.nullable(),
    boundary: BoundaryHealth.nullable(),
    disk: DiskView.nullable(),
    createdAt: Time,
    updatedAt: Time,
  })
  .describe("A sandbox: its phase and why, what it was created with, its containers, boundary and workspace.");
export type SandboxView = z.infer<typeof SandboxView>;

/** `sandbox get`: the view with its workspace usage and expiry. */
export const SandboxDetailView = SandboxView.extend({ expiry: ExpiryView });
export type SandboxDetailView = z.infer<typeof SandboxDetailView>;

export const SandboxSummaryView = z
  .strictObject({
    ...sandboxHead,
    workload: nullableString.describe("the live generation's workload container id; null once it has ended"),
    supervisor: nullableString.describe("the live generation's supervisor container id; null once it has ended"),
    createdAt: Time,
    updatedAt: Time,
  })
  .describe("A list row (`view=lean`): what `sandbox list` shows.");
export type SandboxSummaryView = z.infer<typeof SandboxSummaryView>;

export const SandboxPage = z.union([
  z.strictObject({ sandboxes: z.array(SandboxView), next }),
  z.strictObject({ sandboxes: z.array(SandboxSummaryView), next }),
]);

export const EventView = z
  .strictObject({
    seq: z.number().int(),
    sandboxId: z.string(),
    sandboxName: z.string(),
    generation: z.number().int(),
    kind: z.enum(["phase", "deleted", "info"]),
    oldPhase: Phase.nullable(),
    newPhase: Phase.nullable(),
    reason: SandboxReason.nullable(),
    reasonText: nullableString,
    message: nullableString,
    data: z.unknown().describe("kind-specific detail, or null"),
    time: Time,
  })
  .describe("One entry of a sandbox's event log.");
export type EventView = z.infer<typeof EventView>;

export const EventsPage = z.strictObject({ events: z.array(EventView), next: seqCursor });
