// The host side of `sandbox cp`: a local tree as a tar stream (read as it is
// sent), and a tar stream from a sandbox written under a local directory without
// ever leaving it. The stream is the sandbox's: the gateway has cleaned it, and it
// is checked again here (src/files/members.ts), then every write is made so that
// no symlink is followed — neither one the archive made nor one already on disk:
// each parent is looked at with lstat and must be a real directory, files are
// created with O_EXCL|O_NOFOLLOW after removing what was there, and a hard link
// may only name a regular file already under the destination. set-uid and set-gid
// bits never arrive; ownership is the user running the CLI.

import { constants, createReadStream } from "node:fs";
import { chmod, link, lstat, mkdir, open, opendir, readlink, stat, symlink, unlink, utimes, type FileHandle } from "node:fs/promises";
import type { Stats } from "node:fs";
import { CopyRefused, MemberGuard, type GuardLimits } from "../files/members.js";
import { END_OF_ARCHIVE, encodeHeader, nameText, padding, type TarHeader } from "../files/tar-format.js";
import { readTar } from "../files/tar-stream.js";
import { SandgateError } from "../util/errors.js";

export interface Progress {
  bytes: number;
}

/** A local path (text) joined with a member's name (bytes) as the path the kernel sees. */
export function localPath(root: string, rel: string): Buffer {
  return rel === "" ? Buffer.from(root, "utf8") : Buffer.concat([Buffer.from(root.endsWith("/") ? root : `${root}/`, "utf8"), Buffer.from(rel, "latin1")]);
}

const code = (err: unknown): string | undefined => (err as NodeJS.ErrnoException).code;

const ERRNO: Record<string, string> = {
  ENAMETOOLONG: "the path is too long for this system",
  ENOSPC: "no space left on the device",
  EDQUOT: "over the disk quota",
  EACCES: "permission denied",
  EPERM: "operation not permitted",
  EROFS: "a read-only file system",
  EEXIST: "it appeared while being written",
  ELOOP: "a symbolic link is in the way",
};

/** What an errno means, in a few words. */
export const errnoText = (c: string): string => ERRNO[c] ?? "the file system refused";

/** A local file system error as one line naming the member and the destination (never a stack or a 4 KiB path). */
export function local(err: unknown, rel: string, root: string): unknown {
  const c = code(err);
  if (c === undefined || err instanceof SandgateError) return err;
  const what = rel === "" ? JSON.stringify(root) : `${nameText(rel)} under ${JSON.stringify(root)}`;
  return new CopyRefused("invalid_request", `cannot write ${what}: ${errnoText(c)} (${c})`);
}

async function lstatOrNull(p: Buffer | string): Promise<Stats | null> {
  try {
    return await lstat(p);
  } catch (err) {
    if (code(err) === "ENOENT") return null;
    throw err;
  }
}

// ---- a local tree → a tar stream ---------------------------------------------

export interface PackStats {
  entries: number;
  bytes: number;
  /** Sockets, FIFOs and device nodes: not copied. */
  skipped: string[];
}

/**
 * The tar stream of `path`, its top-level member named `top` (a byte string), or
 * with no top-level member at all when `top` is null (a directory's contents).
 * Symlinks are archived as symlinks (the root too, unless `follow`).
 */
