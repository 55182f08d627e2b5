// A sandbox container's output through the Engine API (GET /containers/{id}/logs, always
// with timestamps: they are the resume cursor), and what is kept of it once the
// container is removed (log-archive.ts).
//
// A read of the live container that breaks (the daemon restarts, the socket is cut, a
// frame is garbled) resumes: the container is inspected again and the log is asked for
// again from the time of the last line delivered, the lines of that time already
// delivered dropped (src/util/log-cursor.ts). Inspect decides how: still running →
// follow again; stopped → read the rest and end; gone (404) → the rest from the kept
// copy; no answer → retry with backoff for up to reconnectWindowMs, then an error.
// Nothing here acts on a container: only its log is read, and only of the recorded id
// carrying this sandbox's labels, generation, role and nonce.

import type { Logger } from "pino";
import type { LogEnd, LogLine, LogRequest, Role } from "../contract.js";
import { DEFAULT_BACKOFF, backoffDelay, type BackoffPolicy } from "../../util/backoff.js";
import { ResumeFilter } from "../../util/log-cursor.js";
import { canonicalTime, dockerSince } from "../../util/log-time.js";
import type { EngineClient } from "./engine/client.js";
import { describe } from "./engine/result.js";
import type { StreamEnd } from "./engine/transport.js";
import type { ContainerInspect } from "./engine/types.js";
import { FrameReader, logLineOf } from "./log-frames.js";
import type { LogArchive } from "./log-archive.js";
import { LABEL } from "./objects.js";
import { pause } from "../../util/pause.js";

export interface ContainerLogsOptions {
  engine: EngineClient;
  archive: LogArchive;
  gatewayId: string;
  log: Logger;
  /** How long a read keeps retrying while Docker gives no usable answer. Default 120 s. */
  reconnectWindowMs?: number;
  backoff?: BackoffPolicy;
  random?: () => number;
  /** Deadline of copying one container's log before it is removed. Default 120 s. */
  keepTimeoutMs?: number;
}

export const DEFAULT_RECONNECT_WINDOW_MS = 120_000;
/** A stream open this long counts as working: its break starts a new reconnect window. */
const HELD_MS = 10_000;

const nowCanonical = (): string => canonicalTime(new Date().toISOString())!;

export class ContainerLogs {
  readonly #o: ContainerLogsOptions;
  readonly #windowMs: number;
  /** Reads that resumed after a broken stream (GET /v1/status). */
  resumed = 0;

  constructor(o: ContainerLogsOptions) {
    this.#o = o;
    this.#windowMs = o.reconnectWindowMs ?? DEFAULT_RECONNECT_WINDOW_MS;
  }

