// Where a reader of a log stands, so that a broken stream resumes without a line
// twice or a line lost. Pure.
//
// A reader asks again with `since` = the time of the last line it delivered; Docker
// (and the gateway) answer every line AT OR AFTER that time. Docker gives all the lines
// of one read from the workload the same time, so several lines share a time: the
// cursor keeps the time and how many lines of that time were delivered, and on the
// next read drops that many lines of that time before delivering again. Lines of one
// time always come back in the order of the log file, so a count is exact (identical
// lines included, where a set of (time, text) pairs would not be).

/** The last time delivered and how many lines of exactly that time were delivered. */
export interface LogCursor {
  /** Canonical time (src/util/log-time.ts). */
  t: string;
  n: number;
}

export class ResumeFilter {
  #cursor: LogCursor | null;
  /** Lines of time #cursor.t seen in the current read. */
  #seen = 0;
  /** Reading again from the cursor's time: lines before it, and the first n at it, were delivered. */
  #replaying: boolean;

  /**
   * `from`: a cursor to resume after, or `{ t: since, n: 0 }` for "at or after since",
   * or null for everything.
   */
  constructor(from: LogCursor | null = null) {
    this.#cursor = from === null ? null : { ...from };
    this.#replaying = from !== null;
  }

  /** The resume point: ask again with since = cursor.t, then call rewind(). */
  get cursor(): LogCursor | null {
    return this.#cursor === null ? null : { ...this.#cursor };
  }

  /** Whether anything was delivered (a cursor with n > 0). */
  get delivered(): boolean {
    return this.#cursor !== null && this.#cursor.n > 0;
  }

  /** A new read starts (from since = cursor.t): the lines of that time are counted again. */
  rewind(): void {
    this.#seen = 0;
    this.#replaying = this.#cursor !== null;
  }

  /**
   * True when the line of time `t` is new: deliver it (the cursor moves). False: already
   * delivered, or before the cursor. Past the replayed part of a read every line is new:
   * a daemon clock that steps back mid-read loses nothing (the cursor stays at the
   * latest time; a resume across such a step may repeat or skip lines around it).
   */
  accept(t: string): boolean {
    const c = this.#cursor;
    if (c === null || t > c.t) {
      this.#cursor = { t, n: 1 };
      this.#seen = 1;
      this.#replaying = false;
      return true;
    }
    if (t < c.t) return !this.#replaying;
    this.#seen++;
    if (this.#replaying && this.#seen <= c.n) return false;
    this.#replaying = false;
    c.n = this.#seen;
    return true;
  }

  /** An independent copy (e.g. to count a selection before reading it). */
  clone(): ResumeFilter {
    const f = new ResumeFilter(this.#cursor);
    f.#seen = this.#seen;
    f.#replaying = this.#replaying;
    return f;
  }
}
