// The Engine API transport over the Unix socket, on undici (not dockerode, which
// hangs forever when the socket is cut mid-response). Knows HTTP, deadlines,
// version negotiation and the three shapes of answer (one JSON body, a JSON-lines
// stream, a hijacked raw socket); knows nothing of containers or images.
//
// Contract: every method resolves with a typed result; nothing throws and nothing hangs.
// - Short calls have an overall deadline of our own (dockerd accepts connections while it
//   restores and then answers nothing) plus undici's headers/body timeouts as a backstop.
// - Streams have bodyTimeout 0 and no deadline, but a headers timeout: dockerd flushes
//   their headers at once, so missing headers mean a hung daemon.
// - A socket cut at any point surfaces as a TransportFailure carrying undici's code.
// Reading answers is body.ts (whole) and stream-body.ts (streamed); the hijacked exec
// socket's raw dispatch is hijack.ts.
import { Agent } from "undici";
import type { Dispatcher } from "undici";
import type { IncomingHttpHeaders } from "node:http";
import type { Duplex, Readable } from "node:stream";
import { CallGuard } from "./call.js";
import { errorFromBody, parseJson, readAll } from "./body.js";
import { dispatchUpgrade } from "./hijack.js";
import { readByteChunks, readJsonLines, type StreamEnd } from "./stream-body.js";
import { TransportCode, ok, transport } from "./result.js";
import type { DockerError, EngineResult, TransportFailure } from "./result.js";
import { negotiateApiVersion } from "./version.js";
import { engineRoute } from "./route.js";
import type { RuntimeCall } from "../../contract.js";
import { errorMessage } from "../../../util/error-message.js";

export type { StreamEnd };

export const DEFAULT_TIMEOUT_MS = 10_000;

/** Host part of request URLs; dockerd ignores it on a Unix socket. */
const ORIGIN = "http://docker";

export type QueryValue = string | number | boolean | string[] | undefined;
export type Query = Record<string, QueryValue>;

export interface CallOptions {
  /** Overall deadline for this call (default: the transport's timeoutMs). */
  timeoutMs?: number;
  signal?: AbortSignal;
}

export interface RequestOptions extends CallOptions {
  query?: Query;
  /** Sent as JSON. */
  body?: unknown;
}

export interface StreamOptions {
  query?: Query;
  signal?: AbortSignal;
  /** Called once when the response headers arrive (the stream is live). */
  onOpen?: () => void;
}

export interface PingBody {
  /** The version this client now uses (path prefix /v{apiVersion}). */
  apiVersion: string;
  /** What the daemon announced in its API-Version header, if anything. */
  serverApiVersion: string | undefined;
}

type Opened = { kind: "response"; status: number; headers: IncomingHttpHeaders; body: Dispatcher.ResponseData["body"] };

interface OpenOptions {
  versioned: boolean;
  query?: Query;
  body?: string | Readable;
  contentType?: string;
  headersTimeoutMs: number;
  bodyTimeoutMs: number;
  guard: CallGuard;
}

export class EngineTransport {
  readonly socketPath: string;
  readonly timeoutMs: number;
  private readonly dispatcher: Agent;
  private version: string | undefined;
  private negotiation: Promise<EngineResult<PingBody>> | undefined;
  private closed = false;
  /** Told of every call (metrics); null: nobody is. */
  private observer: ((call: RuntimeCall) => void) | null = null;

  constructor(opts: { socketPath: string; timeoutMs?: number }) {
    this.socketPath = opts.socketPath;
    this.timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.dispatcher = new Agent({
      connect: { socketPath: opts.socketPath, timeout: this.timeoutMs },
      headersTimeout: this.timeoutMs,
      bodyTimeout: this.timeoutMs,
    });
  }

  /** The negotiated API version, once known. */
  get apiVersion(): string | undefined {
    return this.version;
  }

  /** Destroys the dispatcher and its sockets; in-flight calls end as transport failures. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.dispatcher.destroy();
  }

  /** Report every call from now on: its route template, latency and outcome. */
  observe(observer: ((call: RuntimeCall) => void) | null): void {
    this.observer = observer;
  }

  /** Tell the observer; its failure is never the call's. */
  private report(method: string, path: string, seconds: number | null, r: { kind: string; status?: number; code?: string }): void {
    const observer = this.observer;
    if (observer === null) return;
    try {
      observer({ endpoint: engineRoute(method, path), seconds, error: errorKind(r) });
    } catch {
      // metrics must never break a Docker call
    }
  }

