// What the gateway keeps of a generation's output once its containers are removed:
// before the driver removes a container that ran, it copies Docker's log of it here,
// one file pair per generation and role under <home>/logs/<sandbox id>/ (directory
// 0700, files 0600). Kept: the two newest generations that ended (the last one, and
// the previous one), until the sandbox is deleted.
//
// Bounded like Docker's own log: a copy holds at most `maxBytes` (the container's
// maxBytes × files), newest lines kept. It is written in parts of maxBytes / 2, only the
// last two kept, so an over-long log loses its oldest lines, never its newest; the
// parts become g<N>-<role>.1.ndjson (older) and g<N>-<role>.ndjson (newer), one
// LogLine as JSON per line.

import { randomBytes } from "node:crypto";
import { createReadStream, existsSync, mkdirSync, readdirSync, renameSync, rmSync } from "node:fs";
import { open, type FileHandle } from "node:fs/promises";
import { join } from "node:path";
import { createInterface } from "node:readline";
import type { LogLine, Role } from "../contract.js";
import { canonicalTime } from "../../util/log-time.js";
import type { ResumeFilter } from "../../util/log-cursor.js";

/** Bytes gathered before each write to the file. */
const WRITE_BATCH = 64 * 1024;
const FILE_RE = /^g(\d+)-(workload|supervisor)(\.1)?\.ndjson$/;

export type ArchiveRead = "read" | "missing" | "aborted";

export class LogArchive {
  constructor(
    readonly root: string,
    /** The most one copy keeps, in bytes. */
    private readonly maxBytes: () => number,
  ) {}

  dir(sandboxId: string): string {
    return join(this.root, sandboxId);
  }

  private paths(sandboxId: string, generation: number, role: Role): { older: string; newer: string } {
    const base = join(this.dir(sandboxId), `g${generation}-${role}`);
    return { older: `${base}.1.ndjson`, newer: `${base}.ndjson` };
  }

  /** The generations of which something is kept, ascending. */
  generations(sandboxId: string): number[] {
    const dir = this.dir(sandboxId);
    if (!existsSync(dir)) return [];
    const gens = new Set<number>();
    for (const f of readdirSync(dir)) {
      const m = FILE_RE.exec(f);
      if (m) gens.add(Number(m[1]));
    }
    return [...gens].sort((a, b) => a - b);
  }

  /** A writer for one container's copy; nothing replaces the kept copy until commit(). */
  writer(sandboxId: string, generation: number, role: Role): ArchiveWriter {
    mkdirSync(this.root, { recursive: true, mode: 0o700 });
    mkdirSync(this.dir(sandboxId), { recursive: true, mode: 0o700 });
    const tmp = join(this.dir(sandboxId), `.tmp-g${generation}-${role}-${randomBytes(4).toString("hex")}`);
    mkdirSync(tmp, { mode: 0o700 });
    return new ArchiveWriter(tmp, this.paths(sandboxId, generation, role), Math.max(1, Math.floor(this.maxBytes() / 2)));
  }

  /** Forget every generation before `keepFrom`, and unfinished copies a crash left. */
  prune(sandboxId: string, keepFrom: number): void {
    const dir = this.dir(sandboxId);
    if (!existsSync(dir)) return;
    for (const f of readdirSync(dir)) {
      const m = FILE_RE.exec(f);
      if ((m && Number(m[1]) < keepFrom) || (f.startsWith(".tmp-g") && Number(/^\.tmp-g(\d+)/.exec(f)?.[1]) < keepFrom)) {
        rmSync(join(dir, f), { recursive: true, force: true });
      }
    }
  }

  /** Everything of the sandbox (delete). */
  remove(sandboxId: string): void {
    rmSync(this.dir(sandboxId), { recursive: true, force: true });
  }

