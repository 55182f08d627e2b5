// The table of `exec --detach` commands, per sandbox, in the gateway's memory: what
// `exec-status` answers. Bounded: at most `max` entries per sandbox (gateway start
// --detached-execs); when full, the oldest ended entry makes room, and when every entry
// is still running a new detached exec is refused (409). An ended entry is forgotten
// DETACHED_EXEC_KEEP_MS after it ended; the table goes with its sandbox, and a gateway
// restart forgets it (the commands keep running; their status is no longer known).

import { randomBytes } from "node:crypto";
import { ApiError } from "../errors.js";
import type { DetachedExecView, DetachedState } from "../../api/responses.js";
import { DEFAULT_SETTINGS } from "../settings.js";

/** The API's shapes (src/api/responses.ts), named here for the code that builds them. */
export type { DetachedExecView, DetachedState };

/** How long an ended detached exec's status is kept. */
export const DETACHED_EXEC_KEEP_MS = 3_600_000;
export const DEFAULT_DETACHED_EXECS = DEFAULT_SETTINGS.detachedExecs;

export const EXEC_ID_RE = /^ex_[0-9a-f]{16}$/;

export class DetachedExec {
  #state: DetachedState = "starting";
  #exitCode: number | null = null;
  #timedOut = false;
  #endedAt: number | null = null;
  #error: string | null = null;
  readonly startedAt: number;

  constructor(
    readonly id: string,
    readonly sandbox: { id: string; name: string; generation: number },
    readonly cmd: readonly string[],
    now: number,
  ) {
    this.startedAt = now;
  }

  get ended(): boolean {
    return this.#endedAt !== null;
  }

  get endedAt(): number | null {
    return this.#endedAt;
  }

  running(): void {
    if (this.#state === "starting") this.#state = "running";
  }

  exited(code: number, timedOut: boolean, now: number): void {
    if (this.ended) return;
    this.#state = "exited";
    this.#exitCode = code;
    this.#timedOut = timedOut;
    this.#endedAt = now;
  }

  /** The gateway lost track of it (the runtime went away, the sandbox stopped). */
  lost(why: string, now: number): void {
    if (this.ended) return;
    this.#state = "unknown";
    this.#error = why;
    this.#endedAt = now;
  }

  view(): DetachedExecView {
    return {
      id: this.id,
      sandbox: this.sandbox.name,
      generation: this.sandbox.generation,
      cmd: [...this.cmd],
      state: this.#state,
      exitCode: this.#exitCode,
      timedOut: this.#timedOut,
      startedAt: new Date(this.startedAt).toISOString(),
      endedAt: this.#endedAt === null ? null : new Date(this.#endedAt).toISOString(),
      error: this.#error,
    };
  }
}

export class DetachedExecs {
  readonly #by = new Map<string, Map<string, DetachedExec>>();

  constructor(
    readonly max: number = DEFAULT_DETACHED_EXECS,
    private readonly now: () => number = Date.now,
  ) {}

  /** A new entry for a command about to start; 409 when the sandbox's table is full of running ones. */
  reserve(sandbox: { id: string; name: string; generation: number }, cmd: readonly string[]): DetachedExec {
    const table = this.#table(sandbox.id, true)!;
    this.#prune(table);
    if (table.size >= this.max) {
      // The entry that ended first makes room.
      const oldest = [...table.values()].filter((e) => e.ended).sort((a, b) => a.endedAt! - b.endedAt!)[0];
      if (!oldest) {
        throw new ApiError(
          "not_allowed",
          `sandbox "${sandbox.name}" has ${table.size} detached execs running, the limit (gateway start --detached-execs); wait for one to end (sandgate sandbox exec-status ${sandbox.name})`,
        );
      }
      table.delete(oldest.id);
    }
    const entry = new DetachedExec(`ex_${randomBytes(8).toString("hex")}`, sandbox, cmd, this.now());
    table.set(entry.id, entry);
    return entry;
  }

  /** A reserved entry whose command never started. */
  release(sandboxId: string, id: string): void {
    const table = this.#table(sandboxId, false);
    table?.delete(id);
    if (table?.size === 0) this.#by.delete(sandboxId);
  }

  get(sandboxId: string, id: string): DetachedExec | undefined {
    const table = this.#table(sandboxId, false);
    if (table) this.#prune(table);
    return table?.get(id);
  }

  list(sandboxId: string): DetachedExec[] {
    const table = this.#table(sandboxId, false);
    if (!table) return [];
    this.#prune(table);
    return [...table.values()];
  }

  /** The sandbox is gone. */
  forget(sandboxId: string): void {
    this.#by.delete(sandboxId);
  }

  /** Entries held, over all sandboxes. */
  get size(): number {
    let n = 0;
    for (const t of this.#by.values()) n += t.size;
    return n;
  }

  #table(sandboxId: string, create: boolean): Map<string, DetachedExec> | undefined {
    let t = this.#by.get(sandboxId);
    if (!t && create) this.#by.set(sandboxId, (t = new Map<string, DetachedExec>()));
    return t;
  }

  #prune(table: Map<string, DetachedExec>): void {
    const cut = this.now() - DETACHED_EXEC_KEEP_MS;
    for (const [id, e] of table) if (e.endedAt !== null && e.endedAt < cut) table.delete(id);
  }
}
