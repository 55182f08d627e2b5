// Exec as users ask for it: the user it runs as (the workload's own only), its
// environment and working directory, a timeout, detached commands and their status,
// and the activity --idle-stop watches. The runtime work is the driver's exec; the
// phase check is the SandboxService's.

import type { Logger } from "pino";
import type { ComputeDriver, ExecOptions, ExecSession, ExecSignal } from "../../driver/contract.js";
import { EXEC_TIMEOUT_EXIT, resolveExecUser } from "../../lifecycle/process-input.js";
import type { SandboxRecord, Store } from "../../store/contract.js";
import { ApiError } from "../errors.js";
import type { ActivityTracker } from "./activity.js";
import { DetachedExecs, type DetachedExecView } from "./detached-execs.js";
import type { SandboxReadModel } from "./read-model.js";
import type { SandboxService } from "./service.js";
import { activePolicy } from "./tasks.js";
import { errorMessage } from "../../util/error-message.js";

export interface ExecRequest {
  cmd: string[];
  tty: boolean;
  size?: { cols: number; rows: number };
  env?: Record<string, string>;
  /** Absolute; default the workload's working directory. */
  workdir?: string;
  /** "uid" or "uid:gid": the workload's own user only (resolveExecUser). */
  user?: string;
  /** At expiry the command's process group gets SIGTERM, then SIGKILL KILL_GRACE_MS later; its exit code is 124. */
  timeoutSeconds?: number;
}

/** How long a timed-out command has between SIGTERM and SIGKILL, and after SIGKILL before the gateway stops waiting. */
export const KILL_GRACE_MS = 5000;

export interface ExecServiceDeps {
  service: SandboxService;
  read: SandboxReadModel;
  store: Store;
  driver: ComputeDriver;
  activity: ActivityTracker;
  log: Logger;
  detached?: DetachedExecs;
}

export class ExecService {
  readonly detached: DetachedExecs;
  /** Timeout timers pending (a timeout outlives its client: the command is ended anyway). */
  readonly #timers = new Set<NodeJS.Timeout>();
  /** Sessions of detached commands still running. */
  readonly #sessions = new Set<ExecSession>();
  #closed = false;

  constructor(private readonly d: ExecServiceDeps) {
    this.detached = d.detached ?? new DetachedExecs();
  }

  /** An attached session (exec, connect); it counts as activity while it is open. */
  async start(nameOrId: string, req: ExecRequest): Promise<ExecSession & { timedOut(): boolean }> {
    const s = await this.d.read.driven(nameOrId);
    const opts: ExecOptions = { cmd: req.cmd, tty: req.tty };
    if (req.size) opts.size = req.size;
    if (req.env && Object.keys(req.env).length > 0) opts.env = req.env;
    if (req.workdir !== undefined) opts.cwd = req.workdir;
    if (req.user !== undefined) opts.user = await this.#user(s, req.user);
    const session = await this.d.service.exec(s.id, opts);
    const end = this.d.activity.begin(s.id);
    const timed = req.timeoutSeconds === undefined ? { session, timedOut: () => false } : this.#withTimeout(session, req.timeoutSeconds * 1000, s);
    timed.session.exitCode.then(end, end);
    const inner = timed.session;
    return {
      ...inner,
      close: () => {
        end();
        inner.close();
      },
      timedOut: timed.timedOut,
    };
  }

