// The tar header, one 512-byte block at a time: decode (ustar, GNU and pax forms,
// as busybox, GNU tar, bsdtar and Python write them) and encode (GNU form: long
// names as ././@LongLink records, which busybox, GNU tar and bsdtar all read, and
// which carry a name's bytes as they are, unlike pax's UTF-8). Pure.
//
// Names are byte strings: each byte one character (latin1), so a name that is not
// UTF-8 survives a round trip exactly. `nameText` turns one into text for people.

import { SandgateError } from "../util/errors.js";

export const BLOCK = 512;

export type EntryType = "file" | "directory" | "symlink" | "hardlink" | "fifo" | "char" | "block";

/** One member, as the rest of the code sees it (ownership is never carried). */
export interface TarHeader {
  /** Byte string (latin1). */
  name: string;
  type: EntryType;
  /** Permission bits (and set-id / sticky bits as found). */
  mode: number;
  /** Bytes of data that follow (files only; 0 for every other type). */
  size: number;
  /** Seconds since the epoch. */
  mtime: number;
  /** Symlink target or hard-link source; byte string; "" for other types. */
  linkname: string;
}

/** What one header block says, before long names and pax records are applied. */
export type RawBlock =
  | { kind: "end" }
  | { kind: "entry"; header: TarHeader }
  /** Metadata records whose `size` bytes of data follow: pax (x), pax global (g), GNU long name (L) and long link (K). */
  | { kind: "meta"; meta: "pax" | "global" | "longname" | "longlink"; size: number }
  | { kind: "unsupported"; typeflag: string; name: string; size: number };

export class TarFormatError extends SandgateError {
  override readonly name = "TarFormatError";
  constructor(message: string, options?: ErrorOptions) {
    super(message, "bad_tar", options);
  }
}

/** A name for a message: its bytes read as UTF-8, quoted, control characters escaped, at most ~200 characters. */
export function nameText(name: string): string {
  const text = Buffer.from(name, "latin1").toString("utf8");
  return JSON.stringify(text.length > 200 ? `${text.slice(0, 200)}…` : text);
}

/** A user's text (UTF-8) as the byte string a tar header holds. */
export const toBytes = (text: string): string => Buffer.from(text, "utf8").toString("latin1");

function cstring(b: Buffer, start: number, len: number): string {
  const field = b.subarray(start, start + len);
  const nul = field.indexOf(0);
  return field.subarray(0, nul === -1 ? len : nul).toString("latin1");
}

/** A numeric field: octal digits (spaces and NULs around them) or GNU base-256 (positive only). */
function numeric(b: Buffer, start: number, len: number, what: string): number {
  const field = b.subarray(start, start + len);
  if (field[0]! & 0x80) {
    if (field[0] === 0xff) throw new TarFormatError(`a negative ${what} in a header`);
    let n = field[0]! & 0x7f;
    for (let i = 1; i < len; i++) {
      n = n * 256 + field[i]!;
      if (n > Number.MAX_SAFE_INTEGER) throw new TarFormatError(`${what} too large in a header`);
    }
    return n;
  }
  const text = field.toString("latin1").replace(/\0.*$/s, "").trim();
  if (text === "") return 0;
  if (!/^[0-7]+$/.test(text)) throw new TarFormatError(`${what} is not an octal number in a header (${JSON.stringify(text.slice(0, 20))})`);
  const n = parseInt(text, 8);
  if (!Number.isSafeInteger(n)) throw new TarFormatError(`${what} too large in a header`);
  return n;
}

function checksumOk(b: Buffer): boolean {
  let stored: number;
  try {
    stored = numeric(b, 148, 8, "checksum");
  } catch {
    return false;
  }
  let unsigned = 0;
  let signed = 0;
  for (let i = 0; i < BLOCK; i++) {
    const v = i >= 148 && i < 156 ? 0x20 : b[i]!;
    unsigned += v;
    signed += v > 127 ? v - 256 : v;
  }
  return stored === unsigned || stored === signed;
}

const TYPES: Record<string, EntryType> = {
  "0": "file",
  "\0": "file",
  "7": "file", // contiguous file: a file
  "1": "hardlink",
  "2": "symlink",
  "3": "char",
  "4": "block",
  "5": "directory",
  "6": "fifo",
};
const META: Record<string, "pax" | "global" | "longname" | "longlink"> = { x: "pax", g: "global", L: "longname", K: "longlink" };

/** Decodes one header block. Throws TarFormatError on a block that is not a tar header. */
export function decodeBlock(b: Buffer): RawBlock {
  if (b.length !== BLOCK) throw new TarFormatError(`a header block of ${b.length} bytes`);
  if (b.every((x) => x === 0)) return { kind: "end" };
  if (!checksumOk(b)) throw new TarFormatError("a header block with a wrong checksum (not a tar stream, or a corrupt one)");
  const typeflag = String.fromCharCode(b[156]!);
  const size = numeric(b, 124, 12, "size");
  const meta = META[typeflag];
  if (meta) return { kind: "meta", meta, size };
  const magic = b.subarray(257, 263).toString("latin1");
  let name = cstring(b, 0, 100);
  // POSIX ustar splits a long name into prefix/name; the GNU form uses that area for other fields.
  if (magic === "ustar\0") {
    const prefix = cstring(b, 345, 155);
    if (prefix !== "") name = `${prefix}/${name}`;
  }
  const type = TYPES[typeflag];
  if (!type) return { kind: "unsupported", typeflag, name, size };
  return {
    kind: "entry",
    header: { name, type, mode: numeric(b, 100, 8, "mode") & 0o7777, size, mtime: numeric(b, 136, 12, "mtime"), linkname: cstring(b, 157, 100) },
  };
}

