// A sandbox's files through the gateway's files API (src/files/api.ts): one file
// written (PUT, application/octet-stream, replaced only once complete), one file read
// or a directory listed (GET: a tar stream, read member by member, never held), and
// what a path is (GET .../files/stat). Paths are inside /sandbox; a relative one is
// under it. The gateway enforces the confinement (symlinks out of /sandbox refused).

import type { IncomingMessage } from "node:http";
import { FILE_MEDIA_TYPE, RESULT_TRAILER, type TransferCounts, type TransferResultView } from "../files/api.js";
import { WORKSPACE, checkSandboxPath } from "../files/sandbox-path.js";
import { TarFormatError } from "../files/tar-format.js";
import { readTar, type TarEntry } from "../files/tar-stream.js";
import { SandgateError, fromApiBody } from "./errors.js";
import type { Transport } from "./transport.js";
import type { FileEntry, FileStat } from "./types.js";

/** `read` holds at most this many bytes unless told otherwise (`maxBytes`). */
export const READ_MAX_BYTES = 16 * 1024 * 1024;
/** `list` returns at most this many entries unless told otherwise (`maxEntries`). */
export const LIST_MAX_ENTRIES = 10_000;
const ERROR_BODY_MAX_BYTES = 64 * 1024;

/** The path as the API takes it: absolute, normalised, inside /sandbox. */
export function sandboxPath(path: string): string {
  if (typeof path !== "string") throw new SandgateError(`path: expected a string, got ${JSON.stringify(path)}`, "invalid_request");
  const abs = path.startsWith("/") ? path : path === "" ? WORKSPACE : `${WORKSPACE}/${path}`;
  const p = checkSandboxPath(abs);
  if (!p.ok) throw new SandgateError(p.error, "invalid_request");
  return p.path;
}

/** The SandgateError of an error answer to `what` (its body read, at most ERROR_BODY_MAX_BYTES held). */
async function errorOf(t: Transport, what: string, res: IncomingMessage): Promise<SandgateError> {
  const chunks: Buffer[] = [];
  await t.readBody(what, async () => {
    let size = 0;
    for await (const c of res) {
      if (size < ERROR_BODY_MAX_BYTES) chunks.push(c as Buffer);
      size += (c as Buffer).length;
    }
  });
  let body: unknown = null;
  try {
    body = JSON.parse(Buffer.concat(chunks).toString());
  } catch {
    /* not JSON: the fallback message */
  }
  return t.apiError(res.statusCode ?? 0, body, `the gateway answered ${res.statusCode ?? "?"} without an explanation`);
}

function parseResult(text: string | undefined): TransferResultView | undefined {
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text) as TransferResultView;
  } catch {
    return undefined;
  }
}

/**
 * The stream, checked to give exactly `size` bytes (the Content-Length sent): more, or
 * an end short of it, fails the write (the file is replaced only once complete, so it
 * stays as it was).
 */
async function* exactly(source: AsyncIterable<Uint8Array>, size: number): AsyncGenerator<Uint8Array> {
  let n = 0;
  for await (const c of source) {
    n += c.length;
    if (n > size) throw new SandgateError(`the stream gave more than its size of ${size} bytes`, "invalid_request");
    yield c;
  }
  if (n !== size) throw new SandgateError(`the stream ended after ${n} of its size of ${size} bytes`, "invalid_request");
}

export interface ReadOptions {
  /** The most bytes `read` holds (default READ_MAX_BYTES): a larger file is `too_large`, and nothing more is read. */
  maxBytes?: number;
  signal?: AbortSignal;
}

export interface ListOptions {
  /** The most entries returned (default LIST_MAX_ENTRIES): past it, `too_large` and nothing more is read. */
  maxEntries?: number;
  /** Every entry below the directory (true), or only its own (default). */
  recursive?: boolean;
  signal?: AbortSignal;
}

export class SandboxFiles {
  constructor(
    private readonly t: Transport,
    private readonly sandbox: string,
  ) {}

