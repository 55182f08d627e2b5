// `sandbox events NAME --follow`: one sandbox's new events as they are committed,
// over the gateway's watch stream (GET /v1/watch?sandbox=ID&after=SEQ). The stream
// is resumed from the last sequence printed, so across a dropped connection, a
// client that fell behind, or a gateway restart no event is printed twice or lost.
// It ends with the sandbox's `deleted` event, or on Ctrl-C.

import { sseFrames } from "../sdk/sse.js";
import type { GatewayClient } from "./client.js";
import { CliError, EXIT, exitCodeForApi } from "./errors.js";
import type { EventView } from "../sdk/types.js";
import { pause } from "../util/pause.js";

export { FRAME_MAX_BYTES, sseFrames, type Frame } from "../sdk/sse.js";

/** Waits between attempts while the gateway does not answer: from the first, doubling to the last. */
const RETRY_MS = { first: 200, max: 5_000 };
/** What a failed connection attempt is (client.raw: no listener, cut, no answer in time): worth another. */
const RETRY_ON = new Set<number>([EXIT.unreachable, EXIT.failed, EXIT.timeout]);

export interface FollowOptions {
  /** A client per connection: a restarted gateway may listen elsewhere (its gateway.json is read again). */
  client: () => GatewayClient;
  /** The sandbox's id: a new sandbox of the same name is never followed by mistake. */
  id: string;
  /** The last sequence already printed. */
  after: number;
  /** Prints one event; a promise when the reader of stdout asks us to wait. */
  print: (e: EventView) => void | Promise<void>;
  /** Notes for people (reconnecting), on stderr. */
  note: (line: string) => void;
  signal: AbortSignal;
}

export type FollowEnd = "deleted" | "gone" | "interrupted";

export async function followEvents(o: FollowOptions): Promise<FollowEnd> {
  let last = o.after;
  let retryMs = RETRY_MS.first;
  let down = false;
  const show = async (e: EventView): Promise<boolean> => {
    if (e.seq <= last) return false;
    last = e.seq;
    await o.print(e);
    return e.kind === "deleted";
  };
  while (!o.signal.aborted) {
    let res: Response;
    try {
      res = await o.client().raw("GET", `/v1/watch?sandbox=${encodeURIComponent(o.id)}&after=${last}`, undefined, o.signal);
    } catch (err) {
      if (o.signal.aborted) break;
      // Nothing listening, or a connection cut before the answer (a gateway stopping as we
      // connect): try again. A missing token or a bad --url is not going to change.
      if (!(err instanceof CliError) || !RETRY_ON.has(err.exitCode)) throw err;
      if (!down) o.note(`(the gateway is not answering: ${err.message}; retrying, Ctrl-C stops)`);
      down = true;
      await pause(retryMs, o.signal);
      retryMs = Math.min(retryMs * 2, RETRY_MS.max);
      continue;
    }
    if (!res.ok || !res.body) {
      const body = (await res.json().catch(() => null)) as { error?: { message?: string; code?: string } } | null;
      // The id is unknown: the sandbox was deleted and its events are gone from the log.
      if (res.status === 404) return "gone";
      // Unavailable for now (a gateway shutting down or starting, its streams or connections
      // full): as for one not answering, try again.
      if (res.status === 503) {
        if (!down) o.note(`(the gateway cannot take the stream now: ${body?.error?.message ?? "HTTP 503"}; retrying, Ctrl-C stops)`);
        down = true;
        await pause(retryMs, o.signal);
        retryMs = Math.min(retryMs * 2, RETRY_MS.max);
        continue;
      }
      throw new CliError(body?.error?.message ?? `watch failed with HTTP ${res.status}`, exitCodeForApi(body?.error?.code ?? "internal"));
    }
    if (down) o.note(`(the gateway answers again; resuming after event ${last})`);
    down = false;
    retryMs = RETRY_MS.first;
    try {
      for await (const f of sseFrames(res.body)) {
        if (f.event === "overflow") break; // we fell behind: resume from `last`
        if (f.event === "reload") {
          const end = await catchUp(o, last, show);
          if (end) return end;
          break;
        }
        if (f.event !== "sandbox") continue;
        const { event } = JSON.parse(f.data) as { event: EventView };
        if (await show(event)) return "deleted";
      }
    } catch (err) {
      if (o.signal.aborted) break;
      // A connection the gateway dropped (it stopped, restarted): resume. Anything else is ours to report.
      if (err instanceof CliError) throw err;
    }
    // The stream ended (a gateway stopping ends it cleanly): a short pause, then resume.
    if (!o.signal.aborted) await pause(RETRY_MS.first, o.signal);
  }
  return "interrupted";
}

/**
 * More events than the gateway replays since `after`: read them from the event log
 * page by page, then watch again (null). The log of a deleted sandbox cannot be read
 * this way: then it is "gone".
 */
async function catchUp(o: FollowOptions, after: number, show: (e: EventView) => Promise<boolean>): Promise<FollowEnd | null> {
  for (let cursor: number | null = after; cursor !== null && !o.signal.aborted; ) {
    let page: { events: EventView[]; next: number | null };
    try {
      page = await o.client().request("GET", `/v1/sandboxes/${encodeURIComponent(o.id)}/events?after=${cursor}&limit=1000`);
    } catch (err) {
      if (err instanceof CliError && err.exitCode === EXIT.notFound) return "gone";
      throw err;
    }
    for (const e of page.events) if (await show(e)) return "deleted";
    cursor = page.next;
  }
  return null;
}
