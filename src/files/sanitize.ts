// A tar stream in, a clean tar stream out: every member through the MemberGuard,
// headers re-encoded from what was checked (never copied), data passed on as it
// arrives, the whole stream counted against the transfer's byte limit. Whatever
// reads the output reads only what the guard admitted.

import { CopyRefused, MemberGuard, type GuardOptions } from "./members.js";
import { END_OF_ARCHIVE, encodeHeader, padding, type TarHeader } from "./tar-format.js";
import { readTar } from "./tar-stream.js";

export interface SanitizeOptions extends GuardOptions {
  /**
   * Directories whose mode lacks the owner's rwx are written with it first and
   * given their own mode again once the stream has left them (an extractor such
   * as busybox tar sets a directory's mode at once, and could then not fill a
   * read-only one). Bounded by the depth of the tree.
   */
  deferDirModes?: boolean;
  /**
   * Symlinks are written after every other member (the guard already remembers
   * them, within its memory bound): no member of the stream can be written through
   * one, and a stream refused part-way leaves none behind.
   */
  deferSymlinks?: boolean;
}

export interface SanitizeStats {
  entries: number;
  skipped: number;
  /** Data bytes of the members passed on. */
  dataBytes: number;
  /** Bytes of the incoming stream read so far. */
  streamBytes: number;
  /** Members passed on whole so far (deferred symlinks count once they are). */
  written: number;
}

/** Counts the stream's bytes and refuses it past `max`. */
async function* counted(source: AsyncIterable<Buffer>, stats: SanitizeStats, max: number, limitName: string | undefined): AsyncGenerator<Buffer> {
  for await (const chunk of source) {
    stats.streamBytes += chunk.length;
    if (stats.streamBytes > max) throw new CopyRefused("too_large", `the transfer is over the limit of ${max} bytes${limitName ? ` (${limitName})` : ""}`);
    yield chunk;
  }
}

const OWNER_RWX = 0o700;

export function sanitizeTar(source: AsyncIterable<Buffer>, opts: SanitizeOptions): { stream: AsyncGenerator<Buffer>; stats: SanitizeStats } {
  const stats: SanitizeStats = { entries: 0, skipped: 0, dataBytes: 0, streamBytes: 0, written: 0 };
  const guard = new MemberGuard(opts);
  const open: TarHeader[] = []; // directories written with OWNER_RWX, deepest last
  const symlinks: TarHeader[] = [];
  const leave = function* (name: string | null): Generator<Buffer> {
    while (open.length > 0) {
      const top = open.at(-1)!;
      if (name !== null && name.startsWith(`${top.name}/`)) return;
      open.pop();
      yield encodeHeader(top);
    }
  };
  async function* run(): AsyncGenerator<Buffer> {
    for await (const e of readTar(counted(source, stats, opts.limits.maxBytes, opts.names?.maxBytes))) {
      const v = guard.admit(e.header, stats.streamBytes);
      stats.entries = guard.entries;
      stats.skipped = guard.skipped;
      if (v.action === "skip") continue;
      let h = v.header;
      if (opts.deferSymlinks && h.type === "symlink") {
        symlinks.push(h);
        continue;
      }
      if (opts.deferDirModes) {
        yield* leave(h.name);
        if (h.type === "directory" && (h.mode & OWNER_RWX) !== OWNER_RWX) {
          open.push(h);
          h = { ...h, mode: h.mode | OWNER_RWX };
        }
      }
      yield encodeHeader(h);
      for await (const piece of e.data) yield piece;
      yield padding(h.size);
      stats.dataBytes = guard.dataBytes;
      stats.written++;
    }
    yield* leave(null);
    for (const h of symlinks) {
      yield encodeHeader(h);
      stats.written++;
    }
    yield END_OF_ARCHIVE;
  }
  return { stream: run(), stats };
}
