// A cancellable wait on node's own timers/promises: resolves true after `ms`, or false as soon
// as `signal` aborts (timers/promises rejects with an AbortError there; a caller pacing a loop
// wants to go on and look at why it was woken, not to handle an error).
import { setTimeout as sleep } from "node:timers/promises";

export async function pause(ms: number, signal?: AbortSignal, opts: { ref?: boolean } = {}): Promise<boolean> {
  try {
    await sleep(ms, undefined, signal === undefined ? { ref: opts.ref ?? true } : { signal, ref: opts.ref ?? true });
    return true;
  } catch (err) {
    if (signal?.aborted) return false;
    throw err;
  }
}
