// A sandbox's output, record by record, from GET /v1/sandboxes/:name/logs (NDJSON;
// src/gateway/api/logs-routes.ts), as an async iterator the CLI's `sandbox logs`
// prints and a program reads.
//
// Pulled: a record is read from the connection only when the caller asks for it, so a
// slow reader slows the stream (the gateway then pauses the container's log) and
// nothing queues here beyond one chunk of the socket. A stream the gateway cuts
// without its last record (it restarted, the connection broke) is resumed: asked again
// with since = the time of the last record given and the records of that time already
// given dropped (src/util/log-cursor.ts), for up to RESUME_WINDOW_MS while the gateway
// is away. The generation read first is kept for the resumes, so a restart into a new
// generation never mixes two generations.

import { DEFAULT_BACKOFF, backoffDelay } from "../util/backoff.js";
import { ResumeFilter } from "../util/log-cursor.js";
import { parseSince } from "../util/log-time.js";
import { SettingError } from "../util/settings.js";
import { SandgateError, fromApiBody } from "./errors.js";
import type { Transport } from "./transport.js";
import type { LogRecord } from "./types.js";
import { sleep } from "./wait.js";

/** How long a resume waits for a gateway that went away. */
export const RESUME_WINDOW_MS = 60_000;
/** No byte (not even the gateway's keep-alive line, every 15 s) for this long: the connection is dead; resume. */
export const IDLE_MS = 60_000;
/** Waiting for the answer's headers. */
const HEADERS_MS = 30_000;
/** The longest line of NDJSON held while its end has not come (the gateway splits lines at 16 KiB of text). */
export const RECORD_MAX_BYTES = 1024 * 1024;

export interface LogsOptions {
  /** Keep reading as it writes, until it stops (or `signal` aborts, or the loop breaks). */
  follow?: boolean;
  /** Only the last N lines (0-1000000), then follow. */
  tail?: number;
  /** Only lines at or after this time: an RFC 3339 time, a Date, or a duration back from now ("10m", "2h"). */
  since?: string | Date;
  /** The supervisor's log (JSON lines) instead of the workload's output. */
  stream?: "workload" | "supervisor";
  /** An ended generation's output ("previous", or its number; the current and the previous one are kept). */
  generation?: number | "previous";
  signal?: AbortSignal;
  /** How long a gateway that went away is waited for (default RESUME_WINDOW_MS); without follow, the wait restarts only when a record comes through. */
  resumeWindowMs?: number;
}

/** A stream that stopped without its last record. */
class Cut extends SandgateError {
  override readonly name = "Cut";
  constructor(message: string) {
    super(message, "connection_lost");
  }
}

/** The `since` option as the API takes it. */
function sinceParam(since: string | Date): string {
  const text = since instanceof Date ? since.toISOString() : since;
  try {
    return parseSince("since", text, new Date());
  } catch (err) {
    if (err instanceof SettingError) throw new SandgateError(err.message, "invalid_request");
    throw err;
  }
}

/**
 * The records of a sandbox's log, oldest first. Ends at the log's end (without
 * `follow`: what there is now), when `signal` aborts, or when the loop breaks; an
 * error record or a gateway gone longer than RESUME_WINDOW_MS throws.
 * `transport` is asked for a fresh one per attempt (a restarted gateway may listen elsewhere).
 */
export async function* readLogs(transport: () => Transport, name: string, o: LogsOptions = {}): AsyncGenerator<LogRecord> {
  if (o.tail !== undefined && (!Number.isSafeInteger(o.tail) || o.tail < 0 || o.tail > 1_000_000)) {
    throw new SandgateError(`tail: expected a whole number from 0 to 1000000, got ${String(o.tail)}`, "invalid_request");
  }
  const windowMs = o.resumeWindowMs ?? RESUME_WINDOW_MS;
  if (!Number.isSafeInteger(windowMs) || windowMs <= 0) throw new SandgateError(`resumeWindowMs: expected a whole number of milliseconds above 0, got ${String(o.resumeWindowMs)}`, "invalid_request");
  const since = o.since === undefined ? undefined : sinceParam(o.since);
  const signal = o.signal ?? new AbortController().signal;
  const filter = new ResumeFilter(null);
  let generation = o.generation === undefined ? undefined : String(o.generation);
  let connected = false;
  let awaySince: number | undefined;
  let attempt = 0;
  for (;;) {
    if (signal.aborted) return;
    const q = new URLSearchParams();
    if (o.follow) q.set("follow", "1");
    if (o.stream === "supervisor") q.set("stream", "supervisor");
    if (generation !== undefined) q.set("generation", generation);
    const cursor = filter.cursor;
    if (cursor !== null) q.set("since", cursor.t);
    else {
      if (since !== undefined) q.set("since", since);
      if (o.tail !== undefined) q.set("tail", String(o.tail));
    }
    const before = JSON.stringify(cursor);
    let answered = false;
    let res: Response;
    try {
      res = await open(transport(), `/v1/sandboxes/${encodeURIComponent(name)}/logs?${q.toString()}`, signal);
      // Resumes read the generation the first answer was.
      generation = res.headers.get("x-sandgate-generation") ?? generation;
      connected = true;
      answered = true;
      filter.rewind();
      const ended = yield* records(res, filter, signal);
      if (ended) return;
    } catch (err) {
      if (signal.aborted) return;
      // Only a gateway that answered before may be waited for; a first failure is reported as it is.
      const away = err instanceof Cut || (err instanceof SandgateError && err.code === "not_running");
      if (!connected || !away) throw err instanceof Cut ? new SandgateError(err.message, "not_running") : err;
      // The window restarts after an answer when following (a follow waits as long as it
      // is told to), but without follow only after a record came through: a read of what
      // there is must end, not loop on a gateway that answers and then cuts every time.
      if ((o.follow && answered) || JSON.stringify(filter.cursor) !== before) {
        awaySince = undefined;
        attempt = 0;
      }
      awaySince ??= Date.now();
      if (Date.now() - awaySince > windowMs) {
        throw err instanceof SandgateError && !(err instanceof Cut) ? err : new SandgateError(`the log stream broke and the gateway did not come back within ${windowMs / 1000} s: ${err.message}`, "not_running");
      }
      try {
        await sleep(backoffDelay(attempt++, Math.random(), DEFAULT_BACKOFF), signal);
      } catch {
        return; // aborted
      }
    }
  }
}

