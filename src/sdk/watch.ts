// Lifecycle events as they are committed, from GET /v1/watch (Server-Sent Events), as
// an async iterator. Pulled: a frame is read only when the caller asks for the next, so
// a slow reader never grows a buffer here; the gateway disconnects a reader too far
// behind (`event: overflow`) and this reconnects after the last event it gave, so no
// event is lost or given twice. Breaking out of the loop closes the connection.

import { EXIT, SandgateError } from "./errors.js";
import { sseFrames } from "./sse.js";
import type { Transport } from "./transport.js";
import type { EventView, SandboxView, WatchEvent } from "./types.js";
import { errorMessage } from "../util/error-message.js";

export interface WatchOptions {
  /** Only this sandbox's events (a name or id). */
  sandbox?: string;
  /** Start after this sequence number: the events since are given first. */
  after?: number;
  /** Ends the iteration (quietly). */
  signal?: AbortSignal;
  /** Called when the gateway cut the stream for falling behind and it is resumed after `after`. */
  onResume?: (after: number) => void;
}

export async function* watchEvents(t: Transport, o: WatchOptions = {}): AsyncGenerator<WatchEvent> {
  if (o.after !== undefined && (!Number.isSafeInteger(o.after) || o.after < 0)) throw new SandgateError(`after: expected a sequence number (a whole number from 0), got ${String(o.after)}`, "invalid_request");
  const ac = new AbortController();
  const stop = (): void => ac.abort();
  if (o.signal?.aborted) return;
  o.signal?.addEventListener("abort", stop, { once: true });
  let lastSeq = o.after;
  try {
    for (;;) {
      const q = new URLSearchParams();
      if (o.sandbox !== undefined) q.set("sandbox", o.sandbox);
      if (lastSeq !== undefined) q.set("after", String(lastSeq));
      let res: Response;
      try {
        res = await t.raw("GET", `/v1/watch${q.size > 0 ? `?${q.toString()}` : ""}`, undefined, ac.signal);
      } catch (err) {
        if (ac.signal.aborted) return;
        throw err;
      }
      if (!res.ok || !res.body) {
        const body: unknown = await res.json().catch(() => null);
        throw t.apiError(res.status, body, `watch failed with HTTP ${res.status}`);
      }
      let resume = false;
      try {
        for await (const f of sseFrames(res.body)) {
          if (f.event === "overflow") {
            const { resumeAfter } = JSON.parse(f.data) as { resumeAfter: number };
            lastSeq = Math.max(lastSeq ?? 0, resumeAfter);
            resume = true;
            o.onResume?.(lastSeq);
            continue;
          }
          if (f.event === "reload") throw new SandgateError(`the watch fell too far behind: ${(JSON.parse(f.data) as { reason: string }).reason}`, "connection_lost", { exitCode: EXIT.failed });
          if (f.event !== "sandbox") continue;
          const { event, sandbox } = JSON.parse(f.data) as { event: EventView; sandbox: SandboxView | null };
          if (lastSeq !== undefined && event.seq <= lastSeq) continue;
          lastSeq = event.seq;
          yield { event, sandbox };
        }
      } catch (err) {
        if (ac.signal.aborted) return;
        if (err instanceof SandgateError) throw err;
        throw new SandgateError(`watch stream ended: ${errorMessage(err)}`, "connection_lost", { exitCode: EXIT.unreachable, cause: err });
      }
      if (ac.signal.aborted) return;
      if (!resume) throw new SandgateError("the gateway closed the watch stream", "connection_lost", { exitCode: EXIT.unreachable });
    }
  } finally {
    o.signal?.removeEventListener("abort", stop);
    // A loop that breaks (or throws) leaves no connection open.
    ac.abort();
  }
}
