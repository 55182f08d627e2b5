// The contract between the gateway and a container runtime, in both directions:
// what the gateway asks of a ComputeDriver, and what a runtime monitor may ask
// of the gateway (MonitorSink). Types only: this file imports no implementation.
// Every answer a driver gives is evidence (identities, observed state), never a guess.

import type { Readable, Writable } from "node:stream";
import type { RoleVerdicts } from "../lifecycle/supervision.js";
import type { SandboxSpec } from "../lifecycle/spec.js";
import type { Policy } from "../policy/index.js";
import type { ProxyBounds } from "../protocol/launch.js";
import { SandgateError } from "../util/errors.js";

export type Role = "workload" | "supervisor";

/**
 * One container instance as recorded at start. Whether a container still is this
 * instance is decided in one place per driver (Docker: src/driver/docker/identity.ts).
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

/** How a supervisor reaches and authenticates to the gateway (secrets: only for the supervisor). */
export interface LaunchControl {
  url: string;
  fingerprint: string;
  token: string;
  graceMs: number;
}

/** What a supervisor is told of the host's network at launch (nothing secret). */
export interface LaunchNetwork {
  /** Every address of the gateway's host (all interfaces), canonical: the proxy refuses them. */
  hostAddresses: string[];
  /** The host's DNS servers for the supervisor to ask directly; null: the container's own resolver. */
  resolvers: string[] | null;
  /** Bounds on the workload's connections to its proxy; absent: the supervisor's defaults. */
  connections?: ProxyBounds;
}

export interface LaunchRequest {
  sandboxId: string;
  name: string;
  generation: number;
  nonce: string;
  spec: SandboxSpec;
  /** The policy revision the supervisor starts with (its fixed sections shape the workload). */
  policy: { revision: number; policy: Policy };
  control?: LaunchControl;
  network?: LaunchNetwork;
}

export interface ReadinessCheck {
  name: string;
  ok: boolean;
  detail?: string;
}

export interface ReadinessReport {
  ready: boolean;
  /** Each piece of evidence, in the order it was checked. */
  checks: ReadinessCheck[];
  /**
   * The workload (the instance launched) has exited: it will never be ready. Its exit
   * code and the last lines of its output, for the event that says why.
   */
  exited?: { exitCode: number; output: string[] };
}

export interface ExecOptions {
  cmd: string[];
  tty: boolean;
  env?: Record<string, string>;
  cwd?: string;
  /** "uid" or "uid:gid" to run as; undefined: the workload's own user (the gateway allows no other). */
  user?: string;
  /** Initial terminal size for tty sessions. */
  size?: { cols: number; rows: number };
}

/** Signals an exec's process may be sent (as a terminal sends them to its foreground job). */
export const EXEC_SIGNALS = ["INT", "TERM", "HUP", "QUIT", "KILL"] as const;
export type ExecSignal = (typeof EXEC_SIGNALS)[number];

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
  /**
   * Send a signal to the process and its process group: "sent", or "gone" when it has
   * already ended. Absent when the runtime cannot signal an exec.
   */
  signal?(sig: ExecSignal): Promise<"sent" | "gone">;
}

/** One line of a container's output, as the runtime kept it. */
export interface LogLine {
  /** When the runtime read it from the process: canonical RFC 3339, UTC, nine fraction digits (src/util/log-time.ts). */
  t: string;
  s: "out" | "err";
  /** The text without its newline; bytes that are not UTF-8 read as U+FFFD. */
  l: string;
  /** No newline ended it: a long line cut here (the next part continues it), or output the process never ended. */
  p?: true;
}

export interface LogRequest {
  sandboxId: string;
  generation: number;
  role: Role;
  /** The generation's recorded runtime while its containers may be there; null: read what was kept of it. */
  record: RuntimeRecord | null;
  /** Keep reading as the container writes, until it stops. */
  follow: boolean;
  /** Only the last `tail` lines (then follow). */
  tail?: number;
  /** Only lines at or after this canonical time. */
  since?: string;
  signal: AbortSignal;
}

/** How a log read ended. */
export type LogEnd =
  | { kind: "end"; reason: string }
  | { kind: "aborted" }
  | { kind: "error"; code: "not_found" | "unavailable"; message: string };

/** One armed sandbox generation, as a monitor watches it. */
export interface Watched {
  sandboxId: string;
  name: string;
  generation: number;
  record: RuntimeRecord;
}

/**
 * Watches armed sandbox generations and reports the facts it proves through a MonitorSink.
 * It decides nothing about a sandbox's lifecycle: the gateway's generation handle does
 * (src/lifecycle/supervision.ts), and tells it the next step in report()'s answer.
 */
export interface RuntimeMonitor {
  start(): void;
  /** One monitor per sandbox generation: re-arming is a no-op, an older generation is refused. */
  arm(w: Watched): void;
  disarm(sandboxId: string): void;
  /** Inspect an armed sandbox again (a Recovering one is re-checked while the runtime answers). */
  check(sandboxId: string): void;
  metrics(): object;
  /** Checks and timers still pending (leak checks). */
  pending(): { checks: number; timers: number };
  close(): Promise<void>;
}

/** What a runtime monitor proved, reported as it is proved. */
export type MonitorFact =
  /** The runtime's channel (the events stream) is open: every armed sandbox is inspected next. */
  | { kind: "channel"; up: true }
  /** It broke or could not be opened: every armed sandbox lost contact (nothing is stopped). */
  | { kind: "channel"; up: false; cause: string }
  /** One inspect of both containers of an armed generation. */
  | { kind: "verdicts"; sandboxId: string; generation: number; verdicts: RoleVerdicts }
  /** The runtime's re-verification probes of a generation, as a "probe" step asked; `exec`: the exec probe was among them. */
  | { kind: "probed"; sandboxId: string; generation: number; checks: ReadinessCheck[]; exec: boolean };