  get #base(): string {
    return `/v1/sandboxes/${encodeURIComponent(this.sandbox)}/files`;
  }

  /** What `path` is; null when nothing is there. */
  async stat(path: string, signal?: AbortSignal): Promise<FileStat | null> {
    const p = sandboxPath(path);
    try {
      return await this.t.request<FileStat>("GET", `${this.#base}/stat?path=${encodeURIComponent(p)}`, undefined, signal);
    } catch (err) {
      if (err instanceof SandgateError && err.code === "not_found" && /^no such file or directory/.test(err.message)) return null;
      throw err;
    }
  }

  /**
   * Writes one file (its parent directory must exist), replacing it only once it is
   * complete; `mode` its permission bits (default 0o644). Bytes, text (UTF-8), or a
   * stream of exactly `size` bytes.
   */
  async write(path: string, data: string | Uint8Array | { stream: AsyncIterable<Uint8Array>; size: number }, o: { mode?: number; signal?: AbortSignal } = {}): Promise<TransferCounts> {
    const p = sandboxPath(path);
    const mode = o.mode ?? 0o644;
    if (!Number.isInteger(mode) || mode < 0 || mode > 0o777) throw new SandgateError(`mode: expected permission bits from 0 to 0o777, got ${String(mode)}`, "invalid_request");
    let body: AsyncIterable<Uint8Array>;
    let size: number;
    if (typeof data === "string" || data instanceof Uint8Array) {
      const bytes = typeof data === "string" ? Buffer.from(data) : data;
      size = bytes.length;
      body = (async function* () {
        yield bytes;
      })();
    } else {
      if (!Number.isSafeInteger(data.size) || data.size < 0) throw new SandgateError(`size: expected a whole number of bytes, got ${String(data.size)}`, "invalid_request");
      size = data.size;
      body = exactly(data.stream, size);
    }
    const what = `the write of ${p}`;
    const res = await this.t.stream("PUT", `${this.#base}?path=${encodeURIComponent(p)}&mode=${mode.toString(8).padStart(3, "0")}`, {
      headers: { "content-type": FILE_MEDIA_TYPE, "content-length": String(size) },
      body,
      ...(o.signal ? { signal: o.signal } : {}),
      what,
    });
    if (res.statusCode !== 200) throw await errorOf(this.t, what, res);
    // The answer is one small JSON object (the counts); ERROR_BODY_MAX_BYTES bounds it too.
    const chunks: Buffer[] = [];
    await this.t.readBody(what, async () => {
      let size = 0;
      for await (const c of res) {
        size += (c as Buffer).length;
        if (size > ERROR_BODY_MAX_BYTES) throw new SandgateError(`the gateway's answer to a write is over ${ERROR_BODY_MAX_BYTES} bytes`, "bad_response");
        chunks.push(c as Buffer);
      }
    });
    let answer: TransferResultView;
    try {
      answer = JSON.parse(Buffer.concat(chunks).toString()) as TransferResultView;
    } catch {
      throw new SandgateError("the gateway's answer to a write is not JSON", "bad_response");
    }
    if (!answer.ok) throw fromApiBody(answer, "the write failed");
    return answer;
  }

  /** Reads one file whole: at most `maxBytes` (see ReadOptions). */
  async read(path: string, o: ReadOptions = {}): Promise<Buffer> {
    const max = o.maxBytes ?? READ_MAX_BYTES;
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const c of this.readStream(path, { ...o, maxBytes: max })) {
      chunks.push(c);
      size += c.length;
    }
    return Buffer.concat(chunks, size);
  }

  /**
   * One file's bytes as they come (a directory or a symlink is `invalid_request`);
   * pulled, so a slow reader slows the sandbox's tar. `maxBytes` (default unbounded
   * here) refuses a larger file before its first byte.
   */
  async *readStream(path: string, o: ReadOptions = {}): AsyncGenerator<Buffer> {
    const p = sandboxPath(path);
    const ac = new AbortController();
    const stop = (): void => ac.abort();
    o.signal?.addEventListener("abort", stop, { once: true });
    let res: IncomingMessage | undefined;
    try {
      res = await this.#download(p, ac.signal);
      let seen = false;
      for await (const m of this.#tar(res)) {
        if (seen) throw new SandgateError(`${p} is not a single file`, "bad_response");
        seen = true;
        if (m.header.type !== "file") throw new SandgateError(`${p} is a ${m.header.type}, not a file; use list() for a directory`, "invalid_request");
        if (o.maxBytes !== undefined && m.header.size > o.maxBytes) throw new SandgateError(`${p} is ${m.header.size} bytes; the limit is ${o.maxBytes} (maxBytes)`, "too_large");
        for await (const c of m.data) yield c;
      }
      if (!seen) throw new SandgateError(`the gateway sent nothing for ${p}`, "bad_response");
    } finally {
      o.signal?.removeEventListener("abort", stop);
      ac.abort();
      res?.destroy();
    }
  }

  /**
   * The entries of a directory, paths relative to it, in the order the sandbox's tar
   * walked them. The gateway sends the directory as a tar: file data is read and
   * discarded, never held, but it does cross the connection (listing a large tree
   * costs its size). At most `maxEntries`.
   */
  async list(path: string, o: ListOptions = {}): Promise<FileEntry[]> {
    const p = sandboxPath(path);
    const max = o.maxEntries ?? LIST_MAX_ENTRIES;
    const ac = new AbortController();
    const stop = (): void => ac.abort();
    o.signal?.addEventListener("abort", stop, { once: true });
    const out: FileEntry[] = [];
    let res: IncomingMessage | undefined;
    try {
      res = await this.#download(p, ac.signal);
      let root: string | null = null;
      for await (const m of this.#tar(res)) {
        const name = Buffer.from(m.header.name, "latin1").toString("utf8").replace(/\/+$/, "");
        if (root === null) {
          root = name;
          if (m.header.type !== "directory") throw new SandgateError(`${p} is a ${m.header.type}, not a directory`, "invalid_request");
          continue;
        }
        const rel = name.startsWith(`${root}/`) ? name.slice(root.length + 1) : name;
        if (!o.recursive && rel.includes("/")) continue;
        if (out.length >= max) throw new SandgateError(`${p} has more than ${max} entries (maxEntries)`, "too_large");
        const h = m.header;
        out.push({ path: rel, type: h.type, mode: h.mode & 0o7777, size: h.size, mtime: h.mtime, linkname: Buffer.from(h.linkname, "latin1").toString("utf8") });
      }
    } finally {
      o.signal?.removeEventListener("abort", stop);
      ac.abort();
      res?.destroy();
    }
    return out;
  }

  async #download(p: string, signal: AbortSignal): Promise<IncomingMessage> {
    const what = `the read of ${p}`;
    const res = await this.t.stream("GET", `${this.#base}?path=${encodeURIComponent(p)}`, { signal, what });
    if (res.statusCode !== 200) throw await errorOf(this.t, what, res);
    return res;
  }

  /** The members of a download; the gateway's own reason (its trailer) when it ended the stream, `connection_lost` when it was cut. */
  async *#tar(res: IncomingMessage): AsyncGenerator<TarEntry> {
    let aborted = false;
    res.on("aborted", () => (aborted = true));
    const failure = (): SandgateError | null => {
      const r = parseResult(res.trailers[RESULT_TRAILER]);
      if (r && !r.ok) return fromApiBody(r, "the copy failed");
      if (aborted || !res.complete) return new SandgateError("the gateway cut the stream short (it stopped, or the connection broke)", "connection_lost");
      return null;
    };
    try {
      yield* readTar(res as AsyncIterable<Buffer>);
    } catch (err) {
      if (err instanceof TarFormatError) throw failure() ?? new SandgateError(`not a valid tar stream: ${err.message}`, "bad_response");
      if (err instanceof SandgateError) throw err;
      throw failure() ?? err;
    }
    const f = failure();
    if (f) throw f;
  }
}
