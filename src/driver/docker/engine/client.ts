// Docker Engine API client over the Unix socket, built on undici (not dockerode, which
// hangs forever when the socket is cut mid-response).
//
// Contract: every method resolves with a typed result; nothing throws and nothing hangs.
// - Short calls have an overall deadline of our own (dockerd accepts connections while it
//   restores and then answers nothing) plus undici's headers/body timeouts as a backstop.
// - Long-polls (wait, events) have bodyTimeout 0 and no deadline, but a headers timeout:
//   dockerd flushes their headers at once, so missing headers mean a hung daemon.
// - A socket cut at any point surfaces as a TransportFailure carrying undici's code.
import { Agent } from "undici";
import type { Dispatcher } from "undici";
import type { IncomingHttpHeaders } from "node:http";
import type { Duplex, Readable } from "node:stream";
import { CallGuard } from "./call.js";
import { socketPathFromDockerHost } from "./host.js";
import { createJsonLineSplitter } from "./lines.js";
import { TransportCode, dockerError, ok, transport } from "./result.js";
import type { DockerError, EngineResult, TransportFailure } from "./result.js";
import type {
  ContainerCreateConfig,
  ContainerCreateResponse,
  ContainerInspect,
  ContainerSummary,
  DockerEvent,
  ExecCreateConfig,
  ExecCreateResponse,
  ExecInspect,
  Filters,
  ImageDeleteResponse,
  ImageInspect,
  NetworkCreateConfig,
  NetworkCreateResponse,
  NetworkInspect,
  Volume,
  VolumeCreateConfig,
  VolumeList,
  WaitResponse,
} from "./types.js";
import { negotiateApiVersion } from "./version.js";

export * from "./result.js";
export type * from "./types.js";
export { createDemuxer, encodeFrame, StreamType } from "./demux.js";
export type { Demuxer, DemuxerOptions } from "./demux.js";
export { DEFAULT_SOCKET_PATH, socketPathFromDockerHost } from "./host.js";
export { MAX_API_VERSION, compareApiVersions, negotiateApiVersion } from "./version.js";

export const DEFAULT_TIMEOUT_MS = 10_000;
export const DEFAULT_IMPORT_TIMEOUT_MS = 10 * 60_000;

/** Host part of request URLs; dockerd ignores it on a Unix socket. */
const ORIGIN = "http://docker";

export type QueryValue = string | number | boolean | string[] | undefined;
export type Query = Record<string, QueryValue>;

export interface CallOptions {
  /** Overall deadline for this call (default: the client's timeoutMs). */
  timeoutMs?: number;
  signal?: AbortSignal;
}

export interface RequestOptions extends CallOptions {
  query?: Query;
  /** Sent as JSON. */
  body?: unknown;
}

export interface EngineClientOptions {
  socketPath: string;
  /** Deadline of short calls, and headers timeout of long-polls. Default 10 s. */
  timeoutMs?: number;
  /** Deadline of importImage. Default 10 min. */
  importTimeoutMs?: number;
}

export type StreamEnd = { kind: "eof" } | { kind: "aborted" } | TransportFailure | DockerError;

export interface EventsOptions {
  filters?: Filters;
  since?: string;
  until?: string;
  signal?: AbortSignal;
  /** Called once when the response headers arrive (the stream is live). */
  onOpen?: () => void;
}

export type WaitCondition = "not-running" | "next-exit" | "removed";

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

export class EngineClient {
  readonly socketPath: string;
  readonly timeoutMs: number;
  readonly importTimeoutMs: number;
  private readonly dispatcher: Agent;
  private version: string | undefined;
  private negotiation: Promise<EngineResult<PingBody>> | undefined;
  private closed = false;

  static fromEnv(env: NodeJS.ProcessEnv = process.env, opts: Omit<EngineClientOptions, "socketPath"> = {}): EngineClient {
    return new EngineClient({ ...opts, socketPath: socketPathFromDockerHost(env.DOCKER_HOST) });
  }

