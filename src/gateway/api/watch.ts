// Server-Sent Events for `GET /v1/watch`: one `event: sandbox` per committed
// lifecycle event, optionally for one sandbox, resumable from a sequence number
// (`?after=` or Last-Event-ID). One subscription to the store serves every stream:
// each event is serialized once. Every stream is bounded: a client that stops
// reading is disconnected with a final `event: overflow` naming the sequence to
// resume after, so it can reconnect and miss nothing.

import type { IncomingMessage, ServerResponse } from "node:http";
import type { EventRecord } from "../../store/contract.js";
import type { SandboxReadModel } from "../sandboxes/read-model.js";
import { eventView, sandboxView } from "./views.js";

export interface WatchLimits {
  /** Bytes a client may leave unread before it is disconnected. Default 256 KiB. */
  maxBufferedBytes: number;
  /** Comment lines keeping idle streams alive. Default 15 s. */
  heartbeatMs: number;
  /** Events replayed when resuming; a client further behind is told to reload. Default 10,000. */
  maxReplay: number;
  /** Open watch streams. Default 256. */
  maxStreams: number;
}

export const DEFAULT_WATCH_LIMITS: WatchLimits = { maxBufferedBytes: 256 * 1024, heartbeatMs: 15_000, maxReplay: 10_000, maxStreams: 256 };

interface Stream {
  res: ServerResponse;
  only: string | undefined;
  /** Last sequence written to this stream: an event at or below it is not written again. */
  lastSeq: number;
  /** A resuming stream's live events, held until its replay has been written. */
  pending: EventRecord[] | null;
}

export class WatchHub {
  readonly #limits: WatchLimits;
  readonly #streams = new Set<Stream>();
  readonly #off: () => void;
  readonly #beat: NodeJS.Timeout;
  #overflows = 0;
  /**
   * Publishing and replaying, one at a time in commit order: each awaits the store (a
   * frame carries the sandbox as read then), and a replay must not interleave with live
   * events (a resuming stream holds those queued before its replay in `pending`). An
   * event the replay read and its live publish then meets is not written twice (lastSeq).
   */
  #queue: Promise<void> = Promise.resolve();

  constructor(
    private readonly read: SandboxReadModel,
    limits: Partial<WatchLimits> = {},
  ) {
    this.#limits = { ...DEFAULT_WATCH_LIMITS, ...limits };
    this.#off = read.onEvent((e) => {
      void this.#serially(() => this.#publish(e));
    });
    // One timer for every stream, not one each.
    this.#beat = setInterval(() => {
      for (const s of this.#streams) this.#write(s, ": keep-alive\n\n");
    }, this.#limits.heartbeatMs);
    this.#beat.unref();
  }

  get size(): number {
    return this.#streams.size;
  }

  stats(): { streams: number; overflows: number } {
    return { streams: this.#streams.size, overflows: this.#overflows };
  }

  /** False when the stream limit is reached (the caller answers 503). */
  canAccept(): boolean {
    return this.#streams.size < this.#limits.maxStreams;
  }

  async attach(req: IncomingMessage, res: ServerResponse, opts: { only: string | undefined; after: number | undefined }): Promise<void> {
    if (req.method === "HEAD") {
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-store" }).end();
      return;
    }
    const s: Stream = { res, only: opts.only, lastSeq: opts.after ?? 0, pending: opts.after === undefined ? null : [] };
    this.#streams.add(s);
    const stop = (): void => {
      this.#streams.delete(s);
    };
    res.on("close", stop);
    res.on("error", stop);
    req.on("close", stop);
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-store", connection: "keep-alive" });
    this.#write(s, ": sandgate watch\n\n");
    const after = opts.after;
    if (after !== undefined) await this.#serially(() => this.#replay(s, after));
  }

  /** Runs `step` after every step queued before it; a step that fails (the store closing) ends only itself. */
  #serially(step: () => Promise<void>): Promise<void> {
    this.#queue = this.#queue.then(step).catch(() => undefined);
    return this.#queue;
  }

  close(): void {
    this.#off();
    clearInterval(this.#beat);
    for (const s of this.#streams) s.res.end();
    this.#streams.clear();
  }

  async #replay(s: Stream, after: number): Promise<void> {
    const missed = s.only === undefined ? await this.read.eventsAfter(after, this.#limits.maxReplay + 1) : await this.read.events(s.only, { afterSeq: after, limit: this.#limits.maxReplay + 1 });
    if (missed.length > this.#limits.maxReplay) {
      this.#end(s, "reload", `more than ${this.#limits.maxReplay} events since ${after}: read the event log, then watch again`);
      return;
    }
    for (const e of missed) await this.#deliver(s, e);
    const live = s.pending ?? [];
    s.pending = null;
    for (const e of live) await this.#deliver(s, e);
  }

  async #publish(e: EventRecord): Promise<void> {
    let frame: string | undefined;
    for (const s of this.#streams) {
      if ((s.only !== undefined && s.only !== e.sandboxId) || e.seq <= s.lastSeq) continue;
      if (s.pending !== null) {
        s.pending.push(e);
        continue;
      }
      frame ??= await this.#frame(e);
      await this.#deliver(s, e, frame);
    }
  }

  async #frame(e: EventRecord): Promise<string> {
    const sandbox = await this.read.find(e.sandboxId);
    return `event: sandbox\nid: ${e.seq}\ndata: ${JSON.stringify({ event: eventView(e), sandbox: sandbox ? sandboxView(sandbox) : null })}\n\n`;
  }

  async #deliver(s: Stream, e: EventRecord, frame?: string): Promise<void> {
    if (e.seq <= s.lastSeq) return;
    const text = frame ?? (await this.#frame(e));
    if (this.#write(s, text)) s.lastSeq = e.seq;
  }

  /** Writes unless the client is too far behind, in which case it is disconnected. */
  #write(s: Stream, text: string): boolean {
    if (!this.#streams.has(s) || s.res.writableEnded) return false;
    if (s.res.writableLength + text.length > this.#limits.maxBufferedBytes) {
      this.#overflows++;
      this.#end(s, "overflow", `the client left more than ${this.#limits.maxBufferedBytes} bytes unread`);
      return false;
    }
    s.res.write(text);
    return true;
  }

  /** A final message saying why, then the stream ends (and is cut if the client never reads it). */
  #end(s: Stream, kind: "overflow" | "reload", reason: string): void {
    this.#streams.delete(s);
    s.res.end(`event: ${kind}\ndata: ${JSON.stringify({ reason, resumeAfter: s.lastSeq })}\n\n`);
    setTimeout(() => s.res.destroy(), 5_000).unref();
  }
}