export function packLocal(path: string, top: string | null, opts: { follow?: boolean; progress?: Progress } = {}): { stream: AsyncGenerator<Buffer>; stats: PackStats } {
  const stats: PackStats = { entries: 0, bytes: 0, skipped: [] };
  async function* entry(p: Buffer, name: string | null, st: Stats): AsyncGenerator<Buffer> {
    const mtime = Math.floor(st.mtimeMs / 1000);
    const mode = st.mode & 0o7777;
    if (st.isDirectory()) {
      if (name !== null) {
        stats.entries++;
        yield encodeHeader({ name, type: "directory", mode, size: 0, mtime, linkname: "" });
      }
      // Names as bytes: a name that is not UTF-8 is copied as it is.
      const dir = await opendir(p, { encoding: "buffer" as BufferEncoding });
      for await (const d of dir as AsyncIterable<{ name: string | Buffer }>) {
        const child = Buffer.isBuffer(d.name) ? d.name : Buffer.from(d.name, "utf8");
        const childPath = Buffer.concat([p, Buffer.from("/"), child]);
        const childName = (name === null ? "" : `${name}/`) + child.toString("latin1");
        yield* entry(childPath, childName, await lstat(childPath));
      }
      return;
    }
    const label = name ?? "";
    if (st.isSymbolicLink()) {
      stats.entries++;
      const target = (await readlink(p, { encoding: "buffer" })).toString("latin1");
      yield encodeHeader({ name: label, type: "symlink", mode: 0o777, size: 0, mtime, linkname: target });
      return;
    }
    if (!st.isFile()) {
      if (stats.skipped.length < 20) stats.skipped.push(Buffer.from(label, "latin1").toString("utf8"));
      else stats.skipped.push("…");
      return;
    }
    stats.entries++;
    yield encodeHeader({ name: label, type: "file", mode, size: st.size, mtime, linkname: "" });
    let got = 0;
    if (st.size > 0) {
      for await (const c of createReadStream(p, { start: 0, end: st.size - 1, highWaterMark: 256 * 1024 })) {
        const chunk = c as Buffer;
        got += chunk.length;
        stats.bytes += chunk.length;
        if (opts.progress) opts.progress.bytes += chunk.length;
        yield chunk;
      }
    }
    if (got !== st.size) throw new CopyRefused("invalid_request", `${nameText(label)} shrank from ${st.size} to ${got} bytes while it was read; copy it again`);
    yield padding(st.size);
  }
  async function* run(): AsyncGenerator<Buffer> {
    const root = Buffer.from(path, "utf8");
    let st: Stats;
    try {
      st = opts.follow ? await stat(root) : await lstat(root);
    } catch (err) {
      if (code(err) === "ENOENT") throw new CopyRefused("invalid_request", `no such file or directory: ${JSON.stringify(path)}`);
      throw err;
    }
    if (top === null && !st.isDirectory()) throw new CopyRefused("invalid_request", `${JSON.stringify(path)} is not a directory ("/." copies a directory's contents)`);
    yield* entry(root, top, st);
    yield END_OF_ARCHIVE;
  }
  return { stream: run(), stats };
}

// ---- a tar stream → under a local directory ------------------------------------

export interface UnpackOptions {
  /** The directory everything lands under (it exists; the caller checked). */
  root: string;
  /** The stream's one top-level name becomes this (a byte string); "" writes its contents into root. */
  rename: string;
  /** The root member must be a file (the destination is an existing file it replaces). */
  fileOnly?: boolean;
  limits?: Partial<GuardLimits>;
  progress?: Progress;
}

export interface UnpackStats {
  entries: number;
  bytes: number;
  skipped: number;
  /** The first member's type: what the remote path was. */
  rootType: TarHeader["type"] | null;
}

const DEFAULT_GUARD: GuardLimits = { maxEntries: 100_000_000, maxBytes: Number.MAX_SAFE_INTEGER, symlinkMemoryBytes: 256 * 1024 * 1024 };

