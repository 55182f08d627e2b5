// One output stream of a command, kept up to a limit: bytes past it are counted and
// dropped as they come, never held, so a command that writes gigabytes costs the server
// at most `limit` bytes per stream.

export class BoundedCapture {
  readonly #chunks: Buffer[] = [];
  #kept = 0;
  #dropped = 0;

  constructor(readonly limit: number) {}

  push(chunk: Buffer): void {
    const room = this.limit - this.#kept;
    if (room >= chunk.length) {
      this.#chunks.push(chunk);
      this.#kept += chunk.length;
      return;
    }
    if (room > 0) {
      // A copy: the socket's buffer must not be held through a view of it.
      this.#chunks.push(Buffer.from(chunk.subarray(0, room)));
      this.#kept += room;
    }
    this.#dropped += chunk.length - Math.max(room, 0);
  }

  /** Bytes dropped past the limit. */
  get dropped(): number {
    return this.#dropped;
  }

  /** What was kept, as text: UTF-8, a character cut at the limit shown as U+FFFD. */
  text(): string {
    return Buffer.concat(this.#chunks, this.#kept).toString("utf8");
  }
}
