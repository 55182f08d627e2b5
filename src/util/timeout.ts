// One way to put a deadline on a promise: it settles with the promise, or rejects
// with a TimeoutError (code `timeout`) after `ms`. The timer never outlives it.

import { SandgateError } from "./errors.js";

export class TimeoutError extends SandgateError {
  override readonly name = "TimeoutError";
  constructor(message: string, options?: ErrorOptions) {
    super(message, "timeout", options);
  }
}

export function withTimeout<T>(promise: Promise<T>, ms: number, message = `timed out after ${ms} ms`): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new TimeoutError(message)), ms);
    promise.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (e: unknown) => {
        clearTimeout(timer);
        reject(e instanceof Error ? e : new Error(String(e)));
      },
    );
  });
}