  constructor(opts: EngineClientOptions) {
    this.socketPath = opts.socketPath;
    this.timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.importTimeoutMs = opts.importTimeoutMs ?? DEFAULT_IMPORT_TIMEOUT_MS;
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

  // ---- version negotiation -------------------------------------------------------

  /** GET /_ping; (re)negotiates the API version from its API-Version header. */
  async ping(opts: CallOptions = {}): Promise<EngineResult<PingBody>> {
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

  // ---- generic calls ---------------------------------------------------------------

  /**
   * One short call to `path` (without the version prefix). JSON answers are parsed;
   * an empty answer (204, 304, ...) gives body undefined; 4xx/5xx give a DockerError.
   */
  async request<T = unknown>(method: string, path: string, opts: RequestOptions = {}): Promise<EngineResult<T>> {
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
      if (buf.length === 0) return ok(r.status, undefined as T);
      const parsed = parseJson(buf);
      if (parsed.kind !== "ok") return parsed;
      return ok(r.status, parsed.body as T);
    } finally {
      guard.dispose();
    }
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

  // ---- long-polls ------------------------------------------------------------------

  /**
   * POST /containers/{id}/wait, held open until the condition is met. The body is returned
   * as parsed (StatusCode -1 or Error != null are not interpreted here). A cut socket is a
   * TransportFailure, a partial/non-JSON body BAD_BODY, an empty 200 EMPTY_BODY.
   */
  async wait(id: string, condition: WaitCondition, opts: { signal?: AbortSignal } = {}): Promise<EngineResult<WaitResponse>> {
    const pending = await this.ensureVersion(opts);
    if (pending) return pending;
    const guard = new CallGuard(opts.signal);
    try {
      const r = await this.open("POST", `/containers/${seg(id)}/wait`, {
        versioned: true,
        guard,
        query: { condition },
        headersTimeoutMs: this.timeoutMs,
        bodyTimeoutMs: 0,
      });
      if (r.kind !== "response") return r;
      if (r.status >= 400) return await this.readError(r, guard);
      const buf = await readAll(r.body, guard);
      if (!Buffer.isBuffer(buf)) return buf;
      if (buf.length === 0) return transport(TransportCode.EMPTY_BODY, `wait answered HTTP ${r.status} with an empty body`);
      const parsed = parseJson(buf);
      if (parsed.kind !== "ok") return parsed;
      if (!isWaitResponse(parsed.body)) {
        return transport(TransportCode.BAD_BODY, `wait answered JSON without a numeric StatusCode: ${snippet(buf)}`);
      }
      return ok(r.status, parsed.body);
    } finally {
      guard.dispose();
    }
  }

  /**
   * GET /events as newline-delimited JSON, calling onEvent per message. Resolves (never
   * rejects) when the stream ends: eof (clean end: a disconnect all the same), aborted
   * (the caller's signal), a TransportFailure (cut, non-JSON line, onEvent threw) or a
   * DockerError (e.g. bad filters).
   */
  async events(opts: EventsOptions, onEvent: (e: DockerEvent) => void): Promise<StreamEnd> {
    const pending = await this.ensureVersion(opts);
    if (pending) return pending.kind === "transport" && pending.code === TransportCode.ABORTED ? { kind: "aborted" } : pending;
    const guard = new CallGuard(opts.signal);
    const ended = (f: TransportFailure): StreamEnd => (guard.cause === "caller" ? { kind: "aborted" } : f);
    try {
      const r = await this.open("GET", "/events", {
        versioned: true,
        guard,
        query: {
          filters: filtersParam(opts.filters),
          since: opts.since,
          until: opts.until,
        },
        headersTimeoutMs: this.timeoutMs,
        bodyTimeoutMs: 0,
      });
      if (r.kind !== "response") return ended(r);
      if (r.status >= 400) {
        const e = await this.readError(r, guard);
        return e.kind === "transport" ? ended(e) : e;
      }
      const splitter = createJsonLineSplitter();
      const deliver = (lines: ReturnType<typeof splitter.push>): TransportFailure | undefined => {
        for (const line of lines) {
          if (!line.ok) return transport(TransportCode.BAD_BODY, `events stream sent a non-JSON line: ${line.line.slice(0, 200)}`);
          try {
            onEvent(line.value as DockerEvent);
          } catch (err) {
            return transport(TransportCode.HANDLER_ERROR, `onEvent threw: ${err instanceof Error ? err.message : String(err)}`);
          }
        }
        return undefined;
      };
      try {
        opts.onOpen?.();
      } catch (err) {
        r.body.destroy();
        return transport(TransportCode.HANDLER_ERROR, `onOpen threw: ${err instanceof Error ? err.message : String(err)}`);
      }
      try {
        // Returning from inside the loop destroys the body (and its socket).
        for await (const chunk of r.body as AsyncIterable<Buffer>) {
          const bad = deliver(splitter.push(chunk));
          if (bad) return bad;
        }
        return deliver(splitter.end()) ?? { kind: "eof" };
      } catch (err) {
        return ended(guard.failure(err));
      }
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

  // ---- containers ------------------------------------------------------------------

  createContainer(name: string, config: ContainerCreateConfig, opts: CallOptions = {}): Promise<EngineResult<ContainerCreateResponse>> {
    return this.request("POST", "/containers/create", { ...opts, query: { name }, body: config });
  }

  /** 204 when started, 304 when it was already running (both Ok, body undefined). */
  startContainer(id: string, opts: CallOptions = {}): Promise<EngineResult<undefined>> {
    return this.request("POST", `/containers/${seg(id)}/start`, opts);
  }

  /** Docker waits up to timeoutS before SIGKILL, so the deadline is that plus the short timeout. */
  stopContainer(id: string, timeoutS: number, opts: CallOptions = {}): Promise<EngineResult<undefined>> {
    return this.request("POST", `/containers/${seg(id)}/stop`, {
      signal: opts.signal,
      timeoutMs: opts.timeoutMs ?? timeoutS * 1000 + this.timeoutMs,
      query: { t: timeoutS },
    });
  }

  killContainer(id: string, signal?: string, opts: CallOptions = {}): Promise<EngineResult<undefined>> {
    return this.request("POST", `/containers/${seg(id)}/kill`, { ...opts, query: { signal } });
  }

  removeContainer(id: string, rm: { force?: boolean; volumes?: boolean } = {}, opts: CallOptions = {}): Promise<EngineResult<undefined>> {
    return this.request("DELETE", `/containers/${seg(id)}`, { ...opts, query: { force: rm.force, v: rm.volumes } });
  }

  inspectContainer(id: string, opts: CallOptions = {}): Promise<EngineResult<ContainerInspect>> {
    return this.request("GET", `/containers/${seg(id)}/json`, opts);
  }

  listContainers(list: { all?: boolean; filters?: Filters } = {}, opts: CallOptions = {}): Promise<EngineResult<ContainerSummary[]>> {
    return this.request("GET", "/containers/json", { ...opts, query: { all: list.all, filters: filtersParam(list.filters) } });
  }

  // ---- networks and volumes ----------------------------------------------------------

  createNetwork(config: NetworkCreateConfig, opts: CallOptions = {}): Promise<EngineResult<NetworkCreateResponse>> {
    return this.request("POST", "/networks/create", { ...opts, body: config });
  }

  inspectNetwork(idOrName: string, opts: CallOptions = {}): Promise<EngineResult<NetworkInspect>> {
    return this.request("GET", `/networks/${seg(idOrName)}`, opts);
  }

  removeNetwork(idOrName: string, opts: CallOptions = {}): Promise<EngineResult<undefined>> {
    return this.request("DELETE", `/networks/${seg(idOrName)}`, opts);
  }

  listNetworks(list: { filters?: Filters } = {}, opts: CallOptions = {}): Promise<EngineResult<NetworkInspect[]>> {
    return this.request("GET", "/networks", { ...opts, query: { filters: filtersParam(list.filters) } });
  }

  createVolume(config: VolumeCreateConfig, opts: CallOptions = {}): Promise<EngineResult<Volume>> {
    return this.request("POST", "/volumes/create", { ...opts, body: config });
  }

  removeVolume(name: string, force?: boolean, opts: CallOptions = {}): Promise<EngineResult<undefined>> {
    return this.request("DELETE", `/volumes/${seg(name)}`, { ...opts, query: { force } });
  }

  listVolumes(list: { filters?: Filters } = {}, opts: CallOptions = {}): Promise<EngineResult<VolumeList>> {
    return this.request("GET", "/volumes", { ...opts, query: { filters: filtersParam(list.filters) } });
  }

  // ---- images ------------------------------------------------------------------------

  inspectImage(ref: string, opts: CallOptions = {}): Promise<EngineResult<ImageInspect>> {
    return this.request("GET", `/images/${refPath(ref)}/json`, opts);
  }

  removeImage(ref: string, rm: { force?: boolean; noprune?: boolean } = {}, opts: CallOptions = {}): Promise<EngineResult<ImageDeleteResponse>> {
    return this.request("DELETE", `/images/${refPath(ref)}`, { ...opts, query: { force: rm.force, noprune: rm.noprune } });
  }

  /**
   * `docker import`: POST /images/create?fromSrc=- with the tar as body. The answer is a
   * JSON-lines progress stream; an error line is reported as DockerError 500 with its text.
   * The tar stream is consumed (or destroyed, if the call fails before sending it).
   */
  async importImage(
    tar: Readable,
    imp: { repo: string; tag: string; changes?: string[]; message?: string },
    opts: CallOptions = {},
  ): Promise<EngineResult<{ imageId: string }>> {
    const pending = await this.ensureVersion(opts);
    if (pending) {
      tar.destroy();
      return pending;
    }
    const t = opts.timeoutMs ?? this.importTimeoutMs;
    const guard = new CallGuard(opts.signal);
    guard.arm(t);
    try {
      const r = await this.open("POST", "/images/create", {
        versioned: true,
        guard,
        query: { fromSrc: "-", repo: imp.repo, tag: imp.tag, changes: imp.changes, message: imp.message },
        body: tar,
        contentType: "application/x-tar",
        headersTimeoutMs: t,
        bodyTimeoutMs: t,
      });
      if (r.kind !== "response") return r;
      const buf = await readAll(r.body, guard);
      if (!Buffer.isBuffer(buf)) return buf;
      if (r.status >= 400) return errorFromBody(r.status, buf);
      const splitter = createJsonLineSplitter();
      let imageId: string | undefined;
      for (const line of [...splitter.push(buf), ...splitter.end()]) {
        if (!line.ok) return transport(TransportCode.BAD_BODY, `image import sent a non-JSON line: ${line.line.slice(0, 200)}`);
        const msg = line.value as { status?: unknown; error?: unknown; errorDetail?: { message?: unknown } };
        const error = typeof msg.errorDetail?.message === "string" ? msg.errorDetail.message : msg.error;
        if (error !== undefined) return dockerError(500, typeof error === "string" ? error : JSON.stringify(error));
        if (typeof msg.status === "string" && /^sha256:[0-9a-f]{64}$/.test(msg.status.trim())) imageId = msg.status.trim();
      }
      if (imageId !== undefined) return ok(r.status, { imageId });
    } finally {
      guard.dispose();
    }
    const inspected = await this.inspectImage(`${imp.repo}:${imp.tag}`, { signal: opts.signal });
    if (inspected.kind !== "ok") return inspected;
    return ok(inspected.status, { imageId: inspected.body.Id });
  }

  // ---- exec --------------------------------------------------------------------------

  execCreate(containerId: string, config: ExecCreateConfig, opts: CallOptions = {}): Promise<EngineResult<ExecCreateResponse>> {
    return this.request("POST", `/containers/${seg(containerId)}/exec`, { ...opts, body: config });
  }

  execInspect(execId: string, opts: CallOptions = {}): Promise<EngineResult<ExecInspect>> {
    return this.request("GET", `/exec/${seg(execId)}/json`, opts);
  }

  execResize(execId: string, h: number, w: number, opts: CallOptions = {}): Promise<EngineResult<undefined>> {
    return this.request("POST", `/exec/${seg(execId)}/resize`, { ...opts, query: { h, w } });
  }

  /**
   * POST /exec/{id}/start hijacked through an HTTP upgrade. Resolves with the raw socket:
   * write stdin to it, end() it to send EOF to the process, read output from it (Docker's
   * multiplexed framing unless tty; see createDemuxer). The deadline covers only the
   * upgrade; the socket then belongs to the caller, who must destroy it.
   */
  async execStart(execId: string, start: { tty: boolean }, opts: CallOptions = {}): Promise<EngineResult<Duplex>> {
    const pending = await this.ensureVersion(opts);
    if (pending) return pending;
    const t = opts.timeoutMs ?? this.timeoutMs;
    const guard = new CallGuard(opts.signal);
    guard.arm(t);
    try {
      return await this.upgrade(
        {
          origin: ORIGIN,
          path: this.fullPath(`/exec/${seg(execId)}/start`, true, undefined),
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ Detach: false, Tty: start.tty }),
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

  /**
   * A raw dispatch rather than undici's upgrade(): that one turns a non-101 answer into
   * "bad upgrade" and drops Docker's error message (404 no such exec, 409 not running).
   */
  private upgrade(dispatchOpts: Dispatcher.DispatchOptions, guard: CallGuard): Promise<EngineResult<Duplex>> {
    return new Promise((resolve) => {
      let settled = false;
      let controller: Dispatcher.DispatchController | undefined;
      let status = 0;
      const chunks: Buffer[] = [];
      const settle = (r: EngineResult<Duplex>): void => {
        if (settled) return;
        settled = true;
        resolve(r);
      };
      guard.onAbort(() => {
        controller?.abort(new Error("aborted"));
        settle(guard.failure(undefined));
      });
      const handler: Dispatcher.DispatchHandler = {
        onRequestStart(c) {
          controller = c;
          if (settled) c.abort(new Error("aborted"));
        },
        onRequestUpgrade(_c, statusCode, _headers, socket) {
          if (settled) {
            socket.destroy();
            return;
          }
          settle(ok(statusCode, socket));
        },
        onResponseStart(_c, statusCode) {
          status = statusCode;
        },
        onResponseData(_c, chunk) {
          chunks.push(chunk);
        },
        onResponseEnd() {
          const buf = Buffer.concat(chunks);
          if (status >= 400) settle(errorFromBody(status, buf));
          else settle(transport("NO_UPGRADE", `exec start answered HTTP ${status} instead of 101 Switching Protocols`));
        },
        onResponseError(_c, err) {
          settle(guard.failure(err));
        },
      };
      try {
        this.dispatcher.dispatch(dispatchOpts, handler);
      } catch (err) {
        settle(guard.failure(err));
      }
    });
  }
}

// ---- helpers -------------------------------------------------------------------------

async function readAll(body: AsyncIterable<Buffer>, guard: CallGuard): Promise<Buffer | TransportFailure> {
  const chunks: Buffer[] = [];
  try {
    for await (const chunk of body) chunks.push(chunk);
    return Buffer.concat(chunks);
  } catch (err) {
    return guard.failure(err);
  }
}

function parseJson(buf: Buffer): { kind: "ok"; body: unknown } | TransportFailure {
  try {
    return { kind: "ok", body: JSON.parse(buf.toString("utf8")) as unknown };
  } catch {
    return transport(TransportCode.BAD_BODY, `expected JSON, got ${buf.length} bytes: ${snippet(buf)}`);
  }
}

function errorFromBody(status: number, buf: Buffer): DockerError {
  const text = buf.toString("utf8").trim();
  try {
    const parsed = JSON.parse(text) as { message?: unknown };
    if (typeof parsed.message === "string") return dockerError(status, parsed.message);
  } catch {
    // not JSON: fall through to the raw text
  }
  return dockerError(status, text === "" ? `HTTP ${status}` : text.slice(0, 500));
}

function isWaitResponse(v: unknown): v is WaitResponse {
  return typeof v === "object" && v !== null && typeof (v as { StatusCode?: unknown }).StatusCode === "number";
}

function snippet(buf: Buffer): string {
  return JSON.stringify(buf.subarray(0, 120).toString("utf8"));
}

function headerValue(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

/** One path segment (ids, names). */
function seg(s: string): string {
  return encodeURIComponent(s);
}

/** Image references keep their slashes (dockerd routes /images/{name:.*}/json). */
function refPath(ref: string): string {
  return ref.split("/").map(encodeURIComponent).join("/");
}

function filtersParam(filters: Filters | undefined): string | undefined {
  return filters === undefined || Object.keys(filters).length === 0 ? undefined : JSON.stringify(filters);
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