  /** A command started with no streams (its output is not kept); its status is in the table. */
  async detach(nameOrId: string, req: Omit<ExecRequest, "tty" | "size">): Promise<DetachedExecView> {
    const s = await this.d.read.driven(nameOrId);
    const entry = this.detached.reserve(s, req.cmd);
    let session: ExecSession & { timedOut(): boolean };
    try {
      session = await this.start(s.id, { ...req, tty: false });
    } catch (err) {
      this.detached.release(s.id, entry.id);
      throw err;
    }
    entry.running();
    this.#sessions.add(session);
    session.stdin.end();
    // Read to nowhere: a command blocked on a full pipe would never end.
    session.stdout.resume();
    session.stderr.resume();
    session.exitCode.then(
      (code) => entry.exited(code, session.timedOut(), Date.now()),
      async (err: unknown) => {
        // Closing ends the sessions; the store may be closed right after, so ask it nothing.
        if (this.#closed) return entry.lost("the gateway stopped following it", Date.now());
        const now = await this.d.store.get(s.id).catch(() => undefined);
        if (now === undefined) return entry.lost(`its end was not seen: ${errorMessage(err)}`, Date.now());
        const left = !now || now.generation !== s.generation || now.phase !== "Ready" ? `; the sandbox is ${now ? `${now.phase} at generation ${now.generation}` : "gone"}` : "";
        entry.lost(`its end was not seen: ${errorMessage(err)}${left}`, Date.now());
      },
    ).finally(() => this.#sessions.delete(session));
    this.d.log.info({ sandboxId: s.id, exec: entry.id, cmd: req.cmd[0] }, "detached exec started");
    return entry.view();
  }

  async status(nameOrId: string, id: string): Promise<DetachedExecView> {
    const s = await this.d.read.driven(nameOrId);
    const e = this.detached.get(s.id, id);
    if (!e) throw new ApiError("not_found", `no detached exec ${JSON.stringify(id)} in sandbox "${s.name}" (ended ones are kept for an hour; a gateway restart forgets them)`);
    return e.view();
  }

  async list(nameOrId: string): Promise<DetachedExecView[]> {
    const s = await this.d.read.driven(nameOrId);
    return this.detached.list(s.id).map((e) => e.view());
  }

  /** Timers and detached sessions still held (leak checks). */
  get timers(): number {
    return this.#timers.size;
  }

  close(): void {
    this.#closed = true;
    for (const t of this.#timers) clearTimeout(t);
    this.#timers.clear();
    // The commands keep running in the sandbox; the gateway stops following them.
    for (const s of this.#sessions) s.close();
    this.#sessions.clear();
  }

  async #user(s: SandboxRecord, requested: string): Promise<string> {
    const workloadUser = (await activePolicy(this.d.store, s.id)).policy.process.user ?? this.d.driver.workloadUser;
    if (workloadUser === undefined) throw new ApiError("invalid_request", `user: this runtime (${this.d.driver.kind}) does not say which user its workloads run as; leave -u out`);
    const r = resolveExecUser(requested, workloadUser);
    if (!r.ok) throw new ApiError("invalid_request", r.error);
    return r.user;
  }

  /**
   * The command's process group gets SIGTERM at expiry, SIGKILL KILL_GRACE_MS later, and
   * the exit code is 124 whatever it ended with. A runtime that cannot signal, or a
   * command still holding its output open after SIGKILL, ends the session instead.
   * Closing the session (the client went away) does not cancel the timeout.
   */
  #withTimeout(session: ExecSession, ms: number, s: SandboxRecord): { session: ExecSession; timedOut: () => boolean } {
    let timedOut = false;
    let closedEarly = false;
    let force!: (code: number) => void;
    const forced = new Promise<number>((resolve) => (force = resolve));
    const mine = new Set<NodeJS.Timeout>();
    const later = (delay: number, fn: () => void): void => {
      const t = setTimeout(() => {
        mine.delete(t);
        this.#timers.delete(t);
        fn();
      }, delay);
      mine.add(t);
      this.#timers.add(t);
    };
    const clear = (): void => {
      for (const t of mine) {
        clearTimeout(t);
        this.#timers.delete(t);
      }
      mine.clear();
    };
    const giveUp = (): void => {
      session.close();
      force(EXEC_TIMEOUT_EXIT);
    };
    const send = async (sig: ExecSignal): Promise<"sent" | "gone" | "failed"> => {
      if (!session.signal) return "failed";
      try {
        return await session.signal(sig);
      } catch (err) {
        this.d.log.warn({ sandboxId: s.id, sig, err: errorMessage(err) }, "exec timeout: signal failed");
        return "failed";
      }
    };
    later(ms, () => {
      timedOut = true;
      this.d.log.info({ sandboxId: s.id, timeoutMs: ms }, "exec timed out: SIGTERM");
      void send("TERM").then((r) => {
        if (r === "failed") return giveUp();
        if (r === "gone" && closedEarly) return;
        later(KILL_GRACE_MS, () => {
          void send("KILL").then((k) => (k === "failed" ? giveUp() : later(KILL_GRACE_MS, giveUp)));
        });
      });
    });
    const exitCode = Promise.race([session.exitCode, forced]).then((code) => (timedOut ? EXEC_TIMEOUT_EXIT : code));
    exitCode.then(clear, () => {
      // A session closed by its client ends without a code; the timeout still stands.
      if (!closedEarly) clear();
    });
    exitCode.catch(() => undefined);
    return {
      session: {
        ...session,
        exitCode,
        close: () => {
          closedEarly = true;
          session.close();
        },
      },
      timedOut: () => timedOut,
    };
  }
}
