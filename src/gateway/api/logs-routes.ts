// `GET /v1/sandboxes/:name/logs`: a sandbox container's output as NDJSON, one record per
// line, stdout and stderr kept apart:
//   {"t":"2026-12-03T13:16:36.123456789Z","s":"out","l":"text"}    ("p":true: no newline ended it)
// and a last record saying why it ended, {"end":"..."} or {"error":{"code","message"}}.
// A stream that stops without one was cut (the gateway restarted): ask again with
// since = the last `t`, dropping the lines of that time already seen (docs/logs.md).
//
// Bounded: at most maxStreams open at once (503 beyond); a line's text at most
// maxLineBytes per record (longer ones are split, every part but the last marked p);
// a client that reads slowly pauses the container's log stream (nothing queues up
// in the gateway beyond its socket's buffer). Streams are hijacked from fastify and
// ended by the gateway's close.

import type { ServerResponse } from "node:http";
import type { Logger } from "pino";
import type { ComputeDriver, LogEnd, LogLine, Role } from "../../driver/contract.js";
import { canonicalTime } from "../../util/log-time.js";
import { splitLine } from "../../util/log-line.js";
import { ApiError } from "../errors.js";
import type { SandboxReadModel } from "../sandboxes/read-model.js";
import { route, type RouteGroup, type RouteTarget } from "./register.js";
import { DEFAULT_SETTINGS } from "../settings.js";

export interface LogLimits {
  /** Log streams open at once; one more is refused with 503. Default 64. */
  maxStreams: number;
  /** Bytes of a line's text in one record; a longer line is split. Default 16 KiB. */
  maxLineBytes: number;
  /** A blank line keeps an idle stream alive this often. Default 15 s. */
  heartbeatMs: number;
}

export const DEFAULT_LOG_LIMITS: LogLimits = { maxStreams: DEFAULT_SETTINGS.logStreams, maxLineBytes: 16 * 1024, heartbeatMs: 15_000 };
interface Stream {
  res: ServerResponse;
  ac: AbortController;
}

/** One record per part of the line (split at maxLineBytes). */
export function logRecords(line: LogLine, maxLineBytes: number): string {
  const parts = splitLine(line.l, maxLineBytes);
  const last = parts.length - 1;
  return parts.map((l, i) => JSON.stringify(i < last || line.p ? { t: line.t, s: line.s, l, p: true } : { t: line.t, s: line.s, l }) + "\n").join("");
}

export class LogStreams {
  readonly #limits: LogLimits;
  readonly #streams = new Set<Stream>();
  readonly #beat: NodeJS.Timeout;
  #opened = 0;
  #refused = 0;

  constructor(
    private readonly read: SandboxReadModel,
    private readonly driver: ComputeDriver,
    private readonly log: Logger,
    limits: Partial<LogLimits> = {},
  ) {
    this.#limits = { ...DEFAULT_LOG_LIMITS, ...limits };
    // One timer for every stream; only a stream with nothing waiting to be read gets one.
    this.#beat = setInterval(() => {
      for (const s of this.#streams) if (s.res.headersSent && !s.res.writableEnded && s.res.writableLength === 0) s.res.write("\n");
    }, this.#limits.heartbeatMs);
    this.#beat.unref();
  }

