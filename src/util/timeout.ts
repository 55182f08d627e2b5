// One way to put a deadline on a promise: it settles with the promise, or rejects
// with a TimeoutError (code ETIMEDOUT) after `ms`. The timer never outlives it.

export class TimeoutError extends Error {
  override readonly name = "TimeoutError";
  readonly code = "ETIMEDOUT";
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
