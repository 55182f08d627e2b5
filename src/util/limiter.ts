// At most N tasks at a time; the rest wait their turn in order. After a daemon
// restart every sandbox is re-verified at once: a bound lets early ones finish
// early instead of all finishing late on a busy machine. A waiter that is no longer
// wanted (its signal aborts) leaves the line without running.

export class Limiter {
  private active = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(private readonly max: number) {}

  /** Tasks running now, and waiting for their turn. */
  get load(): { active: number; waiting: number; max: number } {
    return { active: this.active, waiting: this.waiting.length, max: this.max };
  }

  async run<T>(task: () => Promise<T>): Promise<T> {
    // A finishing task hands its slot to the next waiter (active unchanged), so no caller
    // arriving in between can take it too.
    if (this.active >= this.max) await new Promise<void>((resolve) => this.waiting.push(resolve));
    else this.active++;
    return this.#running(task);
  }

  /** run(), unless `signal` aborts while it waits: then it leaves the line and resolves "abandoned". */
  async runUnlessAborted<T>(signal: AbortSignal, task: () => Promise<T>): Promise<T | "abandoned"> {
    if (signal.aborted) return "abandoned";
    if (this.active >= this.max) {
      const turn = await new Promise<boolean>((resolve) => {
        const go = (): void => {
          signal.removeEventListener("abort", leave);
          resolve(true);
        };
        const leave = (): void => {
          const at = this.waiting.indexOf(go);
          if (at >= 0) this.waiting.splice(at, 1);
          resolve(false);
        };
        this.waiting.push(go);
        signal.addEventListener("abort", leave, { once: true });
      });
      if (!turn) return "abandoned";
    } else this.active++;
    return this.#running(task);
  }

  async #running<T>(task: () => Promise<T>): Promise<T> {
    try {
      return await task();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.active--;
    }
  }
}
