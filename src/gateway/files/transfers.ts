// File transfers between a caller and a Ready sandbox's workspace. The bytes move
// through an exec in the workload (tar, as the workload's own user: see
// scripts.ts) and through the gateway, which reads every tar stream with hostile
// content in mind (src/files/sanitize.ts) in both directions, never holds one
// (pulls and pushes with backpressure), and bounds each transfer: bytes, members,
// idle time, and how many run at once per sandbox and in all.
//
// Why an exec rather than Docker's archive API or the host-side workspace
// directory: docs/security.md, "Files: sandbox cp".

import type { Writable } from "node:stream";
import type { Logger } from "pino";
import type { ExecSession } from "../../driver/contract.js";
import type { FileStatView, TransferCounts } from "../../files/api.js";
import { CopyRefused } from "../../files/members.js";
import { sanitizeTar, type SanitizeStats } from "../../files/sanitize.js";
import { WORKSPACE, baseOf, checkSandboxPath, shownPath } from "../../files/sandbox-path.js";
import { TarFormatError, toBytes } from "../../files/tar-format.js";
import type { SandboxRecord } from "../../store/contract.js";
import { ApiError } from "../errors.js";
import { DEFAULT_FILES_LIMITS, FILES_LIMIT_ENV, type FilesLimits } from "./limits.js";
import { DOWNLOAD, MARKER, STAT, UPLOAD_FILE, UPLOAD_TAR, explainExit, oneLine, parseStat, scriptArgv } from "./scripts.js";
import { SandgateError } from "../../util/errors.js";

export interface FileTransferDeps {
  /** The sandbox by name or id (throws 404/400). */
  get(nameOrId: string): Promise<SandboxRecord>;
  /** A command in the sandbox's workload, as its own user, no tty (the exec service's: it refuses a sandbox that is not Ready, and counts the transfer as a session). */
  exec(nameOrId: string, cmd: string[]): Promise<ExecSession>;
  log: Logger;
  limits?: Partial<FilesLimits>;
}

export type TransferSummary = TransferCounts;
export type FileStat = FileStatView;

export interface Download {
  /** A clean tar stream; it ends with the end-of-archive marker only when the whole copy succeeded. */
  stream: AsyncGenerator<Buffer>;
  /** The counts so far (final once the stream has ended). */
  summary(): TransferSummary;
}

/** How an upload's body is to be read. */
export type UploadBody = { kind: "tar"; contentLength?: number } | { kind: "file"; size: number; mode: number };

/** Bytes of a program's stderr (and of stdout before its marker) kept for messages. */
const CAPTURE_BYTES = 4096;
/** Bytes read (and dropped) from a program that failed before its marker, before giving up on it. */
const FAILURE_DRAIN_BYTES = 1 << 20;

class IdleTimeout extends ApiError {
  constructor(ms: number, what: string) {
    super("unavailable", `nothing moved for ${ms / 1000} s ${what}; the transfer was ended (${FILES_LIMIT_ENV.idleTimeoutMs})`);
  }
}

function timeout<T>(p: Promise<T>, ms: number, what: string, onTimeout: () => void = () => undefined): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const t = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      onTimeout();
      reject(new IdleTimeout(ms, what));
    }, ms);
  });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}

/** The source's chunks; a wait for the next one longer than `ms` ends it with an IdleTimeout. */
async function* idle(source: AsyncIterable<Buffer>, ms: number, what: string): AsyncGenerator<Buffer> {
  const it = source[Symbol.asyncIterator]();
  try {
    for (;;) {
      const r = await timeout(it.next(), ms, what);
      if (r.done) return;
      yield Buffer.isBuffer(r.value) ? r.value : Buffer.from(r.value);
    }
  } finally {
    void it.return?.();
  }
}

/** The program in the workload stopped taking input (it exited, or its stream broke): its exit code says why. */
class StoppedReading extends SandgateError {
  override readonly name = "StoppedReading";
  constructor(message: string) {
    super(message, "stopped_reading");
  }
}

/** Writes the source into `dst` with backpressure; a drain that takes longer than `ms` is an IdleTimeout. */
async function pump(source: AsyncIterable<Buffer>, dst: Writable, ms: number): Promise<void> {
  let broken: Error | null = null;
  const onError = (e: Error): void => {
    broken = e;
  };
  dst.on("error", onError);
  for await (const chunk of source) {
    if (broken !== null || dst.destroyed || dst.writableEnded) throw new StoppedReading("the sandbox stopped reading");
    if (!dst.write(chunk)) {
      await timeout(
        new Promise<void>((resolve, reject) => {
          const done = (err?: Error): void => {
            dst.off("drain", ok);
            dst.off("error", fail);
            dst.off("close", closed);
            if (err) reject(err);
            else resolve();
          };
          const ok = (): void => done();
          const fail = (): void => done(new StoppedReading("the sandbox stopped reading"));
          const closed = (): void => done(new StoppedReading("the sandbox stopped reading"));
          dst.on("drain", ok).on("error", fail).on("close", closed);
        }),
        ms,
        "into the sandbox",
      );
    }
  }
  if (broken !== null) throw new StoppedReading("the sandbox stopped reading");
}