/** What the monitor does next for the generation a fact was about. */
export type MonitorStep =
  | { do: "nothing" }
  /** The generation is not (or no longer) the sandbox's current one: disarm it, count the fact as stale. */
  | { do: "stale" }
  /** Run the re-verification probes (supervisor health, transparent path; exec probe when `exec`) and report them. */
  | { do: "probe"; exec: boolean }
  /** Inspect again after the attribution grace (a killed supervisor's exit takes a moment to be reported). */
  | { do: "recheck" };

/**
 * The gateway's side of a runtime monitor: one call. The gateway's handle of the generation
 * decides (compare-and-set on sandbox, generation and phase through the lifecycle machine)
 * and answers with the monitor's next step.
 */
export interface MonitorSink {
  report(fact: MonitorFact): Promise<MonitorStep>;
}

/**
 * The default recovery deadline (the gateway's --recovery-deadline), in seconds: 5 min (recovery rule 12). A
 * live-restore daemon answers only after it has restored every container: 44–50 s with 100
 * sandboxes on a 2-core host (docs/performance.md), so a shorter default would fail healthy
 * sandboxes closed on a plain daemon restart once a host holds a few hundred.
 */
export const RECOVERY_DEADLINE_DEFAULT_S = 300;

/**
 * One call the driver made to its runtime's API, for the gateway's metrics. `endpoint` is a
 * route template (`GET /containers/{id}/json`), never an id or a name: a bounded label.
 * `seconds` is null for what is not a call's latency (a stream that broke after it opened).
 */
export interface RuntimeCall {
  endpoint: string;
  seconds: number | null;
  /** Null when it succeeded; else what went wrong, from a small fixed set. */
  error: "http_4xx" | "http_5xx" | "timeout" | "aborted" | "transport" | null;
}

/** A running workload's resource use, measured now by the runtime. */
export interface WorkloadStats {
  /** Percent of one CPU over the runtime's sample (200 = two cores busy); null when it had no earlier sample. */
  cpuPercent: number | null;
  /** Memory in use (the page cache it can drop left out, as `docker stats` shows it) and the limit. */
  memory: { usedBytes: number; limitBytes: number | null };
  pids: { current: number; limit: number | null };
  /**
   * Packets of the workload its supervisor's namespace dropped since the sandbox started: ICMP,
   * other protocols than TCP and UDP, and anything sent to be forwarded (the transparent path:
   * the supervisor never sees these, so they are counted here, not in the audit trail). Absent
   * where the runtime has no such path or could not read it.
   */
  dropped?: { icmp: number; other: number; forward: number };
}

export class ProvisionError extends SandgateError {
  override readonly name = "ProvisionError";
  constructor(message: string, options?: ErrorOptions) {
    super(message, "provision_failed", options);
  }
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
  /**
   * Why this runtime cannot run `spec` at all, in one line naming the value and what is
   * allowed (an image it does not have, more CPUs than its host has, a workspace larger
   * than its filesystem); null when it can, or when it cannot say now (provisioning will).
   * Checked at create, before anything is stored, as docker run checks. Absent: no such checks.
   */
  checkSpec?(spec: SandboxSpec): Promise<string | null>;
  /** Start the generation's containers and return their recorded identities. */
  start(req: LaunchRequest, onProgress?: (msg: string) => void): Promise<RuntimeRecord>;
  /** The runtime's readiness evidence for a started generation: identities, supervisor health, exec probe. */
  verify(req: LaunchRequest, record: RuntimeRecord): Promise<ReadinessReport>;
  /** Remove the containers of this generation and of every older one; keep the network and the workspace. */
  stop(sandboxId: string, generation: number): Promise<void>;
  /** Remove every runtime object of the sandbox, workspace included. */
  remove(sandboxId: string): Promise<void>;
  /** Used and total bytes of a size-limited workspace that is in place (mounted), else null. */
  workspaceUsage?(sandboxId: string): { usedBytes: number; capacityBytes: number } | null;
  exec(record: RuntimeRecord, opts: ExecOptions): Promise<ExecSession>;
  /** The workload's resource use now (one sample, not a stream); throws when the runtime cannot say. */
  stats?(record: RuntimeRecord): Promise<WorkloadStats>;
  /** Report every call to the runtime's API (the driver's and its monitor's) to `observe`; called before watch(). */
  instrument?(observe: (call: RuntimeCall) => void): void;
  /**
   * One container's output in order, one deliver() per line; reading waits for the
   * promise deliver returns (backpressure). A follow survives runtime restarts without
   * a line twice or lost. Absent: this runtime keeps no logs.
   */
  logs?(req: LogRequest, deliver: (line: LogLine) => void | Promise<void>): Promise<LogEnd>;
  /** The user ("uid:gid") a workload runs as when its policy names none; undefined when the runtime does not say. */
  readonly workloadUser?: string;
  /**
   * Why a workload may not run as `user` (a policy's process.user, already validated) on this
   * runtime's host, in one line; null when it may. Absent: the runtime has no such rule.
   */
  checkWorkloadUser?(user: string): string | null;
  /** Address on which supervisors can reach the gateway (after prepare); null when it has no supervisors. */
  controlAddress(): string | null;
  /** A monitor for this runtime (it owns its own connection), or null when the runtime cannot be watched. */
  watch(sink: MonitorSink): RuntimeMonitor | null;
  close(): Promise<void>;
}
