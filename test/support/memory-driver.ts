// TEST DOUBLE: an in-memory ComputeDriver for unit and API tests of the gateway
// that do not need Docker. It keeps containers as plain records and lets a test
// script failures and delays. Never used by the product.

import { PassThrough } from "node:stream";
import {
  ProvisionError,
  type ComputeDriver,
  type ExecOptions,
  type ExecSession,
  type ExecSignal,
  type LaunchRequest,
  type ReadinessReport,
  type Role,
  type RuntimeRecord,
  type WorkloadStats,
} from "../../src/driver/contract.js";
import { DEFAULT_UID_BASE, processUserProblem, roleIds, type HostIdFiles } from "../../src/driver/docker/host-ids.js";

/** FAKE resource figures the memory driver reports for a running workload: fixed numbers, never measured. */
export const FAKE_STATS: WorkloadStats = { cpuPercent: 1.5, memory: { usedBytes: 8 * 1024 * 1024, limitBytes: 256 * 1024 * 1024 }, pids: { current: 3, limit: 256 } };

interface FakeContainer {
  sandboxId: string;
  generation: number;
  role: Role;
  id: string;
  running: boolean;
  startedAt: string;
  exitCode: number;
}

export class MemoryDriver implements ComputeDriver {
  readonly kind = "memory (test double)";
  readonly supervised = false;
  readonly containers = new Map<string, FakeContainer>();
  readonly workspaces = new Set<string>();
  readonly calls: string[] = [];
  /** Images that "do not exist": provisioning with them fails. */
  missingImages = new Set<string>(["does-not-exist:latest"]);
  /** Delay each runtime call by this many ms (to widen race windows in tests). */
  delayMs = 0;
  /** While set, provision() waits for it: a test keeps a launch in Provisioning as long as it needs. */
  gate: Promise<void> | undefined;
  ready = true;
  /** The host's account files as the (real) check of a policy's process.user reads them: an empty host unless a test fills it. */
  hostIdFiles: HostIdFiles = { passwd: "", group: "", subuid: "", subgid: "" };
  private seq = 0;

  checkWorkloadUser(user: string): string | null {
    return processUserProblem(user, roleIds(DEFAULT_UID_BASE), this.hostIdFiles);
  }

  private async pause(): Promise<void> {
    if (this.delayMs > 0) await new Promise((r) => setTimeout(r, this.delayMs));
  }

  async prepare(): Promise<void> {}

  async provision(req: LaunchRequest): Promise<void> {
    this.calls.push(`provision ${req.name} g${req.generation}`);
    await this.pause();
    await this.gate;
    const image = req.spec.image ?? "sandgate-workload:test";
    if (this.missingImages.has(image)) throw new ProvisionError(`No such image: ${image}`);
    this.workspaces.add(req.sandboxId);
    for (const role of ["supervisor", "workload"] as const) {
      const id = `c${++this.seq}`;
      this.containers.set(id, { sandboxId: req.sandboxId, generation: req.generation, role, id, running: false, startedAt: "", exitCode: 0 });
    }
  }

  private find(sandboxId: string, generation: number, role: Role): FakeContainer | undefined {
    return [...this.containers.values()].find((c) => c.sandboxId === sandboxId && c.generation === generation && c.role === role);
  }

  async start(req: LaunchRequest): Promise<RuntimeRecord> {
    this.calls.push(`start ${req.name} g${req.generation}`);
    await this.pause();
    const ids = {} as Record<Role, RuntimeRecord["workload"]>;
    for (const role of ["supervisor", "workload"] as const) {
      const c = this.find(req.sandboxId, req.generation, role);
      if (!c) throw new Error(`no ${role} container`);
      c.running = true;
      c.startedAt = new Date().toISOString();
      ids[role] = { id: c.id, name: `${req.name}-${role}`, imageId: "sha256:test", startedAt: c.startedAt, pid: 100 + this.seq };
    }
    return { generation: req.generation, nonce: req.nonce, workload: ids.workload, supervisor: ids.supervisor, proxyUrl: "http://proxy.test:3128" };
  }

  async verify(): Promise<ReadinessReport> {
    await this.pause();
    return { ready: this.ready, checks: [{ name: "memory", ok: this.ready, detail: this.ready ? undefined : "scripted not ready" }] };
  }

  async stop(sandboxId: string, generation: number): Promise<void> {
    this.calls.push(`stop ${sandboxId} g${generation}`);
    await this.pause();
    for (const [id, c] of this.containers) if (c.sandboxId === sandboxId && c.generation <= generation) this.containers.delete(id);
  }

  async remove(sandboxId: string): Promise<void> {
    this.calls.push(`remove ${sandboxId}`);
    await this.pause();
    for (const [id, c] of this.containers) if (c.sandboxId === sandboxId) this.containers.delete(id);
    this.workspaces.delete(sandboxId);
  }

