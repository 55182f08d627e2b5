// Reading a tar stream member by member without holding it: headers (and their
// long-name and pax records, each bounded) are read whole; data is handed on in
// the chunks it arrives in. The caller pulls (async iteration), so a slow consumer
// slows the producer instead of growing a buffer.

import { BLOCK, TarFormatError, decodeBlock, nameText, parsePax, type TarHeader } from "./tar-format.js";

/** The largest metadata record read into memory: a pax header or a GNU long name. */
export const META_MAX_BYTES = 64 * 1024;

/** Pulls exact byte counts out of a stream of chunks. */
class Bytes {
  private buf: Buffer = Buffer.alloc(0);
  private done = false;
  private readonly it: AsyncIterator<Buffer>;

  constructor(source: AsyncIterable<Buffer>) {
    this.it = source[Symbol.asyncIterator]();
  }

  private async fill(): Promise<boolean> {
    if (this.done) return false;
    const r = await this.it.next();
    if (r.done) {
      this.done = true;
      return false;
    }
    const chunk = Buffer.isBuffer(r.value) ? r.value : Buffer.from(r.value);
    this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
    return true;
  }

  /** Exactly n bytes (n ≤ META_MAX_BYTES + a block), or null at a clean end before the first byte. */
  async exact(n: number, what: string): Promise<Buffer | null> {
    while (this.buf.length < n) {
      if (!(await this.fill())) {
        if (this.buf.length === 0) return null;
        throw new TarFormatError(`the stream ended inside ${what}`);
      }
    }
    const out = this.buf.subarray(0, n);
    this.buf = this.buf.subarray(n);
    return out;
  }

  /** n bytes, as they arrive. */
  async *pieces(n: number, what: string): AsyncGenerator<Buffer> {
    let left = n;
    while (left > 0) {
      if (this.buf.length === 0 && !(await this.fill())) throw new TarFormatError(`the stream ended inside ${what} (${left} bytes missing)`);
      const take = Math.min(left, this.buf.length);
      const out = this.buf.subarray(0, take);
      this.buf = this.buf.subarray(take);
      left -= take;
      yield out;
    }
  }

  async skip(n: number, what: string): Promise<void> {
    const it = this.pieces(n, what);
    while (!(await it.next()).done) {
      /* discarded */
    }
  }

  /** Whatever follows the end of the archive (record padding), discarded. */
  async drain(): Promise<void> {
    this.buf = Buffer.alloc(0);
    while (await this.fill()) this.buf = Buffer.alloc(0);
  }

  close(): void {
    void this.it.return?.();
  }
}

export interface TarEntry {
  header: TarHeader;
  /** The member's data (header.size bytes). Whatever the caller does not read is skipped. */
  data: AsyncIterable<Buffer>;
}

/** Typeflags of members this code does not copy (GNU sparse, multi-volume, ...), with their name. */
export class UnsupportedMember extends TarFormatError {
  constructor(
    readonly typeflag: string,
    readonly memberName: string,
  ) {
    super(`member ${nameText(memberName)} has tar type ${JSON.stringify(typeflag)}; only files, directories, symbolic links and hard links are copied`);
  }
}

const pad = (n: number): number => (BLOCK - (n % BLOCK)) % BLOCK;

/**
 * The members of a tar stream, in order. Ends at the end-of-archive block (what
 * follows it is read and discarded, so the producer is never cut off mid-write);
 * a stream that ends without one is a TarFormatError ("truncated"). Each metadata
 * record is at most META_MAX_BYTES.
 */
export async function* readTar(source: AsyncIterable<Buffer>): AsyncGenerator<TarEntry> {
  const bytes = new Bytes(source);
  try {
    let pending: { path?: string; linkpath?: string; size?: number; mtime?: number } = {};
    for (;;) {
      const b = await bytes.exact(BLOCK, "a header");
      if (b === null) throw new TarFormatError("the stream ended without the end-of-archive marker (truncated)");
      const raw = decodeBlock(Buffer.from(b));
      if (raw.kind === "end") {
        await bytes.drain();
        return;
      }
      if (raw.kind === "meta") {
        if (raw.size > META_MAX_BYTES) throw new TarFormatError(`a ${raw.meta} record of ${raw.size} bytes; the limit is ${META_MAX_BYTES}`);
        const data = Buffer.from((await bytes.exact(raw.size + pad(raw.size), `a ${raw.meta} record`)) ?? Buffer.alloc(0)).subarray(0, raw.size);
        if (data.length < raw.size) throw new TarFormatError(`the stream ended inside a ${raw.meta} record`);
        if (raw.meta === "pax") pending = { ...pending, ...parsePax(data) };
        else if (raw.meta === "longname") pending.path = cut(data);
        else if (raw.meta === "longlink") pending.linkpath = cut(data);
        // A global pax header changes nothing this code reads.
        continue;
      }
      if (raw.kind === "unsupported") throw new UnsupportedMember(raw.typeflag, pending.path ?? raw.name);
      const h: TarHeader = { ...raw.header };
      if (pending.path !== undefined) h.name = pending.path;
      if (pending.linkpath !== undefined) h.linkname = pending.linkpath;
      if (pending.mtime !== undefined) h.mtime = pending.mtime;
      // A pax size counts for files; for every other type it must say 0 too.
      const size = pending.size ?? raw.header.size;
      pending = {};
      if (h.type !== "file" && size !== 0) throw new TarFormatError(`member ${nameText(h.name)} is a ${h.type} that claims ${size} bytes of data`);
      h.size = size;
      let left = size;
      const data = (async function* () {
        for await (const piece of bytes.pieces(left, `the data of ${nameText(h.name)}`)) {
          left -= piece.length;
          yield piece;
        }
      })();
      yield { header: h, data };
      await bytes.skip(left + pad(size), `the data of ${nameText(h.name)}`);
    }
  } finally {
    bytes.close();
  }
}

/** A GNU long name: its bytes up to the first NUL. */
function cut(data: Buffer): string {
  const nul = data.indexOf(0);
  return data.subarray(0, nul === -1 ? data.length : nul).toString("latin1");
}
