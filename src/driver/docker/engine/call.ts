// Per-call abort bookkeeping: one AbortController fed by our deadline and the caller's
// signal, remembering which of the two fired so the failure can say TIMEOUT or ABORTED
// instead of undici's generic abort error.
import { TransportCode, failureFromError, transport } from "./result.js";
import type { TransportFailure } from "./result.js";

export type AbortCause = "deadline" | "caller";

export class CallGuard {
  readonly controller = new AbortController();
  private causeValue: AbortCause | undefined;
  private timer: NodeJS.Timeout | undefined;
  private deadlineMs = 0;
  private readonly detach: (() => void) | undefined;
  private readonly listeners: (() => void)[] = [];

  constructor(signal?: AbortSignal) {
    if (signal === undefined) return;
    if (signal.aborted) {
      this.abort("caller");
      return;
    }
    const onAbort = (): void => this.abort("caller");
    signal.addEventListener("abort", onAbort, { once: true });
    this.detach = () => signal.removeEventListener("abort", onAbort);
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  get cause(): AbortCause | undefined {
    return this.causeValue;
  }

  /** Starts (or restarts) the overall deadline; 0 means none. */
  arm(ms: number): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.deadlineMs = ms;
    if (ms > 0 && this.causeValue === undefined) this.timer = setTimeout(() => this.abort("deadline"), ms);
  }

  /** Called once when the call is aborted for either cause (used by raw dispatch handlers). */
  onAbort(fn: () => void): void {
    if (this.causeValue !== undefined) fn();
    else this.listeners.push(fn);
  }

  abort(cause: AbortCause): void {
    if (this.causeValue !== undefined) return;
    this.causeValue = cause;
    this.controller.abort(new Error(cause === "deadline" ? "engine call deadline" : "engine call aborted by caller"));
    for (const fn of this.listeners.splice(0)) fn();
  }

  /** The failure to report for an error seen while this call ran. */
  failure(err: unknown): TransportFailure {
    if (this.causeValue === "deadline") {
      return transport(TransportCode.TIMEOUT, `no complete answer from the Docker daemon within ${this.deadlineMs} ms`);
    }
    if (this.causeValue === "caller") return transport(TransportCode.ABORTED, "aborted by caller");
    return failureFromError(err);
  }

  dispose(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.detach?.();
    this.listeners.length = 0;
  }
}