/** One program running in the workload, past its checks. */
interface Started {
  stdout: AsyncIterable<Buffer>;
  stdin: Writable;
  /** The exit code (an IdleTimeout if it does not come). */
  exit(): Promise<number>;
  /** What it wrote to stderr (bounded). */
  stderr(): string;
  close(): void;
}

/** At most `concurrent` transfers, and `perSandbox` per sandbox; over that, refused at once (no queue). */
class Slots {
  private total = 0;
  private readonly bySandbox = new Map<string, number>();
  constructor(private readonly limits: FilesLimits) {}

  get active(): number {
    return this.total;
  }

  acquire(s: SandboxRecord): () => void {
    const mine = this.bySandbox.get(s.id) ?? 0;
    if (mine >= this.limits.perSandbox) {
      throw new ApiError("unavailable", `sandbox "${s.name}" already has ${mine} file transfers running; the limit is ${this.limits.perSandbox} (${FILES_LIMIT_ENV.perSandbox}); try again when one ends`);
    }
    if (this.total >= this.limits.concurrent) {
      throw new ApiError("unavailable", `the gateway already runs ${this.total} file transfers; the limit is ${this.limits.concurrent} (${FILES_LIMIT_ENV.concurrent}); try again when one ends`);
    }
    this.total++;
    this.bySandbox.set(s.id, mine + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.total--;
      const n = (this.bySandbox.get(s.id) ?? 1) - 1;
      if (n === 0) this.bySandbox.delete(s.id);
      else this.bySandbox.set(s.id, n);
    };
  }
}

export class FileTransfers {
  readonly limits: FilesLimits;
  private readonly slots: Slots;

  constructor(private readonly d: FileTransferDeps) {
    this.limits = { ...DEFAULT_FILES_LIMITS, ...d.limits };
    this.slots = new Slots(this.limits);
  }

  stats(): { active: number; limits: FilesLimits } {
    return { active: this.slots.active, limits: this.limits };
  }

  private guardNames(): { maxEntries: string; maxBytes: string; symlinkMemoryBytes: string } {
    return { maxEntries: FILES_LIMIT_ENV.maxEntries, maxBytes: FILES_LIMIT_ENV.maxBytes, symlinkMemoryBytes: FILES_LIMIT_ENV.symlinkMemoryBytes };
  }

  private checked(raw: string): { path: string; shown: string } {
    const p = checkSandboxPath(raw);
    if (!p.ok) throw new ApiError("invalid_request", p.error);
    return { path: p.path, shown: shownPath(p.path) };
  }

  private async ready(nameOrId: string): Promise<SandboxRecord> {
    const s = await this.d.get(nameOrId);
    if (s.phase !== "Ready") throw new ApiError("not_allowed", `cannot copy files with sandbox "${s.name}": it is ${s.phase}; sandbox cp needs Ready`);
    return s;
  }

