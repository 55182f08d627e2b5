// The one path by which committed events reach a PostgreSQL store's listeners (the watch
// hub), whoever wrote them: this gateway (its commits) or another gateway of the fleet
// (a NOTIFY with the sequence number). Events are handed out in sequence order, each
// once: a high-water mark of what was handed out, and a catch-up that reads what
// committed after it. Because sequence numbers are taken in commit order (logs.ts), a
// number that is not visible after a higher one has been read never will be.
//
// One step at a time (a promise chain), so a local commit and a notification arriving at
// once cannot hand the same event out twice or out of order. A catch-up that fails (the
// database went away) leaves the mark where it was; the next commit, notification or
// reconnection reads from there, so nothing is skipped.

import type { EventRecord } from "../contract.js";

/** Events after a number, oldest first, at most `limit`. */
export type ReadAfter = (afterSeq: number, limit: number) => Promise<EventRecord[]>;

const PAGE = 1000;

export class EventFeed {
  readonly #listeners = new Set<(e: EventRecord) => void>();
  readonly #read: ReadAfter;
  readonly #onError: (err: unknown) => void;
  #mark: number;
  #chain: Promise<void> = Promise.resolve();

  constructor(read: ReadAfter, startAfter: number, onError: (err: unknown) => void) {
    this.#read = read;
    this.#mark = startAfter;
    this.#onError = onError;
  }

  /** The highest sequence number handed out. */
  get mark(): number {
    return this.#mark;
  }

  subscribe(listener: (e: EventRecord) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  clear(): void {
    this.#listeners.clear();
  }

  /**
   * Events this process just committed, in their order: handed out at once when they follow
   * the mark with no number between (the common case: no read), else by a catch-up. Resolves
   * once they are out (or the catch-up failed: they go out with the next one).
   */
  committed(events: readonly EventRecord[]): Promise<void> {
    if (events.length === 0) return this.#chain;
    return this.#step(async () => {
      let expected = this.#mark + 1;
      const fresh = events.filter((e) => e.seq > this.#mark);
      if (fresh.every((e) => e.seq === expected++)) {
        for (const e of fresh) this.#emit(e);
        return;
      }
      await this.#catchUp();
    });
  }

  /** A notification (or a reconnection: `seq` undefined) says events up to `seq` committed somewhere. */
  notified(seq?: number): Promise<void> {
    if ((seq ?? Infinity) <= this.#mark) return this.#chain;
    return this.#step(() => this.#catchUp());
  }

  #step(fn: () => Promise<void>): Promise<void> {
    const next = this.#chain.then(fn).catch((err: unknown) => this.#onError(err));
    this.#chain = next;
    return next;
  }

  async #catchUp(): Promise<void> {
    for (;;) {
      const page = await this.#read(this.#mark, PAGE);
      // One step at a time: nothing moved the mark since the read, so every event read is new.
      for (const e of page) this.#emit(e);
      if (page.length < PAGE) return;
    }
  }

  #emit(e: EventRecord): void {
    this.#mark = e.seq;
    for (const l of this.#listeners) {
      try {
        l(e);
      } catch (err) {
        this.#onError(err);
      }
    }
  }
}
