// The Docker Engine API endpoints Sandgate uses, as typed calls over EngineTransport.
// Every method resolves with an EngineResult: nothing throws and nothing hangs.
import { createDemuxer } from "./demux.js";
import type { Duplex, Readable } from "node:stream";
import { socketPathFromDockerHost } from "./host.js";
import { createJsonLineSplitter } from "./lines.js";
import { TransportCode, dockerError, ok, transport, type EngineResult } from "./result.js";
import { EngineTransport, type CallOptions, type PingBody, type RequestOptions, type StreamEnd } from "./transport.js";
import type { RuntimeCall } from "../../contract.js";
import type {
  ContainerCreateConfig,
  ContainerCreateResponse,
  ContainerInspect,
  ContainerStats,
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
} from "./types.js";

export const DEFAULT_IMPORT_TIMEOUT_MS = 10 * 60_000;

export interface EngineClientOptions {
  socketPath: string;
  /** Deadline of short calls, and headers timeout of streams. Default 10 s. */
  timeoutMs?: number;
  /** Deadline of importImage. Default 10 min. */
  importTimeoutMs?: number;
}

export interface EventsOptions {
  filters?: Filters;
  since?: string;
  until?: string;
  signal?: AbortSignal;
  /** Called once when the response headers arrive (the stream is live). */
  onOpen?: () => void;
}

export class EngineClient {
  readonly socketPath: string;
  readonly timeoutMs: number;
  readonly importTimeoutMs: number;
  private readonly t: EngineTransport;

  static fromEnv(env: NodeJS.ProcessEnv = process.env, opts: Omit<EngineClientOptions, "socketPath"> = {}): EngineClient {
    return new EngineClient({ ...opts, socketPath: socketPathFromDockerHost(env.DOCKER_HOST) });
  }

  constructor(opts: EngineClientOptions) {
    this.t = new EngineTransport(opts);
    this.socketPath = opts.socketPath;
    this.timeoutMs = this.t.timeoutMs;
    this.importTimeoutMs = opts.importTimeoutMs ?? DEFAULT_IMPORT_TIMEOUT_MS;
  }

  /** The negotiated API version, once known. */
  get apiVersion(): string | undefined {
    return this.t.apiVersion;
  }

  close(): Promise<void> {
    return this.t.close();
  }

  /** Report every call from now on (route template, latency, outcome): the gateway's metrics. */
  observe(observer: ((call: RuntimeCall) => void) | null): void {
    this.t.observe(observer);
  }

  /** GET /_ping; (re)negotiates the API version. */
  ping(opts: CallOptions = {}): Promise<EngineResult<PingBody>> {
    return this.t.ping(opts);
  }

  /** Any short call (path without the version prefix), for endpoints not wrapped below. */
  request<T = unknown>(method: string, path: string, opts: RequestOptions = {}): Promise<EngineResult<T>> {
    return this.t.request<T>(method, path, opts);
  }

