// Types of what the gateway API returns (the SDK's and the CLI's), and what the SDK
// takes. Types only: a unit test (sdk-types.test.ts) checks them against the gateway's.

import type { FileStatView } from "../files/api.js";
import type { Phase } from "../lifecycle/phases.js";

export type { Phase };
/** What a sandbox's path is (`GET /v1/sandboxes/:name/files/stat`). */
export type FileStat = FileStatView;

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
  phase: Phase;
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
  oldPhase: Phase | null;
  newPhase: Phase | null;
  reasonText: string | null;
  message: string | null;
  time: string;
}

/** One frame of `GET /v1/watch`: a committed event and the sandbox as it is after it (null once deleted). */
export interface WatchEvent {
  event: EventView;
  sandbox: SandboxView | null;
}

/** What `POST /v1/sandboxes` takes (the CLI's `sandbox create` flags). */
export interface CreateSandboxInput {
  /** 1-63 lowercase letters, digits and '-', starting and ending with a letter or digit. */
  name: string;
  /** The workload image (default: the gateway's workload image). */
  image?: string;
  /** The workload's main process (default: an idle process). */
  command?: string[];
  /** The workload's environment. */
  env?: Record<string, string>;
  /** The network policy: YAML text, or the parsed object (docs/policy.md); default: deny all egress. */
  policy?: string | Record<string, unknown>;
  resources?: { memoryMb?: number; cpus?: number; pids?: number };
  /** The workspace's size: "512M", "10G", "1GiB" or bytes (default 10G). */
  disk?: string | number;
  labels?: Record<string, string>;
  /** The workload's working directory, exec's default (default /sandbox). */
  workdir?: string;
  /** Stop each run this long after it began: seconds, or "90s", "30m", "8h", "7d". */
  ttl?: string | number;
  /** Stop after no exec, connect or egress for this long. */
  idleStop?: string | number;
}

/** One record of `GET /v1/sandboxes/:name/logs`: a line (or a part of one: `p`) of stdout (`out`) or stderr (`err`). */
export interface LogRecord {
  /** When Docker read it: RFC 3339, UTC, nanoseconds. */
  t: string;
  s: "out" | "err";
  /** The text, without its newline. */
  l: string;
  /** Set when no newline ended it (a long line split at the gateway's bound, or output without a final newline). */
  p?: true;
}

/** The answer of `PUT /v1/sandboxes/:name/policy`. */
export interface PolicySetResult {
  revision: number;
  /** Whether the gateway sent it to a running supervisor. */
  pushed: boolean;
  /**
   * The sandbox's phase when the revision was accepted. `Recovering` (Docker lost): the
   * supervisor enforces it once it acks it (its control session needs no Docker), and the
   * sandbox is Ready again only after that.
   */
  phase: Phase;
  /** With `wait`: whether the supervisor acknowledged it in time; without: null. */
  enforced: boolean | null;
  /** With `wait`: the open connections the revision no longer allows, closed by the supervisor. */
  connectionsClosed: number | null;
  boundary: BoundaryView | null;
}

/** The answer of `GET /v1/sandboxes/:name/policy`. */
export interface PolicyView {
  sandbox: string;
  revision: number;
  hash: string;
  createdAt: string;
  /** The parsed policy. */
  policy: unknown;
  /** The text it was given as (null when it was given as an object). */
  source: string | null;
  boundary: BoundaryView | null;
}

/** One entry of `files.list`: a path relative to the listed directory. */
export interface FileEntry {
  path: string;
  type: "file" | "directory" | "symlink" | "hardlink" | "fifo" | "char" | "block";
  /** Permission bits. */
  mode: number;
  /** Bytes (files; 0 for every other type). */
  size: number;
  /** Modification time, seconds since the epoch. */
  mtime: number;
  /** A symlink's target or a hard link's source; "" otherwise. */
  linkname: string;
}
