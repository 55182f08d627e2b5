// Work started and not awaited by what started it (an event handler's, a timer's, a queued
// task), kept until it settles, so that its owner can count it (leak checks) and wait for
// all of it (close, tests).

export class InFlight {
  readonly #work = new Set<Promise<void>>();

  /** Keeps `p` until it settles; a rejection goes to `onError` (never unhandled). */
  track(p: Promise<void>, onError: (err: unknown) => void): void {
    const t: Promise<void> = p.catch(onError).finally(() => this.#work.delete(t));
    this.#work.add(t);
  }

  get size(): number {
    return this.#work.size;
  }

  /** Resolves once nothing tracked is left, including work tracked while it waits. */
  async idle(): Promise<void> {
    while (this.#work.size > 0) await Promise.all([...this.#work]);
  }
}
