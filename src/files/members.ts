// What a tar member may be, whichever side wrote the stream (a hostile workload's
// tar, an operator's upload): a relative name with no ".." segment, no absolute
// name, a type we copy, a size within the transfer's limit, never inside (or in
// place of) a symlink the same stream made, and — for a download — under the one
// top-level name that was asked for. Pure and stateful per transfer; every table
// it keeps is bounded.

import { NAME_MAX_BYTES, PATH_MAX_BYTES } from "./sandbox-path.js";
import { nameText, type TarHeader } from "./tar-format.js";
import { SandgateError } from "../util/errors.js";

export type RefusalCode = "invalid_request" | "too_large";

/** A member or a stream that the transfer refuses; `code` is the API error code it becomes. */
export class CopyRefused extends SandgateError {
  override readonly name = "CopyRefused";
  declare readonly code: RefusalCode;
  constructor(code: RefusalCode, message: string, options?: ErrorOptions) {
    super(message, code, options);
  }
}

export type NameCheck = { ok: true; name: string } | { ok: false; error: string };

/**
 * A member name (byte string) made canonical: "./a//b/" → "a/b"; "./" → "" (the
 * destination itself). Refused: absolute names, ".." segments, names and segments
 * over PATH_MAX / NAME_MAX bytes.
 */
export function checkMemberName(raw: string, what = "member"): NameCheck {
  if (raw.startsWith("/")) return { ok: false, error: `${what} ${nameText(raw)} has an absolute name; members must be relative to the destination` };
  if (raw.length > PATH_MAX_BYTES) return { ok: false, error: `${what} ${nameText(raw)} has a name of ${raw.length} bytes; the limit is ${PATH_MAX_BYTES}` };
  const segments: string[] = [];
  for (const s of raw.split("/")) {
    if (s === "" || s === ".") continue;
    if (s === "..") return { ok: false, error: `${what} ${nameText(raw)} contains "..": members must stay inside the destination` };
    if (s.length > NAME_MAX_BYTES) return { ok: false, error: `${what} ${nameText(raw)} has a name segment of ${s.length} bytes; the limit is ${NAME_MAX_BYTES}` };
    segments.push(s);
  }
  return { ok: true, name: segments.join("/") };
}

export interface GuardLimits {
  /** Members per transfer. */
  maxEntries: number;
  /** Bytes of the tar stream per transfer (data and headers). */
  maxBytes: number;
  /** Bytes of symlinks (name and target) remembered per transfer (to refuse members written through them, and to write them last). */
  symlinkMemoryBytes: number;
}

export interface GuardOptions {
  limits: GuardLimits;
  /**
   * A download: every member must be under the first member's top-level name,
   * which is renamed to `rename` (a byte string; "" drops it: the contents only).
   */
  root?: { rename: string };
  /** How the limits are named in errors (the setting a user can change). */
  names?: { maxEntries?: string; maxBytes?: string; symlinkMemoryBytes?: string };
}

export type Verdict = { action: "copy"; header: TarHeader } | { action: "skip"; reason: string };

/** Permission bits kept: set-uid and set-gid never travel (a copy made by root must not create one). */
const KEEP_MODE = { file: 0o777, directory: 0o1777 } as const;

export class MemberGuard {
  entries = 0;
  skipped = 0;
  /** Data bytes of the members copied. */
  dataBytes = 0;
  private top: string | null = null;
  /** A download whose root is a single file: nothing may follow it. */
  private rootIsFile = false;
  private readonly symlinks = new Set<string>();
  /** Lengths of the symlink names: a member's prefixes are looked up only at these lengths. */
  private readonly symlinkLengths = new Set<number>();
  private symlinkBytes = 0;

  constructor(private readonly opts: GuardOptions) {}

  private limitName(k: keyof GuardLimits): string {
    const n = this.opts.names?.[k];
    return n ? ` (${n})` : "";
  }

