// Runs tasks one at a time per key (a sandbox id) and tracks every task in
// flight, so lifecycle operations on one sandbox never interleave and shutdown
// can wait for all of them.

import { InFlight } from "./in-flight.js";

export class KeyedSerial {
  private readonly tails = new Map<string, Promise<void>>();
  private readonly pending = new InFlight();

  /**
   * Queue `task` behind earlier tasks for `key`. Errors go to `onError`; if that
   * rethrows, the returned promise rejects, but the queue goes on.
   */
  run(key: string, task: () => Promise<void>, onError: (err: unknown) => void | Promise<void>): Promise<void> {
    const prev = this.tails.get(key) ?? Promise.resolve();
    const result = prev.then(task).catch(onError);
    const tail = result.catch(() => undefined);
    this.tails.set(key, tail);
    this.pending.track(
      tail.finally(() => {
        if (this.tails.get(key) === tail) this.tails.delete(key);
      }),
      () => undefined,
    );
    return result;
  }

  get size(): number {
    return this.pending.size;
  }

  /** Resolves once nothing is queued or running. */
  idle(): Promise<void> {
    return this.pending.idle();
  }
}
