// Real unprivileged host accounts for tests whose attacker is a local user on the host:
// made with useradd/groupadd (a name of the test's own, a uid no account holds unless
// asked for one), and commands run as them through setpriv (their uid and gid, no
// supplementary groups, no capabilities left). `removeAll` deletes every account made.

import { execFile, spawn, type ChildProcess, type SpawnOptions } from "node:child_process";
import { randomBytes, randomInt } from "node:crypto";
import { readFileSync } from "node:fs";
import { promisify } from "node:util";

const run = promisify(execFile);

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Whether a host account or group holds `id` (as its uid, primary gid or group id). */
export function hostIdTaken(id: number): boolean {
  const used = (file: string, fields: number[]): boolean =>
    readFileSync(file, "utf8")
      .split("\n")
      .some((l) => fields.some((f) => l.split(":")[f] === String(id)));
  return used("/etc/passwd", [2, 3]) || used("/etc/group", [2]);
}

/** A uid (and gid) from 20,000 to 60,000 that no host account or group holds. */
export function freeLowId(): number {
  for (;;) {
    const id = randomInt(20_000, 60_000);
    if (!hostIdTaken(id)) return id;
  }
}

/** The argv that runs `argv` as `uid` (its own gid, no groups), or as root. */
export function asArgv(uid: number | "root", argv: string[]): string[] {
  return uid === "root" ? argv : ["setpriv", `--reuid=${uid}`, `--regid=${uid}`, "--clear-groups", "--", ...argv];
}

/** Run a command to its end as `uid`; a non-zero exit is a result, not an exception. */
export async function runAs(uid: number | "root", argv: string[], opts: { env?: NodeJS.ProcessEnv; cwd?: string } = {}): Promise<RunResult> {
  const full = asArgv(uid, argv);
  try {
    const r = await run(full[0]!, full.slice(1), { encoding: "utf8", maxBuffer: 64 * 1024 * 1024, ...opts });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === "number" ? e.code : -1, stdout: e.stdout ?? "", stderr: e.stderr ?? "" };
  }
}

/** A shell command as `uid`. */
export function shAs(uid: number | "root", script: string): Promise<RunResult> {
  return runAs(uid, ["sh", "-c", script]);
}

/** A long-running process as `uid` (the caller ends it). */
export function spawnAs(uid: number | "root", argv: string[], opts: SpawnOptions = {}): ChildProcess {
  const full = asArgv(uid, argv);
  return spawn(full[0]!, full.slice(1), opts);
}

/** The accounts one test file makes; `removeAll` in its afterAll. */
export class HostUsers {
  readonly #tag = randomBytes(3).toString("hex");
  /** name → uid */
  readonly made = new Map<string, number>();

  /** The prefix of every account name this set makes (to check none is left). */
  get prefix(): string {
    return `sgt${this.#tag}`;
  }

  /**
   * A host user and group named for `role`, with `uid` (-o: the id may already be someone's,
   * as old container ids often are) or a free low id; returns its uid.
   */
  async make(role: string, uid: number = freeLowId()): Promise<number> {
    const name = `${this.prefix}${role}`;
    await run("groupadd", ["-o", "-g", String(uid), name]);
    this.made.set(name, uid);
    await run("useradd", ["-o", "-u", String(uid), "-g", String(uid), "-M", "-d", "/nonexistent", "-s", "/bin/sh", name]);
    return uid;
  }

  nameOf(uid: number): string {
    for (const [name, id] of this.made) if (id === uid) return name;
    throw new Error(`no account of this set has uid ${uid}`);
  }

  async removeAll(): Promise<void> {
    for (const name of this.made.keys()) {
      await run("userdel", [name]).catch(() => undefined);
      // -f: a group sharing its gid with another user's primary group is still ours to remove.
      await run("groupdel", ["-f", name]).catch(() => undefined);
    }
    this.made.clear();
  }
}