  /** Runs one program and waits for its marker; a program that ends before it is an ApiError saying why. */
  private async start(s: SandboxRecord, script: string, args: string[], ctx: { path: string; shown: string; op: "download" | "upload" | "stat" }): Promise<Started> {
    const idleMs = this.limits.idleTimeoutMs;
    const session = await this.d.exec(s.id, scriptArgv(script, WORKSPACE, [ctx.path, ...args]));
    // The first and the last CAPTURE_BYTES/2 of stderr: a tool's last words are usually the reason.
    const half = CAPTURE_BYTES / 2;
    let head = Buffer.alloc(0);
    let tail = Buffer.alloc(0);
    let dropped = false;
    session.stderr.on("data", (c: Buffer) => {
      if (head.length < half) {
        const take = c.subarray(0, half - head.length);
        head = Buffer.concat([head, take]);
        c = c.subarray(take.length);
      }
      if (c.length === 0) return;
      const all = Buffer.concat([tail, c]);
      if (all.length > half) dropped = true;
      tail = all.length > half ? Buffer.from(all.subarray(all.length - half)) : all;
    });
    session.stderr.on("error", () => undefined);
    session.stdout.on("error", () => undefined);
    session.stdin.on("error", () => undefined);
    const stderr = (): string => `${head.toString("utf8")}${dropped ? " … " : ""}${tail.toString("utf8")}`;
    const exit = (): Promise<number> => timeout(session.exitCode, idleMs, `from the sandbox (waiting for its tar to exit)`, () => session.close());
    const it = session.stdout[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
    let first = Buffer.alloc(0);
    try {
      while (first.length < MARKER.length && MARKER.startsWith(first.toString("latin1"))) {
        const r = await timeout(it.next(), idleMs, "from the sandbox", () => session.close());
        if (r.done) break;
        first = Buffer.concat([first, r.value]);
      }
      if (!first.subarray(0, MARKER.length).equals(Buffer.from(MARKER))) {
        // Ended (or said something else) before its checks passed: drain it, bounded, and say why.
        let seen = first.length;
        while (seen < FAILURE_DRAIN_BYTES) {
          const r = await timeout(it.next(), idleMs, "from the sandbox", () => session.close());
          if (r.done) break;
          if (first.length < CAPTURE_BYTES) first = Buffer.concat([first, r.value.subarray(0, CAPTURE_BYTES - first.length)]);
          seen += r.value.length;
        }
        session.close();
        const code = seen >= FAILURE_DRAIN_BYTES ? -1 : await exit();
        const f = code === 0 ? { code: "internal" as const, message: `unexpected answer from sandbox "${s.name}": ${JSON.stringify(oneLine(first.toString("utf8"), 100))}` } : explainExit(code, { sandbox: s.name, path: ctx.path, shown: ctx.shown, stderr: stderr(), stdout: first.toString("utf8"), op: ctx.op });
        throw new ApiError(f.code, f.message);
      }
    } catch (e) {
      session.close();
      throw e;
    }
    const rest = first.subarray(MARKER.length);
    const stdout = (async function* () {
      if (rest.length > 0) yield rest;
      for (;;) {
        const r = await it.next();
        if (r.done) return;
        yield r.value;
      }
    })();
    return { stdout, stdin: session.stdin, exit, stderr, close: () => session.close() };
  }

  /** What a path is (every symlink resolved, inside the workspace). */
  async stat(nameOrId: string, rawPath: string): Promise<FileStat> {
    const p = this.checked(rawPath);
    const s = await this.ready(nameOrId);
    const run = await this.start(s, STAT, [], { ...p, op: "stat" });
    try {
      let out = Buffer.alloc(0);
      for await (const c of idle(run.stdout, this.limits.idleTimeoutMs, "from the sandbox")) {
        out = Buffer.concat([out, c]);
        if (out.length > 256) break;
      }
      const st = parseStat(out.toString("latin1"));
      const code = await run.exit();
      if (st === null || code !== 0) throw new ApiError("internal", `unexpected answer from sandbox "${s.name}" to stat ${p.shown}: ${JSON.stringify(oneLine(`${out.toString("utf8")} ${run.stderr()}`, 100))}`);
      return { path: p.path, ...st };
    } finally {
      run.close();
    }
  }

  /**
   * A path out of the sandbox as a tar stream whose one top-level name is the
   * path's last name (as asked, even when a symlink inside the workspace led
   * elsewhere). Refusals before any byte are ApiErrors; later ones end the stream
   * with an error (and no end-of-archive marker).
   */
  async download(nameOrId: string, rawPath: string): Promise<Download> {
    const p = this.checked(rawPath);
    const s = await this.ready(nameOrId);
    const release = this.slots.acquire(s);
    let run: Started;
    try {
      run = await this.start(s, DOWNLOAD, [], { ...p, op: "download" });
    } catch (e) {
      release();
      throw e;
    }
    const limits = this.limits;
    const { stream, stats } = sanitizeTar(idle(run.stdout, limits.idleTimeoutMs, "from the sandbox"), {
      limits,
      root: { rename: toBytes(baseOf(p.path)) },
      names: this.guardNames(),
    });
    const log = this.d.log;
    const summary = (): TransferSummary => ({ path: p.path, entries: stats.entries - stats.skipped, skipped: stats.skipped, bytes: stats.dataBytes });
    async function* out(): AsyncGenerator<Buffer> {
      let ok = false;
      try {
        // The last chunk (the end-of-archive marker) goes out only once tar has exited 0:
        // a copy that missed a file (unreadable, vanished) never looks complete.
        let held: Buffer | null = null;
        for await (const chunk of stream) {
          if (held) yield held;
          held = chunk;
        }
        const code = await run.exit();
        if (code !== 0) {
          const f = explainExit(code, { sandbox: s.name, path: p.path, shown: p.shown, stderr: run.stderr(), stdout: "", op: "download" });
          throw new ApiError(f.code, f.message);
        }
        if (held) yield held;
        ok = true;
      } catch (e) {
        throw toApiError(e, stats);
      } finally {
        run.close();
        release();
        log.info({ sandbox: s.name, op: "download", ok, ...summary() }, "file transfer");
      }
    }
    return { stream: out(), summary };
  }

  /**
   * Writes into the sandbox: a tar extracted into the existing directory `rawPath`,
   * or one file at `rawPath` (replaced only once complete). Resolves once the
   * workload's tar has exited.
   */
  async upload(nameOrId: string, rawPath: string, body: AsyncIterable<Buffer>, kind: UploadBody): Promise<TransferSummary> {
    const p = this.checked(rawPath);
    const s = await this.ready(nameOrId);
    const declared = kind.kind === "file" ? kind.size : kind.contentLength;
    if (declared !== undefined && declared > this.limits.maxBytes) {
      throw new ApiError("too_large", `the upload is ${declared} bytes, past the limit of ${this.limits.maxBytes} bytes per transfer (${FILES_LIMIT_ENV.maxBytes})`);
    }
    const release = this.slots.acquire(s);
    const idleMs = this.limits.idleTimeoutMs;
    let run: Started | undefined;
    let stats: SanitizeStats = { entries: 0, skipped: 0, dataBytes: 0, streamBytes: 0, written: 0 };
    let ok = false;
    try {
      if (kind.kind === "file") {
        run = await this.start(s, UPLOAD_FILE, [kind.mode.toString(8).padStart(4, "0"), String(kind.size)], { ...p, op: "upload" });
        await pump(exactly(idle(body, idleMs, "from the client"), kind.size, stats), run.stdin, idleMs);
        stats = { ...stats, entries: 1 };
      } else {
        run = await this.start(s, UPLOAD_TAR, [], { ...p, op: "upload" });
        const clean = sanitizeTar(idle(body, idleMs, "from the client"), { limits: this.limits, deferDirModes: true, deferSymlinks: true, names: this.guardNames() });
        stats = clean.stats;
        await pump(clean.stream, run.stdin, idleMs);
      }
      run.stdin.end();
      const code = await run.exit();
      if (code !== 0) throw this.failed(s, p, code, run.stderr());
      ok = true;
      return { path: p.path, entries: stats.entries - stats.skipped, skipped: stats.skipped, bytes: kind.kind === "file" ? stats.streamBytes : stats.dataBytes };
    } catch (e) {
      if (run && e instanceof StoppedReading) {
        // The workload's own account of why it stopped reading (a full disk, a directory in the way).
        const code = await run.exit().catch(() => null);
        if (code !== null && code !== 0) throw this.failed(s, p, code, run.stderr());
        throw new ApiError("internal", `the upload into sandbox "${s.name}" broke off: ${e.message}`);
      }
      if (run) {
        // Ours or the client's: what was sent is flushed and the workload's stdin ended, so the members
        // before a refused one are written whole (a single file is not written at all), then it exits.
        run.stdin.end();
        await run.exit().catch(() => null);
      }
      throw toApiError(e, stats, kind.kind === "tar");
    } finally {
      run?.close();
      release();
      this.d.log.info({ sandbox: s.name, op: "upload", path: p.path, ok, entries: stats.entries, bytes: stats.dataBytes || stats.streamBytes }, "file transfer");
    }
  }

  private failed(s: SandboxRecord, p: { path: string; shown: string }, code: number, stderr: string): ApiError {
    if (/No space left on device/i.test(stderr)) {
      return new ApiError("too_large", `the workspace of sandbox "${s.name}" is full (its --disk size): ${oneLine(stderr)}`);
    }
    const f = explainExit(code, { sandbox: s.name, path: p.path, shown: p.shown, stderr, stdout: "", op: "upload" });
    return new ApiError(f.code, f.message);
  }
}

/** Exactly `size` bytes of the body (a single-file upload), counted into stats.streamBytes. */
async function* exactly(source: AsyncIterable<Buffer>, size: number, stats: SanitizeStats): AsyncGenerator<Buffer> {
  for await (const c of source) {
    stats.streamBytes += c.length;
    if (stats.streamBytes > size) throw new ApiError("invalid_request", `the body is longer than its Content-Length (${size} bytes)`);
    yield c;
  }
  if (stats.streamBytes < size) throw new ApiError("invalid_request", `the body ended after ${stats.streamBytes} of ${size} bytes`);
}

function toApiError(e: unknown, stats: SanitizeStats, partial = false): unknown {
  const n = stats.written;
  const written = partial && n > 0 ? `; the ${n} member${n === 1 ? "" : "s"} before it ${n === 1 ? "was" : "were"} written` : "";
  if (e instanceof CopyRefused) return new ApiError(e.code, `${e.message}${written}`);
  if (e instanceof TarFormatError) return new ApiError("invalid_request", `not a valid tar stream: ${e.message}${written}`);
  return e;
}