export async function unpackLocal(source: AsyncIterable<Buffer>, opts: UnpackOptions): Promise<UnpackStats> {
  const guard = new MemberGuard({ limits: { ...DEFAULT_GUARD, ...opts.limits }, root: { rename: opts.rename } });
  const stats: UnpackStats = { entries: 0, bytes: 0, skipped: 0, rootType: null };
  /**
   * Directories of the current branch already checked (or made) as real directories, shallowest
   * first: a stream is depth-first, so a member's parents are mostly these. Bounded by the depth.
   */
  const checked: string[] = [];
  /** Directories created or entered, whose mode and time are set once the stream has left them. */
  const pending: { rel: string; mode: number; mtime: number }[] = [];
  const settle = async (rel: string | null): Promise<void> => {
    while (pending.length > 0) {
      const top = pending.at(-1)!;
      if (rel !== null && rel.startsWith(`${top.rel}/`)) return;
      pending.pop();
      const p = localPath(opts.root, top.rel);
      await chmod(p, top.mode);
      await utimes(p, top.mtime, top.mtime);
    }
  };
  /** Every parent of rel must be a real directory under root (created if missing), never a symlink. */
  const parents = async (rel: string, what: string): Promise<void> => {
    const parent = rel.includes("/") ? rel.slice(0, rel.lastIndexOf("/")) : "";
    while (checked.length > 0 && !(parent === checked.at(-1) || parent.startsWith(`${checked.at(-1)!}/`))) checked.pop();
    let at = checked.length > 0 ? checked.at(-1)!.length + 1 : 0;
    while (at < parent.length + 1 && parent !== "") {
      const slash = parent.indexOf("/", at);
      const prefix = slash === -1 ? parent : parent.slice(0, slash);
      const p = localPath(opts.root, prefix);
      const st = await lstatOrNull(p);
      if (st === null) await mkdir(p, { mode: 0o755 });
      else if (!st.isDirectory()) {
        throw new CopyRefused("invalid_request", `${what} ${nameText(rel)} would be written through ${nameText(prefix)}, which is ${st.isSymbolicLink() ? "a symbolic link" : "not a directory"}; nothing is written through a symlink`);
      }
      checked.push(prefix);
      at = prefix.length + 1;
    }
  };
  let first = true;
  for await (const e of readTar(source)) {
    const v = guard.admit(e.header);
    if (first) {
      stats.rootType = e.header.type;
      if (opts.fileOnly && e.header.type === "directory") throw new CopyRefused("invalid_request", `cannot copy a directory onto the file ${JSON.stringify(opts.root)}/${Buffer.from(opts.rename, "latin1").toString("utf8")}`);
      first = false;
    }
    if (v.action === "skip") {
      if (e.header.type !== "directory") stats.skipped++;
      continue;
    }
    const h = v.header;
    try {
      await settle(h.name);
      await parents(h.name, "member");
      const target = localPath(opts.root, h.name);
      const existing = await lstatOrNull(target);
      if (h.type === "directory") {
        if (existing && !existing.isDirectory()) throw new CopyRefused("invalid_request", `cannot replace ${nameText(h.name)} (${existing.isSymbolicLink() ? "a symbolic link" : "a file"}) with a directory`);
        if (!existing) await mkdir(target, { mode: 0o700 });
        else await chmod(target, (existing.mode & 0o7777) | 0o700);
        checked.push(h.name);
        pending.push({ rel: h.name, mode: h.mode, mtime: h.mtime });
      } else {
        if (existing?.isDirectory()) throw new CopyRefused("invalid_request", `cannot replace the directory ${nameText(h.name)} with a ${h.type === "file" ? "file" : h.type === "symlink" ? "symbolic link" : "hard link"}`);
        if (existing) await unlink(target);
        if (h.type === "symlink") await symlink(Buffer.from(h.linkname, "latin1"), target);
        else if (h.type === "hardlink") {
          await parents(h.linkname, "hard link target");
          const src = localPath(opts.root, h.linkname);
          const st = await lstatOrNull(src);
          if (!st?.isFile()) throw new CopyRefused("invalid_request", `hard link ${nameText(h.name)} names ${nameText(h.linkname)}, which is not a file under the destination`);
          await link(src, target);
        } else {
          // A new file, never an existing one or one a symlink points at.
          const fh: FileHandle = await open(target, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
          try {
            for await (const chunk of e.data) {
              await fh.write(chunk);
              stats.bytes += chunk.length;
              if (opts.progress) opts.progress.bytes += chunk.length;
            }
            await fh.chmod(h.mode);
            await fh.utimes(h.mtime, h.mtime);
          } finally {
            await fh.close();
          }
        }
      }
    } catch (err) {
      throw local(err, h.name, opts.root);
    }
    stats.entries++;
  }
  try {
    await settle(null);
  } catch (err) {
    throw local(err, "", opts.root);
  }
  if (first) throw new CopyRefused("invalid_request", "the archive is empty");
  return stats;
}