  /** Runs one whole call and reports it with its latency. */
  private async timed<R extends { kind: string }>(method: string, path: string, call: () => Promise<R>): Promise<R> {
    if (this.observer === null) return call();
    const t0 = performance.now();
    const r = await call();
    this.report(method, path, (performance.now() - t0) / 1000, r);
    return r;
  }

  /** GET /_ping; (re)negotiates the API version from its API-Version header. */
  ping(opts: CallOptions = {}): Promise<EngineResult<PingBody>> {
    return this.timed("GET", "/_ping", () => this.pingOnce(opts));
  }

  private async pingOnce(opts: CallOptions): Promise<EngineResult<PingBody>> {
    const guard = new CallGuard(opts.signal);
    guard.arm(opts.timeoutMs ?? this.timeoutMs);
    try {
      const r = await this.open("GET", "/_ping", this.shortOpen(guard, opts, false));
      if (r.kind !== "response") return r;
      const buf = await readAll(r.body, guard);
      if (!Buffer.isBuffer(buf)) return buf;
      if (r.status >= 400) return errorFromBody(r.status, buf);
      const announced = headerValue(r.headers["api-version"]);
      this.version = negotiateApiVersion(announced);
      return ok(r.status, { apiVersion: this.version, serverApiVersion: announced });
    } finally {
      guard.dispose();
    }
  }

  /** Negotiates once; concurrent first calls share one ping. */
  private async ensureVersion(opts: CallOptions): Promise<TransportFailure | DockerError | undefined> {
    if (this.version !== undefined) return undefined;
    this.negotiation ??= this.ping({ timeoutMs: opts.timeoutMs ?? this.timeoutMs }).finally(() => {
      this.negotiation = undefined;
    });
    const r = await this.negotiation;
    if (r.kind !== "ok") return r;
    if (opts.signal?.aborted) return transport(TransportCode.ABORTED, "aborted by caller");
    return undefined;
  }

  /**
   * One short call to `path` (without the version prefix). JSON answers are parsed;
   * an empty answer (204, 304, ...) gives body undefined; 4xx/5xx give a DockerError.
   */
  request<T = unknown>(method: string, path: string, opts: RequestOptions = {}): Promise<EngineResult<T>> {
    return this.short(method, path, opts, (status, buf) => {
      if (buf.length === 0) return ok(status, undefined as T);
      const parsed = parseJson(buf);
      if (parsed.kind !== "ok") return parsed;
      return ok(status, parsed.body as T);
    });
  }

  /** One short call whose answer is returned as bytes (e.g. container logs); 4xx/5xx give a DockerError. */
  requestBytes(method: string, path: string, opts: RequestOptions = {}): Promise<EngineResult<Buffer>> {
    return this.short(method, path, opts, (status, buf) => ok(status, buf));
  }

  private short<R>(method: string, path: string, opts: RequestOptions, answer: (status: number, buf: Buffer) => EngineResult<R>): Promise<EngineResult<R>> {
    return this.timed(method, path, () => this.shortOnce(method, path, opts, answer));
  }

  private async shortOnce<R>(method: string, path: string, opts: RequestOptions, answer: (status: number, buf: Buffer) => EngineResult<R>): Promise<EngineResult<R>> {
    const pending = await this.ensureVersion(opts);
    if (pending) return pending;
    const guard = new CallGuard(opts.signal);
    guard.arm(opts.timeoutMs ?? this.timeoutMs);
    try {
      const hasBody = opts.body !== undefined;
      const r = await this.open(method, path, {
        ...this.shortOpen(guard, opts, true),
        query: opts.query,
        ...(hasBody ? { body: JSON.stringify(opts.body), contentType: "application/json" } : {}),
      });
      if (r.kind !== "response") return r;
      const buf = await readAll(r.body, guard);
      if (!Buffer.isBuffer(buf)) return buf;
      if (r.status >= 400) return errorFromBody(r.status, buf);
      return answer(r.status, buf);
    } finally {
      guard.dispose();
    }
  }