  /** GET /events, one call of onEvent per message; resolves when the stream ends (see EngineTransport.jsonLines). */
  events(opts: EventsOptions, onEvent: (e: DockerEvent) => void): Promise<StreamEnd> {
    const query = { filters: filtersParam(opts.filters), since: opts.since, until: opts.until };
    return this.t.jsonLines("/events", { query, signal: opts.signal, onOpen: opts.onOpen }, (v) => onEvent(v as DockerEvent));
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

  /**
   * The last `tail` lines of a container's output (stdout and stderr interleaved as
   * Docker kept them; a container without a TTY), each cut to `maxLineChars`.
   */
  async containerLogs(id: string, tail: number, opts: CallOptions & { maxLineChars?: number } = {}): Promise<EngineResult<string[]>> {
    const r = await this.t.requestBytes("GET", `/containers/${seg(id)}/logs`, { ...opts, query: { stdout: true, stderr: true, tail } });
    if (r.kind !== "ok") return r;
    const parts: Buffer[] = [];
    const d = createDemuxer((b) => parts.push(b), (b) => parts.push(b));
    d.push(r.body);
    d.end();
    const max = opts.maxLineChars ?? 200;
    const lines = Buffer.concat(parts).toString("utf8").split("\n").filter((l) => l.trim() !== "");
    return { ...r, body: lines.slice(-tail).map((l) => (l.length > max ? `${l.slice(0, max - 1)}…` : l)) };
  }

  /** One sample of a container's resource use (`stream=false`: Docker samples twice, about 1 s apart, so CPU use has an earlier sample). */
  containerStats(id: string, opts: CallOptions = {}): Promise<EngineResult<ContainerStats>> {
    return this.request("GET", `/containers/${seg(id)}/stats`, { ...opts, query: { stream: false } });
  }

  /**
   * GET /containers/{id}/logs as it streams: Docker's multiplexed frames, each line
   * stamped with its time (see ../log-frames.ts). `since` is Docker's form, Unix
   * seconds with nanoseconds ("1700000000.000000001"), inclusive. Reading waits for
   * onChunk's promise (backpressure).
   */
  containerLogStream(
    id: string,
    q: { follow: boolean; tail?: number; since?: string; signal?: AbortSignal; onOpen?: () => void },
    onChunk: (chunk: Buffer) => void | Promise<void>,
  ): Promise<StreamEnd> {
    const query = { stdout: true, stderr: true, timestamps: true, follow: q.follow, tail: q.tail ?? "all", since: q.since };
    return this.t.byteStream(`/containers/${seg(id)}/logs`, { query, signal: q.signal, onOpen: q.onOpen }, onChunk);
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

  connectNetwork(idOrName: string, containerId: string, opts: CallOptions = {}): Promise<EngineResult<undefined>> {
    return this.request("POST", `/networks/${seg(idOrName)}/connect`, { ...opts, body: { Container: containerId } });
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

  /** GET /info: what the daemon says of its host (its CPUs, for a create's check). */
  info(opts: CallOptions = {}): Promise<EngineResult<{ NCPU: number }>> {
    return this.request("GET", "/info", opts);
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
    const r = await this.t.upload("POST", "/images/create", tar, {
      contentType: "application/x-tar",
      query: { fromSrc: "-", repo: imp.repo, tag: imp.tag, changes: imp.changes, message: imp.message },
      timeoutMs: opts.timeoutMs ?? this.importTimeoutMs,
      signal: opts.signal,
    });
    if (r.kind !== "ok") return r;
    const splitter = createJsonLineSplitter();
    let imageId: string | undefined;
    for (const line of [...splitter.push(r.body), ...splitter.end()]) {
      if (!line.ok) return transport(TransportCode.BAD_BODY, `image import sent a non-JSON line: ${line.line.slice(0, 200)}`);
      const msg = line.value as { status?: unknown; error?: unknown; errorDetail?: { message?: unknown } };
      const error = typeof msg.errorDetail?.message === "string" ? msg.errorDetail.message : msg.error;
      if (error !== undefined) return dockerError(500, typeof error === "string" ? error : JSON.stringify(error));
      if (typeof msg.status === "string" && /^sha256:[0-9a-f]{64}$/.test(msg.status.trim())) imageId = msg.status.trim();
    }
    if (imageId !== undefined) return ok(r.status, { imageId });
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
   * POST /exec/{id}/start hijacked: resolves with the raw socket. Write stdin to it,
   * end() it to send EOF to the process, read output from it (Docker's multiplexed
   * framing unless tty; see createDemuxer). The caller must destroy it.
   */
  execStart(execId: string, start: { tty: boolean }, opts: CallOptions = {}): Promise<EngineResult<Duplex>> {
    return this.t.hijack(`/exec/${seg(execId)}/start`, { Detach: false, Tty: start.tty }, opts);
  }
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
