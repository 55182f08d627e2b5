// Waiting for a sandbox to settle after an intent: its phase and new events read, the new
// events handed to the caller as they come (the CLI prints them as progress). What wakes the
// next read is the sandbox's own watch stream (GET /v1/watch), so the wait ends as soon as
// the phase is committed rather than up to a poll period later; the stream is only a
// doorbell, the read is what counts. Where no watch stream can be had (a gateway at its
// stream limit, or one that cut it), the wait polls every WAIT_POLL_MS instead.

import { SandgateError } from "./errors.js";
import type { Transport } from "./transport.js";
import type { EventView, Phase, SandboxView } from "./types.js";
import { watchEvents } from "./watch.js";
import { pause } from "../util/pause.js";

export interface WaitOptions {
  /** Phases that end the wait successfully ("Deleted": the sandbox is gone). */
  until: readonly (Phase | "Deleted")[];
  timeoutMs: number;
  /** Sequence number of the last event already seen. */
  afterSeq?: number;
  /** Each new event of the sandbox, in order. */
  onEvent?: (e: EventView) => void;
  signal?: AbortSignal;
  /** Between two reads while the watch stream is up and quiet (a backstop). Default WATCH_BACKSTOP_MS. */
  backstopMs?: number;
}

/** Phases a sandbox passes through on its own: waited out. Any other phase not waited for ends the wait (`sandbox_failed`). */
const TRANSIENT = new Set<string>(["Provisioning", "Stopping", "Deleting", "Recovering"]);
/** Between two reads when there is no watch stream. */
export const WAIT_POLL_MS = 200;
/** Between two reads while the watch stream is up and nothing happened. */
export const WATCH_BACKSTOP_MS = 2000;

/**
 * Rings when the sandbox's watch stream gives an event after `after`. Never throws: a
 * stream that cannot be opened or is lost turns it into a plain poll timer.
 */
class Doorbell {
  readonly #ac = new AbortController();
  #rung = false;
  #wake: (() => void) | undefined;
  #watching = true;

  constructor(t: Transport, sandbox: string, after: number) {
    void (async () => {
      try {
        const events = watchEvents(t, { sandbox, after, signal: this.#ac.signal });
        for (let e = await events.next(); e.done !== true; e = await events.next()) this.#ring();
      } catch {
        /* no stream: poll */
      }
      this.#watching = false;
      this.#ring();
    })();
  }

  #ring(): void {
    this.#rung = true;
    this.#wake?.();
  }

  /** Until it rings (or rang since the last wait), `backstopMs` pass (WAIT_POLL_MS without a stream), or `signal` aborts. */
  async wait(backstopMs: number, signal?: AbortSignal): Promise<void> {
    if (!this.#rung) {
      await new Promise<void>((resolve, reject) => {
        if (signal?.aborted) return reject(signal.reason as Error);
        // No timer or listener outlives the wait (a CLI exits as soon as it is done).
        const end = (): void => {
          clearTimeout(timer);
          signal?.removeEventListener("abort", abort);
          this.#wake = undefined;
        };
        const abort = (): void => {
          end();
          reject(signal!.reason as Error);
        };
        const timer = setTimeout(() => (end(), resolve()), this.#watching ? backstopMs : WAIT_POLL_MS);
        signal?.addEventListener("abort", abort, { once: true });
        this.#wake = () => (end(), resolve());
      });
    }
    this.#rung = false;
  }

  close(): void {
    this.#ac.abort();
  }
}

/** Resolves with the settled sandbox, or null once it has been deleted (when "Deleted" is waited for). */
export async function waitForPhase(t: Transport, name: string, opts: WaitOptions): Promise<SandboxView | null> {
  const deadline = Date.now() + opts.timeoutMs;
  let seq = opts.afterSeq ?? 0;
  const enc = encodeURIComponent(name);
  let bell: Doorbell | undefined;
  try {
    for (;;) {
      const settled = await look();
      if (settled !== undefined) return settled;
      // Opened after the first read, from the last event it gave: what happens in between is replayed.
      bell ??= new Doorbell(t, name, seq);
      await bell.wait(Math.min(opts.backstopMs ?? WATCH_BACKSTOP_MS, Math.max(0, deadline - Date.now())), opts.signal);
    }
  } finally {
    bell?.close();
  }

  /** One read: the settled sandbox (null: deleted), or undefined while it is still on its way. */
  async function look(): Promise<SandboxView | null | undefined> {
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
    opts.signal?.throwIfAborted();
    return undefined;
  }
}

/** Resolves after `ms`, or at once when `signal` aborts (then rejects with its reason). */
export async function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (!(await pause(ms, signal))) throw signal?.reason as Error;
}