  /**
   * A call whose body is a stream (e.g. an image tar) and whose answer is read whole,
   * under one deadline for both. The body stream is consumed, or destroyed if the call
   * fails before sending it.
   */
  upload(method: string, path: string, body: Readable, o: { contentType: string; query?: Query; timeoutMs: number; signal?: AbortSignal }): Promise<EngineResult<Buffer>> {
    return this.timed(method, path, () => this.uploadOnce(method, path, body, o));
  }

  private async uploadOnce(method: string, path: string, body: Readable, o: { contentType: string; query?: Query; timeoutMs: number; signal?: AbortSignal }): Promise<EngineResult<Buffer>> {
    const pending = await this.ensureVersion(o);
    if (pending) {
      body.destroy();
      return pending;
    }
    const guard = new CallGuard(o.signal);
    guard.arm(o.timeoutMs);
    try {
      const r = await this.open(method, path, {
        versioned: true,
        guard,
        query: o.query,
        body,
        contentType: o.contentType,
        headersTimeoutMs: o.timeoutMs,
        bodyTimeoutMs: o.timeoutMs,
      });
      if (r.kind !== "response") return r;
      const buf = await readAll(r.body, guard);
      if (!Buffer.isBuffer(buf)) return buf;
      if (r.status >= 400) return errorFromBody(r.status, buf);
      return ok(r.status, buf);
    } finally {
      guard.dispose();
    }
  }

  /**
   * A GET answered with newline-delimited JSON, calling onValue per message. Resolves
   * (never rejects) when the stream ends: eof (clean end: a disconnect all the same),
   * aborted (the caller's signal), a TransportFailure (cut, non-JSON line, onValue
   * threw) or a DockerError (e.g. bad filters).
   * Reported as a call once its headers arrive (its latency: the time to open it), or when
   * it fails before; a failure after that is reported as an error without a latency.
   */
  async jsonLines(path: string, opts: StreamOptions, onValue: (v: unknown) => void): Promise<StreamEnd> {
    const t0 = performance.now();
    let opened = false;
    const end = await this.jsonLinesOnce(path, { ...opts, onOpen: () => {
      opened = true;
      this.report("GET", path, (performance.now() - t0) / 1000, { kind: "ok" });
      opts.onOpen?.();
    } }, onValue);
    if (!opened) this.report("GET", path, (performance.now() - t0) / 1000, end);
    else if (end.kind !== "eof" && end.kind !== "aborted") this.report("GET", path, null, end);
    return end;
  }

  private jsonLinesOnce(path: string, opts: StreamOptions, onValue: (v: unknown) => void): Promise<StreamEnd> {
    return this.openStream(path, opts, (body, ended) => readJsonLines(body, ended, onValue));
  }

  /**
   * A GET answered with a byte stream (container logs), each chunk handed to onChunk as
   * it arrives. Reading waits for the promise onChunk returns, so a slow consumer
   * pauses the daemon's stream instead of buffering it. Ends like jsonLines; a throw
   * from onChunk (or its rejection) ends it as HANDLER_ERROR.
   */
  byteStream(path: string, opts: StreamOptions, onChunk: (chunk: Buffer) => void | Promise<void>): Promise<StreamEnd> {
    return this.openStream(path, opts, (body, ended, guard) => readByteChunks(body, ended, guard, onChunk));
  }

  /**
   * What both streams share: the version, the guard, the open, an error status read as
   * the Engine's error, and onOpen (a throw from it ends the stream as HANDLER_ERROR)
   * before the body goes to `consume`. Never rejects.
   */
  private async openStream(
    path: string,
    opts: StreamOptions,
    consume: (body: AsyncIterable<Buffer>, ended: (err: unknown) => StreamEnd, guard: CallGuard) => Promise<StreamEnd>,
  ): Promise<StreamEnd> {
    const pending = await this.ensureVersion(opts);
    if (pending) return pending.kind === "transport" && pending.code === TransportCode.ABORTED ? { kind: "aborted" } : pending;
    const guard = new CallGuard(opts.signal);
    const ended = (f: TransportFailure): StreamEnd => (guard.cause === "caller" ? { kind: "aborted" } : f);
    try {
      const r = await this.open("GET", path, { versioned: true, guard, query: opts.query, headersTimeoutMs: this.timeoutMs, bodyTimeoutMs: 0 });
      if (r.kind !== "response") return ended(r);
      if (r.status >= 400) {
        const e = await this.readError(r, guard);
        return e.kind === "transport" ? ended(e) : e;
      }
      try {
        opts.onOpen?.();
      } catch (err) {
        r.body.destroy();
        return transport(TransportCode.HANDLER_ERROR, `onOpen threw: ${errorMessage(err)}`);
      }
      return await consume(r.body as AsyncIterable<Buffer>, (err) => ended(guard.failure(err)), guard);
    } finally {
      guard.dispose();
    }
  }