  /** Why the inspected container is not the one recorded for this request, or null. */
  #notOurs(c: ContainerInspect, req: LogRequest): string | null {
    const want: Record<string, string> = {
      [LABEL.gateway]: this.#o.gatewayId,
      [LABEL.sandbox]: req.sandboxId,
      [LABEL.generation]: String(req.generation),
      [LABEL.role]: req.role,
      [LABEL.nonce]: req.record!.nonce,
    };
    const labels = c.Config.Labels ?? {};
    const wrong = Object.keys(want).filter((k) => labels[k] !== want[k]);
    return c.Id === req.record![req.role].id && wrong.length === 0 ? null : `container ${c.Id.slice(0, 12)} is not this sandbox's ${req.role} (${wrong.join(", ") || "id"})`;
  }

  async read(req: LogRequest, deliver: (line: LogLine) => void | Promise<void>): Promise<LogEnd> {
    let filter = new ResumeFilter(req.since === undefined ? null : { t: req.since, n: 0 });
    if (req.record === null) return this.#kept(req, deliver, filter, req.tail, false);
    const id = req.record[req.role].id;
    const { engine } = this.#o;
    let tail = req.tail;
    // Trouble: since when no line came through and why, for the reconnect window.
    let troubleSince: number | undefined;
    let problem = "";
    let attempt = 0;
    for (;;) {
      if (attempt > 0 && !(await pause(backoffDelay(attempt - 1, (this.#o.random ?? Math.random)(), this.#o.backoff ?? DEFAULT_BACKOFF), req.signal))) return { kind: "aborted" };
      if (req.signal.aborted) return { kind: "aborted" };
      const failed = (why: string): LogEnd | null => {
        troubleSince ??= Date.now();
        problem = why;
        attempt++;
        if (Date.now() - troubleSince <= this.#windowMs) return null;
        return { kind: "error", code: "unavailable", message: `the ${req.role}'s log cannot be read: Docker gave no usable answer for ${Math.round(this.#windowMs / 1000)} s (${problem})` };
      };

      const r = await engine.inspectContainer(id, { signal: req.signal });
      if (req.signal.aborted) return { kind: "aborted" };
      // Removed: the rest of it is what was kept (a stop copies it before removing).
      if (r.kind === "docker" && r.status === 404) return this.#kept(req, deliver, filter, filter.delivered ? undefined : tail, true);
      if (r.kind !== "ok") {
        const end = failed(describe(r));
        if (end) return end;
        continue;
      }
      const wrong = this.#notOurs(r.body, req);
      if (wrong) return { kind: "error", code: "not_found", message: wrong };

      const follow = req.follow && r.body.State.Running;
      const requestedAt = nowCanonical();
      let opened: number | undefined;
      let got = 0;
      filter.rewind();
      const frames = new FrameReader();
      const since = filter.cursor?.t;
      const end: StreamEnd = await engine.containerLogStream(
        id,
        { follow, ...(tail === undefined ? {} : { tail }), ...(since === undefined ? {} : { since: dockerSince(since) }), signal: req.signal, onOpen: () => (opened = Date.now()) },
        async (chunk) => {
          for (const f of frames.push(chunk)) {
            const line = logLineOf(f);
            if (!filter.accept(line.t)) continue;
            got++;
            await deliver(line);
          }
        },
      );
      // A stream that delivered, or held a while, was no trouble: a later break starts a new window.
      if (got > 0 || (opened !== undefined && Date.now() - opened >= HELD_MS)) {
        troubleSince = undefined;
        attempt = 0;
      }
      if (opened !== undefined && tail !== undefined) {
        // The tail was served: a read from here on starts where this one did, not at a new tail.
        if (!filter.delivered) filter = new ResumeFilter({ t: since !== undefined && since > requestedAt ? since : requestedAt, n: 0 });
        tail = undefined;
      }
      if (end.kind === "aborted") return { kind: "aborted" };
      if (end.kind === "eof" && !follow) return { kind: "end", reason: r.body.State.Running ? "end of the log" : "the container has stopped" };
      // A follow ends when the container stops or the daemon goes, and a stream can break:
      // inspect tells which, and the read resumes from its cursor.
      this.resumed++;
      this.#o.log.info({ sandboxId: req.sandboxId, generation: req.generation, role: req.role, end: describe(end) }, "log stream ended; resuming from the last line delivered");
      const stop = failed(end.kind === "eof" ? "the stream ended while the container ran" : describe(end));
      if (stop) return stop;
    }
  }

  /** The kept copy, from where the read stands; `afterLive`: the container was read until it went. */
  async #kept(req: LogRequest, deliver: (line: LogLine) => void | Promise<void>, filter: ResumeFilter, tail: number | undefined, afterLive: boolean): Promise<LogEnd> {
    filter.rewind();
    const r = await this.#o.archive.read(req.sandboxId, req.generation, req.role, filter, tail, deliver, req.signal);
    if (r === "aborted") return { kind: "aborted" };
    if (r === "missing") {
      if (afterLive && filter.delivered) return { kind: "end", reason: "the container was removed" };
      return { kind: "error", code: "not_found", message: `no logs of generation ${req.generation}'s ${req.role}: its container is gone and nothing was kept of it` };
    }
    return { kind: "end", reason: "the generation has ended (its kept log)" };
  }

  /**
   * Copy a container's log into the archive before it is removed. A daemon that does
   * not answer throws (the stop retries); one that answers it has no log (a driver
   * without reads) is noted and skipped.
   */
  async keep(c: { Id: string }, sandboxId: string, generation: number, role: Role): Promise<void> {
    const w = this.#o.archive.writer(sandboxId, generation, role);
    const frames = new FrameReader();
    let end: StreamEnd;
    try {
      end = await this.#o.engine.containerLogStream(c.Id, { follow: false, signal: AbortSignal.timeout(this.#o.keepTimeoutMs ?? 120_000) }, async (chunk) => {
        for (const f of frames.push(chunk)) await w.write(logLineOf(f));
      });
    } catch (err) {
      await w.discard();
      throw err;
    }
    if (end.kind === "eof" || (end.kind === "transport" && end.code === "HANDLER_ERROR")) {
      if (end.kind === "transport") this.#o.log.warn({ sandboxId, generation, role, err: end.message }, "a container's log ended in bytes that are not log frames; kept what came before");
      await w.commit();
      this.#o.archive.prune(sandboxId, generation - 1);
      return;
    }
    await w.discard();
    if (end.kind === "docker" && end.status !== 404) {
      this.#o.log.warn({ sandboxId, generation, role, err: describe(end) }, "Docker has no log of this container to keep");
      return;
    }
    if (end.kind === "docker") return; // already removed: nothing to keep
    throw new Error(`keeping the ${role}'s log of ${c.Id.slice(0, 12)}: ${describe(end)}`);
  }
}
