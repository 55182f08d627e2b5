// Hand-made tar streams for tests, written independently of src/files/tar-format.ts
// (so a test never checks the encoder against itself): any name, type, link target,
// size and magic, pax and GNU long-name records, truncations. Hostile on request.

export interface CraftMember {
  name: string;
  /** Typeflag character; default "0" (file). */
  type?: string;
  data?: Buffer | string;
  /** Overrides the size field (a lie about the data). */
  size?: number;
  mode?: number;
  linkname?: string;
  mtime?: number;
  /** "posix" (ustar\0 00, prefix field used for names over 100 bytes), or "gnu" (ustar  \0). */
  magic?: "posix" | "gnu";
  /** Put the name in a pax record (typeflag x) before the header. */
  pax?: Record<string, string>;
  /** Put the name (and link target) in GNU ././@LongLink records. */
  gnuLong?: boolean;
  /** Break the checksum. */
  badChecksum?: boolean;
}

const octal = (n: number, len: number): string => n.toString(8).padStart(len - 1, "0") + "\0";

export function rawHeader(m: CraftMember, size: number): Buffer {
  const b = Buffer.alloc(512);
  const name = Buffer.from(m.name, "latin1");
  if (m.magic === "posix" && name.length > 100) {
    const cut = m.name.lastIndexOf("/", 155);
    b.write(m.name.slice(cut + 1), 0, 100, "latin1");
    b.write(m.name.slice(0, cut), 345, 155, "latin1");
  } else {
    name.copy(b, 0, 0, Math.min(100, name.length));
  }
  b.write(octal(m.mode ?? 0o644, 8), 100, "latin1");
  b.write(octal(0, 8), 108, "latin1");
  b.write(octal(0, 8), 116, "latin1");
  b.write(octal(size, 12), 124, "latin1");
  b.write(octal(m.mtime ?? 1_700_000_000, 12), 136, "latin1");
  b.write(m.type ?? "0", 156, 1, "latin1");
  Buffer.from(m.linkname ?? "", "latin1").copy(b, 157, 0, Math.min(100, Buffer.byteLength(m.linkname ?? "", "latin1")));
  if (m.magic === "gnu") b.write("ustar  \0", 257, "latin1");
  else {
    b.write("ustar\0", 257, "latin1");
    b.write("00", 263, "latin1");
  }
  b.fill(0x20, 148, 156);
  let sum = 0;
  for (const x of b) sum += x;
  if (m.badChecksum) sum += 1;
  b.write(sum.toString(8).padStart(6, "0") + "\0 ", 148, "latin1");
  return b;
}

const pad = (n: number): Buffer => Buffer.alloc((512 - (n % 512)) % 512);

function paxRecords(kv: Record<string, string>): Buffer {
  const parts: Buffer[] = [];
  for (const [k, v] of Object.entries(kv)) {
    const body = ` ${k}=${v}\n`;
    let len = Buffer.byteLength(body, "latin1") + 1;
    while (String(len).length + Buffer.byteLength(body, "latin1") !== len) len++;
    parts.push(Buffer.from(`${len}${body}`, "latin1"));
  }
  return Buffer.concat(parts);
}

export function member(m: CraftMember): Buffer {
  const data = m.data === undefined ? Buffer.alloc(0) : Buffer.isBuffer(m.data) ? m.data : Buffer.from(m.data, "latin1");
  const parts: Buffer[] = [];
  if (m.pax) {
    const p = paxRecords(m.pax);
    parts.push(rawHeader({ name: "PaxHeader", type: "x" }, p.length), p, pad(p.length));
  }
  if (m.gnuLong) {
    for (const [flag, value] of [
      ["K", m.linkname],
      ["L", m.name],
    ] as const) {
      if (value === undefined || value.length <= 100) continue;
      const d = Buffer.from(value + "\0", "latin1");
      parts.push(rawHeader({ name: "././@LongLink", type: flag, magic: "gnu" }, d.length), d, pad(d.length));
    }
  }
  const size = m.size ?? data.length;
  parts.push(rawHeader(m, size), data, pad(data.length));
  return Buffer.concat(parts);
}

export const END = Buffer.alloc(1024);

/** A whole archive: the members, then the end marker (unless `end: false`). */
export function archive(members: CraftMember[], opts: { end?: boolean } = {}): Buffer {
  return Buffer.concat([...members.map(member), ...(opts.end === false ? [] : [END])]);
}

/** The buffer as a stream of chunks of `size` bytes (chunk boundaries anywhere). */
export async function* chunks(b: Buffer, size = 7): AsyncGenerator<Buffer> {
  for (let i = 0; i < b.length; i += size) yield b.subarray(i, i + size);
}

export async function collect(stream: AsyncIterable<Buffer>): Promise<Buffer> {
  const out: Buffer[] = [];
  for await (const c of stream) out.push(c);
  return Buffer.concat(out);
}