  /**
   * A POST hijacked through an HTTP upgrade (Docker's exec start). Resolves with the raw
   * socket, which then belongs to the caller; the deadline covers only the upgrade (and
   * so does the latency reported).
   */
  hijack(path: string, body: unknown, opts: CallOptions = {}): Promise<EngineResult<Duplex>> {
    return this.timed("POST", path, () => this.hijackOnce(path, body, opts));
  }

  private async hijackOnce(path: string, body: unknown, opts: CallOptions): Promise<EngineResult<Duplex>> {
    const pending = await this.ensureVersion(opts);
    if (pending) return pending;
    const t = opts.timeoutMs ?? this.timeoutMs;
    const guard = new CallGuard(opts.signal);
    guard.arm(t);
    try {
      return await dispatchUpgrade(
        this.dispatcher,
        {
          origin: ORIGIN,
          path: this.fullPath(path, true, undefined),
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(body),
          upgrade: "tcp", // undici then sends Connection: upgrade, Upgrade: tcp
          headersTimeout: t,
          bodyTimeout: t,
        },
        guard,
      );
    } finally {
      guard.dispose();
    }
  }

  /** Reads a 4xx/5xx body under the short deadline (armed now). */
  private async readError(r: Opened, guard: CallGuard): Promise<DockerError | TransportFailure> {
    guard.arm(this.timeoutMs);
    const buf = await readAll(r.body, guard);
    if (!Buffer.isBuffer(buf)) return buf;
    return errorFromBody(r.status, buf);
  }

  /** Undici timeouts of a short call: the same as its deadline, as a backstop for it. */
  private shortOpen(guard: CallGuard, opts: CallOptions, versioned: boolean): OpenOptions {
    const t = opts.timeoutMs ?? this.timeoutMs;
    return { versioned, guard, headersTimeoutMs: t, bodyTimeoutMs: t };
  }

  private fullPath(path: string, versioned: boolean, query: Query | undefined): string {
    const prefix = versioned ? `/v${this.version ?? negotiateApiVersion(undefined)}` : "";
    const qs = encodeQuery(query);
    return `${prefix}${path}${qs === "" ? "" : `?${qs}`}`;
  }

  private async open(method: string, path: string, o: OpenOptions): Promise<Opened | TransportFailure> {
    if (o.guard.cause !== undefined) return o.guard.failure(undefined);
    try {
      const res = await this.dispatcher.request({
        origin: ORIGIN,
        path: this.fullPath(path, o.versioned, o.query),
        method,
        headers: o.contentType !== undefined ? { "content-type": o.contentType } : {},
        body: o.body ?? null,
        headersTimeout: o.headersTimeoutMs,
        bodyTimeout: o.bodyTimeoutMs,
        signal: o.guard.signal,
      });
      return { kind: "response", status: res.statusCode, headers: res.headers, body: res.body };
    } catch (err) {
      return o.guard.failure(err);
    }
  }
}

// ---- helpers -------------------------------------------------------------------------

/** What went wrong, as a metrics label from a fixed set (details stay in logs). */
function errorKind(r: { kind: string; status?: number; code?: string }): RuntimeCall["error"] {
  if (r.kind === "ok" || r.kind === "eof" || r.kind === "aborted") return null;
  if (r.kind === "docker") return (r.status ?? 500) >= 500 ? "http_5xx" : "http_4xx";
  if (r.code === TransportCode.TIMEOUT) return "timeout";
  if (r.code === TransportCode.ABORTED) return "aborted";
  return "transport";
}

function headerValue(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

/** Undefined values are left out; arrays repeat the key (e.g. changes=...&changes=...). */
export function encodeQuery(query: Query | undefined): string {
  if (!query) return "";
  const qs = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) {
    if (v === undefined) continue;
    if (Array.isArray(v)) for (const item of v) qs.append(k, item);
    else qs.append(k, String(v));
  }
  return qs.toString();
}