  /** Checks one member; `streamBytes` is how far the stream has been read. Throws CopyRefused. */
  admit(h: TarHeader, streamBytes = 0): Verdict {
    const L = this.opts.limits;
    this.entries++;
    if (this.entries > L.maxEntries) throw new CopyRefused("too_large", `more than ${L.maxEntries} members in one transfer; the limit is ${L.maxEntries}${this.limitName("maxEntries")}`);
    if (h.type === "file" && streamBytes + h.size > L.maxBytes) {
      throw new CopyRefused("too_large", `member ${nameText(h.name)} is ${h.size} bytes, past the limit of ${L.maxBytes} bytes per transfer${this.limitName("maxBytes")}`);
    }
    const name = this.place(h.name, "member");
    if (this.opts.root && this.entries === 1 && h.type !== "directory") this.rootIsFile = true;
    if (name === null) {
      // "./": the destination itself. Its mode and time stay the destination's.
      this.skipped++;
      return { action: "skip", reason: "the archive's root entry" };
    }
    switch (h.type) {
      case "fifo":
      case "char":
      case "block":
        this.skipped++;
        return { action: "skip", reason: `a ${h.type === "fifo" ? "FIFO" : "device node"} is not copied` };
      case "symlink": {
        if (h.linkname === "" || h.linkname.includes("\0") || h.linkname.length > PATH_MAX_BYTES) {
          throw new CopyRefused("invalid_request", `symbolic link ${nameText(h.name)} has an empty or over-long target`);
        }
        this.throughSymlink(name, h.name);
        this.remember(name, h.linkname);
        return { action: "copy", header: { ...h, name, mode: 0o777, size: 0 } };
      }
      case "hardlink": {
        const target = this.place(h.linkname, "hard link target");
        if (target === null) throw new CopyRefused("invalid_request", `hard link ${nameText(h.name)} points at the destination itself`);
        this.throughSymlink(name, h.name);
        this.throughSymlink(target, h.linkname, true);
        return { action: "copy", header: { ...h, name, linkname: target, mode: 0, size: 0 } };
      }
      case "directory":
        this.throughSymlink(name, h.name);
        return { action: "copy", header: { ...h, name, mode: h.mode & KEEP_MODE.directory, size: 0, linkname: "" } };
      case "file":
        this.throughSymlink(name, h.name);
        this.dataBytes += h.size;
        return { action: "copy", header: { ...h, name, mode: h.mode & KEEP_MODE.file, linkname: "" } };
    }
  }

  /** The member's name checked, under the download's root and renamed; null for the root entry "./". */
  private place(raw: string, what: string): string | null {
    const c = checkMemberName(raw, what);
    if (!c.ok) throw new CopyRefused("invalid_request", c.error);
    const root = this.opts.root;
    if (c.name === "") {
      if (root) throw new CopyRefused("invalid_request", `${what} ${nameText(raw)} is not under the path that was asked for`);
      return null;
    }
    if (!root) return c.name;
    const slash = c.name.indexOf("/");
    const first = slash === -1 ? c.name : c.name.slice(0, slash);
    if (this.rootIsFile && what === "member") throw new CopyRefused("invalid_request", `member ${nameText(raw)} follows ${nameText(this.top ?? "")}, a single file: nothing may follow it`);
    if (this.top === null && what === "member") this.top = first;
    if (first !== this.top) throw new CopyRefused("invalid_request", `${what} ${nameText(raw)} is not under ${nameText(this.top ?? "")}, the path that was asked for`);
    const rest = slash === -1 ? "" : c.name.slice(slash);
    const renamed = root.rename === "" ? rest.slice(1) : `${root.rename}${rest}`;
    return renamed === "" ? null : renamed;
  }

  /** Refuses a name that is, or passes through, a symlink this stream made. */
  private throughSymlink(name: string, raw: string, isTarget = false): void {
    if (this.symlinks.size === 0) return;
    const what = isTarget ? "hard link target" : "member";
    if (this.symlinks.has(name)) throw new CopyRefused("invalid_request", `${what} ${nameText(raw)} replaces a symbolic link made earlier in the same archive`);
    for (let i = name.indexOf("/"); i !== -1; i = name.indexOf("/", i + 1)) {
      if (this.symlinkLengths.has(i) && this.symlinks.has(name.slice(0, i))) {
        throw new CopyRefused("invalid_request", `${what} ${nameText(raw)} goes through the symbolic link ${nameText(name.slice(0, i))} of the same archive; a member is never written through a symlink`);
      }
    }
  }

  /** Remembers a symlink's name (and counts its target too: a stream that defers symlinks holds both). */
  private remember(name: string, target: string): void {
    this.symlinkBytes += name.length + target.length + 64; // and the tables' own overhead, roughly
    const L = this.opts.limits;
    if (this.symlinkBytes > L.symlinkMemoryBytes) {
      throw new CopyRefused("too_large", `too many symbolic links in one transfer (their names pass ${L.symlinkMemoryBytes} bytes${this.limitName("symlinkMemoryBytes")})`);
    }
    this.symlinks.add(name);
    this.symlinkLengths.add(name.length);
  }
}