  /**
   * The kept lines the filter accepts, in order, the last `tail` of them when given;
   * waits for deliver's promise after each. "missing": nothing is kept of it.
   */
  async read(sandboxId: string, generation: number, role: Role, filter: ResumeFilter, tail: number | undefined, deliver: (l: LogLine) => void | Promise<void>, signal: AbortSignal): Promise<ArchiveRead> {
    const p = this.paths(sandboxId, generation, role);
    const files = [p.older, p.newer].filter((f) => existsSync(f));
    if (files.length === 0) return "missing";
    let skip = 0;
    if (tail !== undefined) {
      // Two passes over a bounded file instead of holding `tail` lines in memory.
      const counter = filter.clone();
      let n = 0;
      const count = (l: LogLine): void => {
        if (counter.accept(l.t)) n++;
      };
      for (const f of files) if ((await eachLine(f, signal, count)) === "aborted") return "aborted";
      skip = Math.max(0, n - tail);
    }
    for (const f of files) {
      const r = await eachLine(f, signal, async (l) => {
        if (!filter.accept(l.t)) return;
        if (skip > 0) {
          skip--;
          return;
        }
        await deliver(l);
      });
      if (r === "aborted") return "aborted";
    }
    return "read";
  }
}

/** Each well-formed line of a kept file (others are skipped: the file is ours, but may be cut by a crash). */
async function eachLine(file: string, signal: AbortSignal, fn: (l: LogLine) => void | Promise<void>): Promise<"done" | "aborted"> {
  const input = createReadStream(file, { encoding: "utf8" });
  const rl = createInterface({ input, crlfDelay: Infinity });
  try {
    for await (const text of rl) {
      if (signal.aborted) return "aborted";
      const l = parseKept(text);
      if (l !== null) await fn(l);
    }
    return signal.aborted ? "aborted" : "done";
  } catch (err) {
    // The file went away under us (the sandbox was deleted): that is the end of it.
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return "done";
    throw err;
  } finally {
    rl.close();
    input.destroy();
  }
}

function parseKept(text: string): LogLine | null {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return null;
  }
  const o = v as Partial<LogLine> | null;
  if (typeof o !== "object" || o === null || typeof o.t !== "string" || typeof o.l !== "string" || (o.s !== "out" && o.s !== "err")) return null;
  if (canonicalTime(o.t) !== o.t) return null;
  return o.p === true ? { t: o.t, s: o.s, l: o.l, p: true } : { t: o.t, s: o.s, l: o.l };
}

/** Writes one copy in parts of at most `partBytes` (and one line), keeping the last two parts. */
export class ArchiveWriter {
  #part = -1;
  #fh: FileHandle | undefined;
  #bytes = 0;
  #batch: string[] = [];
  #batchBytes = 0;

  constructor(
    private readonly tmp: string,
    private readonly target: { older: string; newer: string },
    private readonly partBytes: number,
  ) {}

  private partPath(n: number): string {
    return join(this.tmp, `part-${n}`);
  }

  async write(line: LogLine): Promise<void> {
    const text = JSON.stringify(line) + "\n";
    const n = Buffer.byteLength(text);
    if (this.#fh === undefined || (this.#bytes > 0 && this.#bytes + n > this.partBytes)) await this.#nextPart();
    this.#batch.push(text);
    this.#batchBytes += n;
    this.#bytes += n;
    if (this.#batchBytes >= WRITE_BATCH) await this.#flush();
  }

  async #flush(): Promise<void> {
    if (this.#batch.length === 0 || this.#fh === undefined) return;
    const text = this.#batch.join("");
    this.#batch = [];
    this.#batchBytes = 0;
    await this.#fh.write(text);
  }

  async #nextPart(): Promise<void> {
    await this.#flush();
    await this.#fh?.close();
    this.#part++;
    // Only the last two parts are kept: the one before the previous goes now.
    if (this.#part >= 2) rmSync(this.partPath(this.#part - 2), { force: true });
    this.#fh = await open(this.partPath(this.#part), "w", 0o600);
    this.#bytes = 0;
  }

  /** Replace the kept copy with this one. */
  async commit(): Promise<void> {
    await this.#flush();
    await this.#fh?.close();
    this.#fh = undefined;
    rmSync(this.target.older, { force: true });
    rmSync(this.target.newer, { force: true });
    if (this.#part >= 1) renameSync(this.partPath(this.#part - 1), this.target.older);
    if (this.#part >= 0) renameSync(this.partPath(this.#part), this.target.newer);
    else await (await open(this.target.newer, "w", 0o600)).close();
    rmSync(this.tmp, { recursive: true, force: true });
  }

  async discard(): Promise<void> {
    await this.#fh?.close().catch(() => undefined);
    this.#fh = undefined;
    rmSync(this.tmp, { recursive: true, force: true });
  }
}
