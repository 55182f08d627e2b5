// The contract between the gateway and a container runtime. The gateway never
// talks to Docker directly: it asks a ComputeDriver, and every answer is
// evidence (identities, observed state), never a guess.

import type { Readable, Writable } from "node:stream";
import type { SandboxSpec } from "../lifecycle/spec.js";
import type { MonitorSink } from "./monitor-sink.js";
import type { Policy } from "../policy/index.js";

export type Role = "workload" | "supervisor";

/**
 * One container instance. Identity is id + startedAt (+ pid), compared for
 * equality only: a container restarted under the same id is another instance.
 */
export interface ContainerIdentity {
  id: string;
  name: string;
  imageId: string;
  startedAt: string;
  pid: number;
}

/** What one generation of a sandbox runs on; persisted before it is trusted. */
export interface RuntimeRecord {
  generation: number;
  /** Per-launch random value, carried in labels: tells our launch from a look-alike. */
  nonce: string;
  workload: ContainerIdentity;
  supervisor: ContainerIdentity;
  /** Address of the supervisor's egress proxy as the workload sees it, e.g. http://10.1.2.3:3128. */
  proxyUrl: string;
}

export interface LaunchRequest {
  sandboxId: string;
  name: string;
  generation: number;
  nonce: string;
  spec: SandboxSpec;
  /** The policy revision the supervisor starts with. */
  policy: { revision: number; policy: Policy };
  /** How the supervisor reaches and authenticates to the gateway (secrets: only for the supervisor). */
  control?: { url: string; fingerprint: string; token: string; graceMs: number };
}

/** Observed state of one container, read from the runtime (never inferred). */
export type ContainerObservation =
  | { state: "running"; identity: ContainerIdentity }
  | { state: "created"; identity: ContainerIdentity }
  | { state: "exited"; identity: ContainerIdentity; exitCode: number; finishedAt: string }
  | { state: "missing" }
  | { state: "unreachable"; detail: string };

export interface RuntimeObservation {
  workload: ContainerObservation;
  supervisor: ContainerObservation;
}

export interface ReadinessReport {
  ready: boolean;
  /** Each piece of evidence, in the order it was checked. */
  checks: { name: string; ok: boolean; detail?: string }[];
}

export interface ExecOptions {
  cmd: string[];
  tty: boolean;
  env?: Record<string, string>;
  cwd?: string;
  /** Initial terminal size for tty sessions. */
  size?: { cols: number; rows: number };
}

export interface ExecSession {
  /** Write stdin; end() sends EOF to the process. */
  stdin: Writable;
  stdout: Readable;
  /** Empty for tty sessions: a terminal merges both streams. */
  stderr: Readable;
  resize(cols: number, rows: number): Promise<void>;
  /** Resolves with the exit code once the process has ended and its output is drained. */
  exitCode: Promise<number>;
  /** Tear the session down (the process may keep running in the container). */
  close(): void;
}

/** Watches armed sandbox generations and reports what it proves through a MonitorSink. */
export interface RuntimeMonitor {
  start(): void;
  /** One monitor per sandbox generation: re-arming is a no-op, an older generation is refused. */
  arm(w: { sandboxId: string; name: string; generation: number; record: RuntimeRecord }): void;
  disarm(sandboxId: string): void;
  metrics(): object;
  close(): Promise<void>;
}

export interface MonitorConfig {
  recoveryDeadlineMs?: number;
}

export class ProvisionError extends Error {
  override readonly name = "ProvisionError";
}

export interface ComputeDriver {
  readonly kind: string;
  /** Whether launches run a supervisor that reports to the gateway's control plane. */
  readonly supervised: boolean;
  /** Make sure images and other shared objects exist; reports progress. */
  prepare(onProgress?: (msg: string) => void): Promise<void>;
  /**
   * Create everything one generation needs (network, workspace volume if
   * missing, both containers, not yet started). Throws ProvisionError and
   * leaves no containers behind on failure.
   */
  provision(req: LaunchRequest, onProgress?: (msg: string) => void): Promise<void>;
  /** Start the generation's containers and return their recorded identities. */
  start(req: LaunchRequest, onProgress?: (msg: string) => void): Promise<RuntimeRecord>;
  /** Readiness evidence for a started generation: identities, supervisor health, exec probe. */
  verify(req: LaunchRequest, record: RuntimeRecord): Promise<ReadinessReport>;
  /** Remove the generation's containers; keep the network and the workspace. */
  stop(sandboxId: string, generation: number): Promise<void>;
  /** Remove every runtime object of the sandbox, workspace included. */
  remove(sandboxId: string): Promise<void>;
  inspect(record: RuntimeRecord): Promise<RuntimeObservation>;
  exec(record: RuntimeRecord, opts: ExecOptions): Promise<ExecSession>;
  /** Address on which supervisors can reach the gateway (after prepare); null when it has no supervisors. */
  controlAddress(): string | null;
  /** A monitor for this runtime, or null when the runtime cannot be watched. */
  watch(sink: MonitorSink, config: MonitorConfig): RuntimeMonitor | null;
  close(): Promise<void>;
}
