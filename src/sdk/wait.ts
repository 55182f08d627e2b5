// Waiting for a sandbox to settle after an intent: its phase polled, its new events
// handed to the caller as they come (the CLI prints them as progress).

import { SandgateError } from "./errors.js";
import type { Transport } from "./transport.js";
import type { EventView, Phase, SandboxView } from "./types.js";

export interface WaitOptions {
  /** Phases that end the wait successfully ("Deleted": the sandbox is gone). */
  until: readonly (Phase | "Deleted")[];
  timeoutMs: number;
  /** Sequence number of the last event already seen. */
  afterSeq?: number;
  /** Each new event of the sandbox, in order. */
  onEvent?: (e: EventView) => void;
  signal?: AbortSignal;
}

/** Phases a sandbox passes through on its own: waited out. Any other phase not waited for ends the wait (`sandbox_failed`). */
const TRANSIENT = new Set<string>(["Provisioning", "Stopping", "Deleting", "Recovering"]);
/** Between two looks. */
export const WAIT_POLL_MS = 200;

/** Resolves with the settled sandbox, or null once it has been deleted (when "Deleted" is waited for). */
export async function waitForPhase(t: Transport, name: string, opts: WaitOptions): Promise<SandboxView | null> {
  const deadline = Date.now() + opts.timeoutMs;
  let seq = opts.afterSeq ?? 0;
  const enc = encodeURIComponent(name);
  for (;;) {
    let s: SandboxView;
    try {
      s = await t.request<SandboxView>("GET", `/v1/sandboxes/${enc}`);
      const { events } = await t.request<{ events: EventView[] }>("GET", `/v1/sandboxes/${enc}/events?after=${seq}`);
      for (const e of events) {
        seq = e.seq;
        opts.onEvent?.(e);
      }
    } catch (err) {
      if (err instanceof SandgateError && err.code === "not_found" && opts.until.includes("Deleted")) return null;
      throw err;
    }
    if (opts.until.includes(s.phase)) return s;
    if (!TRANSIENT.has(s.phase)) {
      const why = s.reasonText ? `: ${s.reasonText}` : "";
      throw new SandgateError(`sandbox "${s.name}" is ${s.phase}${why}`, "sandbox_failed");
    }
    if (Date.now() > deadline) {
      throw new SandgateError(`timed out after ${Math.round(opts.timeoutMs / 1000)} s waiting for "${name}" (it is ${s.phase})`, "timeout");
    }
    await sleep(WAIT_POLL_MS, opts.signal);
  }
}

/** Resolves after `ms`, or at once when `signal` aborts (then rejects with its reason). */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason as Error);
    const t = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
    function done(): void {
      clearTimeout(t);
      signal?.removeEventListener("abort", done);
      if (signal?.aborted) reject(signal.reason as Error);
      else resolve();
    }
  });
}
