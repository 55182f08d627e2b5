// Waits, per key (a sandbox id), for a version to be reached: a policy revision acked,
// secrets acked. Each wait resolves once: at once when already reached, when advance()
// finds it reached, with `missed` when its timeout runs out, or on close(). What "reached"
// means and what a wait answers are the owner's; this keeps the table. A key's entry goes
// with its last waiter, so the table holds only keys with a wait pending.

export interface VersionRules<R> {
  /** Whether `key` has reached `version` now. */
  reached(key: string, version: number): boolean;
  /** The answer of a wait that reached its version. */
  answer(key: string, version: number): R;
  /** The answer of a wait that timed out, or was ended by close(). */
  missed(key: string): R;
}

interface Waiter<R> {
  version: number;
  resolve: (r: R) => void;
  timer: ReturnType<typeof setTimeout>;
}

export class VersionWaiters<R> {
  readonly #byKey = new Map<string, Set<Waiter<R>>>();
  #size = 0;

  constructor(private readonly rules: VersionRules<R>) {}

  /** Resolves once `key` reached `version` (advance() tells), or after timeoutMs with `missed`. */
  wait(key: string, version: number, timeoutMs: number): Promise<R> {
    if (this.rules.reached(key, version)) return Promise.resolve(this.rules.answer(key, version));
    return new Promise((resolve) => {
      let set = this.#byKey.get(key);
      if (set === undefined) this.#byKey.set(key, (set = new Set()));
      const w: Waiter<R> = {
        version,
        resolve,
        timer: setTimeout(() => {
          this.#remove(key, w);
          resolve(this.rules.missed(key));
        }, timeoutMs),
      };
      set.add(w);
      this.#size++;
    });
  }

  /** Something of `key` changed: its waits that reached their version now resolve. */
  advance(key: string): void {
    const set = this.#byKey.get(key);
    if (set === undefined) return;
    for (const w of [...set]) {
      if (!this.rules.reached(key, w.version)) continue;
      clearTimeout(w.timer);
      this.#remove(key, w);
      w.resolve(this.rules.answer(key, w.version));
    }
  }

  /** Every wait resolves now with `missed` (the owner closes). */
  close(): void {
    for (const [key, set] of this.#byKey) {
      for (const w of set) {
        clearTimeout(w.timer);
        w.resolve(this.rules.missed(key));
      }
    }
    this.#byKey.clear();
    this.#size = 0;
  }

  /** Waits pending (leak checks). */
  get size(): number {
    return this.#size;
  }

  #remove(key: string, w: Waiter<R>): void {
    const set = this.#byKey.get(key);
    if (set?.delete(w) !== true) return;
    this.#size--;
    if (set.size === 0) this.#byKey.delete(key);
  }
}