/** One request; its answer once the headers are in (an error answer becomes a SandgateError). */
async function open(t: Transport, path: string, signal: AbortSignal): Promise<Response> {
  const attempt = new AbortController();
  const stop = (): void => attempt.abort();
  signal.addEventListener("abort", stop, { once: true });
  const timer = setTimeout(stop, HEADERS_MS);
  let res: Response;
  try {
    res = await t.raw("GET", path, undefined, attempt.signal);
  } catch (err) {
    if (!signal.aborted && attempt.signal.aborted) throw new SandgateError(`the gateway at ${t.url} did not answer in time`, "timeout");
    throw err;
  } finally {
    clearTimeout(timer);
    signal.removeEventListener("abort", stop);
  }
  // The body outlives this call: records() stops it when the caller's signal aborts.
  if (res.ok && res.body) return res;
  const body: unknown = await res.json().catch(() => null);
  throw t.apiError(res.status, body, `the gateway answered HTTP ${res.status}`);
}

/**
 * The records of one answer. Returns true at its last record (the log ended); throws
 * Cut when the stream stops without one, a SandgateError for an error record.
 */
async function* records(res: Response, filter: ResumeFilter, signal: AbortSignal): AsyncGenerator<LogRecord, boolean> {
  const reader = res.body!.getReader();
  const stop = (): void => void reader.cancel().catch(() => undefined);
  signal.addEventListener("abort", stop, { once: true });
  let idle: NodeJS.Timeout | undefined;
  let idled = false;
  // Not while the caller holds a record: a slow reader is not a dead connection.
  const arm = (): void => {
    clearTimeout(idle);
    idle = setTimeout(() => {
      idled = true;
      stop();
    }, IDLE_MS);
  };
  const decoder = new TextDecoder();
  let buf = "";
  try {
    for (;;) {
      arm();
      let chunk: Awaited<ReturnType<typeof reader.read>>;
      try {
        chunk = await reader.read();
      } catch (err) {
        throw new Cut(`the log stream broke: ${(err as Error).message}`);
      }
      clearTimeout(idle);
      if (chunk.done) break;
      buf += decoder.decode(chunk.value as Uint8Array, { stream: true });
      let i: number;
      while ((i = buf.indexOf("\n")) >= 0) {
        const text = buf.slice(0, i);
        buf = buf.slice(i + 1);
        if (text === "") continue; // keep-alive
        let rec: LogRecord | { end: string } | { error: { code: string; message: string } };
        try {
          rec = JSON.parse(text) as typeof rec;
        } catch {
          throw new SandgateError("the gateway sent a log record that is not JSON", "bad_response");
        }
        if ("end" in rec) return true;
        if ("error" in rec) throw fromApiBody(rec, "the log stream failed");
        if (!filter.accept(rec.t)) continue;
        yield rec;
        if (signal.aborted) return true;
      }
      if (buf.length > RECORD_MAX_BYTES) throw new SandgateError(`a log record is over ${RECORD_MAX_BYTES} bytes`, "bad_response");
    }
    if (signal.aborted) return true;
    throw new Cut(idled ? `nothing from the gateway for ${IDLE_MS / 1000} s` : "the gateway ended the log stream without its last record");
  } finally {
    clearTimeout(idle);
    signal.removeEventListener("abort", stop);
    // A caller that stops early (break) leaves nothing open.
    void reader.cancel().catch(() => undefined);
  }
}