  stats(): { streams: number; opened: number; refused: number; limits: LogLimits } {
    return { streams: this.#streams.size, opened: this.#opened, refused: this.#refused, limits: this.#limits };
  }

  /** The route; close() (api.ts calls it before the API closes) ends its streams. */
  register(app: RouteTarget): void {
    route(app, "getLogs", async (req, reply, input) => {
      const q = input.query();
      const since = q.since === undefined ? undefined : canonicalTime(q.since);
      if (since === null) throw new ApiError("invalid_request", `since: ${JSON.stringify(q.since)} is not an RFC 3339 time (e.g. 2026-12-01T10:00:00Z or 2026-12-01T10:00:00.123456789+01:00)`);
      const s = await this.read.driven((req.params as { name: string }).name);
      if (!this.driver.logs) throw new ApiError("unavailable", `the ${this.driver.kind} runtime keeps no logs`);
      const generation = q.generation === undefined ? s.generation : q.generation === "previous" ? s.generation - 1 : Number(q.generation);
      if (q.generation === "previous" && generation < 1) throw new ApiError("not_found", `sandbox "${s.name}" has no previous generation (it is at generation ${s.generation})`);
      if (generation < 1 || generation > s.generation) throw new ApiError("not_found", `sandbox "${s.name}" has no generation ${generation}; it has generations 1 to ${s.generation} (logs are kept of the current and the previous one)`);
      const record = s.runtime !== null && s.runtime.generation === generation ? s.runtime : null;
      if (record === null && generation === s.generation && s.phase === "Provisioning") {
        throw new ApiError("not_allowed", `sandbox "${s.name}" is Provisioning: its containers have not started yet; ask again once it is Ready`);
      }
      if (this.#streams.size >= this.#limits.maxStreams) {
        this.#refused++;
        throw new ApiError("unavailable", `too many log streams open (${this.#streams.size}); close one or raise the limit (gateway start --log-streams)`);
      }
      const role: Role = q.stream ?? "workload";
      const head = { "content-type": "application/x-ndjson; charset=utf-8", "cache-control": "no-store", "x-sandgate-generation": String(generation), "x-sandgate-stream": role };
      if (req.method === "HEAD") return reply.code(200).headers(head).send();
      reply.hijack();
      void this.#run(reply.raw, head, {
        sandboxId: s.id,
        name: s.name,
        generation,
        role,
        record,
        follow: q.follow === "1" || q.follow === "true",
        ...(q.tail === undefined ? {} : { tail: q.tail }),
        ...(since === undefined ? {} : { since }),
      });
      return reply;
    });
  }

  async #run(
    res: ServerResponse,
    head: Record<string, string>,
    r: { sandboxId: string; name: string; generation: number; role: Role; record: Parameters<NonNullable<ComputeDriver["logs"]>>[0]["record"]; follow: boolean; tail?: number; since?: string },
  ): Promise<void> {
    const ac = new AbortController();
    const st: Stream = { res, ac };
    this.#streams.add(st);
    this.#opened++;
    res.on("close", () => {
      ac.abort();
      this.#streams.delete(st);
    });
    res.writeHead(200, head);
    res.flushHeaders();
    const max = this.#limits.maxLineBytes;
    // Backpressure: the driver waits for this promise before it reads more from Docker.
    const deliver = (line: LogLine): Promise<void> | undefined => {
      if (ac.signal.aborted || res.writableEnded) return undefined;
      if (res.write(logRecords(line, max))) return undefined;
      return new Promise<void>((resolve) => {
        const done = (): void => {
          res.off("drain", done);
          res.off("close", done);
          resolve();
        };
        res.on("drain", done);
        res.on("close", done);
      });
    };
    let end: LogEnd;
    try {
      end = await this.driver.logs!({ sandboxId: r.sandboxId, generation: r.generation, role: r.role, record: r.record, follow: r.follow, tail: r.tail, since: r.since, signal: ac.signal }, deliver);
    } catch (err) {
      this.log.error({ err, sandboxId: r.sandboxId, generation: r.generation, role: r.role }, "log stream failed");
      end = { kind: "error", code: "unavailable", message: "the log stream failed; see the gateway log" };
    }
    this.#streams.delete(st);
    if (end.kind === "aborted" || res.destroyed) return;
    res.end(JSON.stringify(end.kind === "end" ? { end: end.reason } : { error: { code: end.code, message: end.message } }) + "\n");
  }

  /** The gateway closes: every stream is cut (no end record), so clients resume from their cursor. */
  close(): void {
    clearInterval(this.#beat);
    for (const s of this.#streams) {
      s.ac.abort();
      s.res.destroy();
    }
    this.#streams.clear();
  }
}

/** The logs route as a route group (register.ts). */
export const logRoutes: RouteGroup<{ logs: LogStreams }> = async (scope, { logs }) => logs.register(scope);