/** The pax records this code reads (path, linkpath, size, mtime); others are ignored. */
export function parsePax(data: Buffer): { path?: string; linkpath?: string; size?: number; mtime?: number } {
  const out: { path?: string; linkpath?: string; size?: number; mtime?: number } = {};
  let pos = 0;
  while (pos < data.length) {
    if (data[pos] === 0) break; // padding
    const space = data.indexOf(0x20, pos);
    if (space === -1 || space - pos > 20) throw new TarFormatError("a malformed pax record (no length)");
    const len = Number(data.subarray(pos, space).toString("latin1"));
    if (!Number.isSafeInteger(len) || len <= space - pos + 1 || pos + len > data.length || data[pos + len - 1] !== 0x0a) {
      throw new TarFormatError("a malformed pax record (bad length)");
    }
    const record = data.subarray(space + 1, pos + len - 1);
    const eq = record.indexOf(0x3d);
    if (eq === -1) throw new TarFormatError("a malformed pax record (no '=')");
    const key = record.subarray(0, eq).toString("latin1");
    // Values are UTF-8 by the standard; held as byte strings like every name.
    const value = record.subarray(eq + 1).toString("latin1");
    if (key === "path") out.path = value;
    else if (key === "linkpath") out.linkpath = value;
    else if (key === "size" || key === "mtime") {
      const m = /^(\d{1,16})(?:\.\d*)?$/.exec(value);
      const n = m ? Number(m[1]) : Number.NaN;
      if (!Number.isSafeInteger(n)) throw new TarFormatError(`a pax ${key} that is not a whole number (${JSON.stringify(value.slice(0, 30))})`);
      out[key] = n;
    }
    pos += len;
  }
  return out;
}

// ---- encoding -------------------------------------------------------------------

const OCTAL_SIZE_MAX = 8 ** 11 - 1;

function writeOctal(b: Buffer, start: number, len: number, n: number): void {
  b.write(n.toString(8).padStart(len - 1, "0") + "\0", start, len, "latin1");
}

/** Sizes past 8 GiB - 1 in GNU base-256 (what GNU tar writes, and busybox reads). */
function writeSize(b: Buffer, n: number): void {
  if (n <= OCTAL_SIZE_MAX) return writeOctal(b, 124, 12, n);
  b[124] = 0x80;
  let v = n;
  for (let i = 135; i > 124; i--) {
    b[i] = v % 256;
    v = Math.floor(v / 256);
  }
}

const TYPEFLAG: Record<EntryType, string> = { file: "0", hardlink: "1", symlink: "2", char: "3", block: "4", directory: "5", fifo: "6" };

function block(name: string, typeflag: string, size: number, fields: { mode?: number; mtime?: number; linkname?: string } = {}): Buffer {
  const b = Buffer.alloc(BLOCK);
  // GNU form: a name longer than the field travels in a ././@LongLink record before it.
  b.write(name.length > 100 ? name.slice(0, 100) : name, 0, 100, "latin1");
  writeOctal(b, 100, 8, fields.mode ?? 0);
  writeOctal(b, 108, 8, 0); // uid: ownership is never carried
  writeOctal(b, 116, 8, 0); // gid
  writeSize(b, size);
  writeOctal(b, 136, 12, Math.max(0, Math.min(fields.mtime ?? 0, 8 ** 11 - 1)));
  b.write(typeflag, 156, 1, "latin1");
  const link = fields.linkname ?? "";
  b.write(link.length > 100 ? link.slice(0, 100) : link, 157, 100, "latin1");
  b.write("ustar  \0", 257, 8, "latin1");
  b.fill(0x20, 148, 156);
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += b[i]!;
  b.write(sum.toString(8).padStart(6, "0") + "\0 ", 148, 8, "latin1");
  return b;
}

/** Zero bytes that pad `size` bytes of data to a whole block. */
export function padding(size: number): Buffer {
  const rest = size % BLOCK;
  return Buffer.alloc(rest === 0 ? 0 : BLOCK - rest);
}

function longRecord(typeflag: "L" | "K", value: string): Buffer {
  const data = Buffer.from(value + "\0", "latin1");
  return Buffer.concat([block("././@LongLink", typeflag, data.length), data, padding(data.length)]);
}

/** The blocks of one member's header (long-name records included); its data and padding follow. */
export function encodeHeader(h: TarHeader): Buffer {
  const parts: Buffer[] = [];
  // Directories end in "/", as every tar writes them.
  const name = h.type === "directory" && !h.name.endsWith("/") ? `${h.name}/` : h.name;
  if (h.linkname.length > 100) parts.push(longRecord("K", h.linkname));
  if (name.length > 100) parts.push(longRecord("L", name));
  parts.push(block(name, TYPEFLAG[h.type], h.type === "file" ? h.size : 0, { mode: h.mode, mtime: h.mtime, linkname: h.linkname }));
  return parts.length === 1 ? parts[0]! : Buffer.concat(parts);
}

/** The end of an archive: two zero blocks. */
export const END_OF_ARCHIVE = Buffer.alloc(2 * BLOCK);