  /** The user workloads run as when their policy names none. */
  workloadUser = "2000000000:2000000000";
  /** Every exec's options, in order (what the gateway asked for). */
  readonly execOptions: ExecOptions[] = [];
  /** Signals sent to `sleep` commands, in order. */
  readonly signals: ExecSignal[] = [];
  /** `sleep` commands running now. */
  sleeping = 0;
  /** When false, signal() is absent: a runtime that cannot signal. */
  canSignal = true;

  /**
   * Echoes the command line on stdout and exits 0; `cat` copies stdin to stdout
   * (with backpressure) until stdin ends, then exits 0; `sink` reads stdin to nowhere
   * and runs until the session is closed (a process that outlives its stdin);
   * `sg-env` prints its working directory, user and environment (`cwd=`, `user=`,
   * then KEY=VALUE lines, sorted); `exit N` exits N; `sleep` prints "sleeping" and
   * runs until a signal (exit 128 + its number; `sleep ignore-term` ignores TERM,
   * `sleep ignore-all` every signal but KILL); `sg-stderr WORDS` prints "out" on stdout
   * and WORDS on stderr.
   */
  async exec(_record: RuntimeRecord, opts: ExecOptions): Promise<ExecSession> {
    this.execOptions.push(opts);
    const stdin = new PassThrough();
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    let exitCode: Promise<number>;
    let errText = "";
    let signal: ((sig: ExecSignal) => Promise<"sent" | "gone">) | undefined;
    if (opts.cmd[0] === "sleep") {
      stdin.resume();
      this.sleeping++;
      let ended = false;
      let end!: (code: number) => void;
      const finished = new Promise<number>((resolve) => (end = resolve)).then((code) => {
        ended = true;
        this.sleeping--;
        stdout.end();
        return code;
      });
      // As Docker's: a session closed while its process runs ends without an exit code
      // (the "process" runs on until a signal ends it).
      exitCode = Promise.race([finished, new Promise<number>((_, reject) => stdout.once("close", () => reject(new Error("exec did not report an exit code"))))]);
      exitCode.catch(() => undefined);
      const numbers: Record<ExecSignal, number> = { HUP: 1, INT: 2, QUIT: 3, KILL: 9, TERM: 15 };
      signal = async (sig) => {
        if (ended) return "gone";
        this.signals.push(sig);
        const ignored = sig !== "KILL" && (opts.cmd[1] === "ignore-all" || (sig === "TERM" && opts.cmd[1] === "ignore-term"));
        if (!ignored) end(128 + numbers[sig]);
        return "sent";
      };
      stdout.write("sleeping\n");
      // The session closed: the "process" keeps running until signalled, as in a container.
    } else if (opts.cmd[0] === "exit") {
      stdout.end();
      exitCode = Promise.resolve(Number(opts.cmd[1] ?? 0));
    } else if (opts.cmd[0] === "sg-env") {
      const env = Object.entries(opts.env ?? {}).sort(([a], [b]) => (a < b ? -1 : 1)).map(([k, v]) => `${k}=${v}\n`);
      stdout.end(`cwd=${opts.cwd ?? "(default)"}\nuser=${opts.user ?? "(default)"}\n${env.join("")}`);
      exitCode = Promise.resolve(0);
    } else if (opts.cmd[0] === "sg-stderr") {
      stdout.end("out\n");
      errText = `${opts.cmd.slice(1).join(" ")}\n`;
      exitCode = Promise.resolve(0);
    } else if (opts.cmd[0] === "cat") {
      stdin.pipe(stdout);
      exitCode = new Promise((resolve) => stdout.once("end", () => resolve(0)));
    } else if (opts.cmd[0] === "sink") {
      stdin.resume();
      stdin.once("end", () => this.sinkDrained++);
      exitCode = new Promise((resolve) => stdout.once("close", () => resolve(137)));
    } else {
      stdout.end(opts.cmd.join(" ") + "\n");
      exitCode = Promise.resolve(0);
    }
    stderr.end(errText);
    this.execs++;
    return {
      stdin,
      stdout,
      stderr,
      resize: async () => {},
      exitCode,
      close: () => {
        this.closedExecs++;
        stdin.destroy();
        stdout.destroy();
      },
      ...(signal && this.canSignal ? { signal } : {}),
    };
  }

  /** Exec sessions started and closed (leak checks). */
  execs = 0;
  /** `sink` sessions whose stdin reached its end. */
  sinkDrained = 0;
  closedExecs = 0;

  /** While set, stats() fails with this message (a runtime that cannot measure). */
  statsError: string | null = null;

  /** FAKE_STATS for a running workload container of the record; throws like Docker for a missing one. */
  async stats(record: RuntimeRecord): Promise<WorkloadStats> {
    await this.pause();
    if (this.statsError !== null) throw new Error(this.statsError);
    const c = this.containers.get(record.workload.id);
    if (!c?.running) throw new Error(`No such container: ${record.workload.id}`);
    return FAKE_STATS;
  }

  /** No supervisors to talk to. */
  controlAddress(): null {
    return null;
  }

  /** No monitor: the in-memory runtime never fails on its own. */
  watch(): null {
    return null;
  }

  async close(): Promise<void> {}
}
