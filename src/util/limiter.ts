// At most N tasks at a time; the rest wait their turn in order. After a daemon
// restart every sandbox is re-verified at once: a bound lets early ones finish
// early instead of all finishing late on a busy machine.

export class Limiter {
  private active = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(private readonly max: number) {}

  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.active >= this.max) await new Promise<void>((resolve) => this.waiting.push(resolve));
    this.active++;
    try {
      return await task();
    } finally {
      this.active--;
      this.waiting.shift()?.();
    }
  }
}
