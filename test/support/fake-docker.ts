// FAKE Docker daemon state on top of FakeEngine, for unit tests of the Docker
// monitor: a table of containers answered by inspect and list, an events stream
// the test writes to, cuts or ends, an exec endpoint for the readiness probe, and
// switches that make the whole daemon refuse, hang or answer again. A model of
// what the monitor reads, not of dockerd's logic.
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server, type ServerResponse } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Duplex } from "node:stream";
import { pino } from "pino";
import type { ComputeDriver, ExecSession, LaunchRequest, MonitorSink, ReadinessReport, RuntimeRecord } from "../../src/driver/contract.js";
import { DockerMonitor, type MonitorOptions } from "../../src/driver/docker/monitor/docker-monitor.js";
import type { DockerEvent } from "../../src/driver/docker/engine/types.js";
import { LABEL } from "../../src/driver/docker/objects.js";
import { FakeEngine, UPGRADED, type HandlerContext } from "./fake-engine.js";

export interface FakeContainer {
  id: string;
  name: string;
  labels: Record<string, string>;
  running: boolean;
  startedAt: string;
  finishedAt: string;
  pid: number;
  exitCode: number;
  status: string;
}


export class FakeDocker {
  readonly containers = new Map<string, FakeContainer>();
  /** "up": answers; "down": every connection is cut (a stopped daemon); "hung": nothing is answered. */
  mode: "up" | "down" | "hung" = "up";
  /** Exit code of the workload exec probe. */
  probeExitCode = 0;
  /** Execs created so far (each exec probe creates one). */
  execs = 0;
  /** While set, inspects of these ids wait for the promise before answering. */
  readonly holdInspect = new Map<string, Promise<void>>();
  private readonly streams = new Set<ServerResponse>();
  private readonly held = new Set<() => void>();
  private seq = 0;

  private constructor(
    readonly engine: FakeEngine,
    readonly gatewayId: string,
    readonly health: Server,
  ) {}

  get socketPath(): string {
    return this.engine.socketPath;
  }

  /** The fake supervisors' health socket (one for all of them). */
  get healthSocket(): string {
    return this.health.address() as string;
  }

  /** The supervisor health answer: true → 200. */
  healthy = true;

  static async start(gatewayId: string): Promise<FakeDocker> {
    const engine = await FakeEngine.start();
    const health = createServer((_req, res) => {
      res.writeHead(fd.healthy ? 200 : 503, { "content-type": "application/json" }).end(JSON.stringify({ ok: fd.healthy }));
    });
    await new Promise<void>((r) => health.listen(join(mkdtempSync(join(tmpdir(), "sg-fake-health-")), "health.sock"), () => r()));
    const fd: FakeDocker = new FakeDocker(engine, gatewayId, health);
    fd.routes();
    return fd;
  }

  /** A running container of a sandbox generation, with our labels. */
  add(sandboxId: string, generation: number, role: "workload" | "supervisor", nonce: string): FakeContainer {
    const n = ++this.seq;
    const c: FakeContainer = {
      id: `${role.slice(0, 3)}${String(n).padStart(61, "0")}`.slice(0, 64),
      name: `sandgate-${sandboxId}-g${generation}-${role}`,
      labels: {
        [LABEL.gateway]: this.gatewayId,
        [LABEL.sandbox]: sandboxId,
        [LABEL.generation]: String(generation),
        [LABEL.role]: role,
        [LABEL.nonce]: nonce,
      },
      running: true,
      startedAt: `2026-01-01T00:00:${String(n).padStart(2, "0")}.000000001Z`,
      finishedAt: "0001-01-01T00:00:00Z",
      pid: 1000 + n,
      exitCode: 0,
      status: "running",
    };
    this.containers.set(c.id, c);
    return c;
  }

  exit(id: string, code: number): void {
    const c = this.containers.get(id)!;
    Object.assign(c, { running: false, exitCode: code, status: "exited", pid: 0, finishedAt: "2026-01-01T01:00:00Z" });
  }

  /** Docker's event for a container of ours. */
  emit(c: FakeContainer, action: string): void {
    const e: DockerEvent = {
      Type: "container",
      Action: action,
      Actor: { ID: c.id, Attributes: { ...c.labels, name: c.name } },
      scope: "local",
      time: Math.floor(Date.now() / 1000),
      timeNano: Date.now() * 1e6,
    };
    for (const res of this.streams) res.write(JSON.stringify(e) + "\n");
  }

  /** Open /events streams right now. */
  get openStreams(): number {
    return this.streams.size;
  }

  /** Cut every open events stream (a daemon restart as the client sees it). */
  cutStreams(): void {
    for (const res of this.streams) res.socket?.destroy();
    this.streams.clear();
  }

  /** Send a line that is not JSON on every open events stream. */
  garbleStreams(): void {
    for (const res of this.streams) res.write("<html>proxy error</html>\n");
  }

  /** The daemon goes away: streams cut, every new connection cut. */
  stop(): void {
    this.mode = "down";
    this.cutStreams();
  }

  /** The daemon freezes: connections stay open, nothing is answered. */
  freeze(): void {
    this.mode = "hung";
  }

  resume(): void {
    this.mode = "up";
    for (const release of [...this.held]) release();
  }

  async close(): Promise<void> {
    this.resume();
    for (const res of this.streams) res.end();
    this.streams.clear();
    const socket = this.healthSocket;
    await new Promise<void>((r) => this.health.close(() => r()));
    this.health.closeAllConnections();
    rmSync(join(socket, ".."), { recursive: true, force: true });
    await this.engine.close();
  }

  private inspectBody(c: FakeContainer): unknown {
    return {
      Id: c.id,
      Name: `/${c.name}`,
      Created: "2026-01-01T00:00:00Z",
      Image: "sha256:fake",
      Config: { Image: "fake", Labels: c.labels },
      State: { Status: c.status, Running: c.running, Paused: false, Restarting: false, Pid: c.pid, ExitCode: c.exitCode, StartedAt: c.startedAt, FinishedAt: c.finishedAt, Error: "", OOMKilled: false },
      NetworkSettings: { Networks: {} },
    };
  }

  /** Runs `answer` unless the daemon is down (cut) or hung (held until it is up again). */
  private gate(ctx: HandlerContext, answer: () => void): void {
    if (this.mode === "down") return ctx.cut();
    if (this.mode === "hung") {
      const release = (): void => {
        this.held.delete(release);
        answer();
      };
      this.held.add(release);
      return;
    }
    answer();
  }

  private json(res: ServerResponse, status: number, body: unknown): void {
    if (res.destroyed) return;
    const text = JSON.stringify(body);
    res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text) }).end(text);
  }

  private routes(): void {
    const e = this.engine;
    e.on("GET", "/_ping", (res, ctx) => this.gate(ctx, () => res.writeHead(200, { "API-Version": "1.41", "Content-Type": "text/plain" }).end("OK")));
    e.on("GET", "/events", (res, ctx) =>
      this.gate(ctx, () => {
        res.writeHead(200, { "Content-Type": "application/json" });
        res.flushHeaders();
        this.streams.add(res);
        res.on("close", () => this.streams.delete(res));
      }),
    );
    e.on("GET", /^\/containers\/[^/]+\/json$/, (res, ctx) =>
      this.gate(ctx, () => {
        const id = ctx.req.path.split("/")[2]!;
        const answer = (): void => {
          const c = this.containers.get(id);
          if (!c) this.json(res, 404, { message: `No such container: ${id}` });
          else this.json(res, 200, this.inspectBody(c));
        };
        const hold = this.holdInspect.get(id);
        if (hold) void hold.then(answer);
        else answer();
      }),
    );
    e.on("GET", "/containers/json", (res, ctx) =>
      this.gate(ctx, () => {
        const filters = JSON.parse(ctx.req.query.get("filters") ?? "{}") as { name?: string[]; label?: string[] };
        const byName = filters.name?.[0]?.replace(/^\^\//, "").replace(/\$$/, "");
        const labels = (filters.label ?? []).map((l) => l.split("="));
        const list = [...this.containers.values()].filter((c) => (byName === undefined || c.name === byName) && labels.every(([k, v]) => c.labels[k!] === v));
        this.json(res, 200, list.map((c) => ({ Id: c.id, Names: [`/${c.name}`], Labels: c.labels, State: c.status })));
      }),
    );
    e.on("DELETE", /^\/containers\/[^/]+$/, (res, ctx) =>
      this.gate(ctx, () => {
        const id = ctx.req.path.split("/")[2]!;
        if (!this.containers.delete(id)) this.json(res, 404, { message: `No such container: ${id}` });
        else res.writeHead(204).end();
      }),
    );
    e.on("POST", /^\/containers\/[^/]+\/exec$/, (res, ctx) => this.gate(ctx, () => this.json(res, 201, { Id: `exec${++this.execs}` })));
    e.onUpgrade("POST", /^\/exec\/[^/]+\/start$/, (socket: Duplex, ctx) => {
      if (this.mode !== "up") return ctx.cut();
      socket.end(UPGRADED);
    });
    e.on("GET", /^\/exec\/[^/]+\/json$/, (res, ctx) =>
      this.gate(ctx, () => this.json(res, 200, { ID: ctx.req.path.split("/")[2], ContainerID: "", Running: false, ExitCode: this.probeExitCode, Pid: 0 })),
    );
  }
}

// ---- a ComputeDriver on the fake daemon ---------------------------------------------


/**
 * TEST DOUBLE: launches "containers" in a FakeDocker (created running), removes
 * them on stop/delete, and watches them with the real DockerMonitor over the
 * fake's socket. Readiness is scripted (`ready`); exec is not supported.
 */
export class FakeDockerDriver implements ComputeDriver {
  readonly kind = "fake docker (test double)";
  readonly supervised = false;
  ready = true;
  readonly calls: string[] = [];
  monitor: DockerMonitor | undefined;
  /** The sink the monitor was given. */
  sink: MonitorSink | undefined;

  constructor(
    readonly fd: FakeDocker,
    private readonly monitorOptions: Partial<MonitorOptions> = {},
    /** Lets a test stand between the monitor and the gateway's sink. */
    private readonly wrapSink: (s: MonitorSink) => MonitorSink = (s) => s,
  ) {}

  async prepare(): Promise<void> {}

  async provision(req: LaunchRequest): Promise<void> {
    this.calls.push(`provision ${req.name} g${req.generation}`);
  }

  async start(req: LaunchRequest): Promise<RuntimeRecord> {
    this.calls.push(`start ${req.name} g${req.generation}`);
    const ids = {} as Record<"workload" | "supervisor", RuntimeRecord["workload"]>;
    for (const role of ["supervisor", "workload"] as const) {
      const c = this.fd.add(req.sandboxId, req.generation, role, req.nonce);
      ids[role] = { id: c.id, name: c.name, imageId: "sha256:fake", startedAt: c.startedAt, pid: c.pid };
    }
    return { generation: req.generation, nonce: req.nonce, workload: ids.workload, supervisor: ids.supervisor, proxyUrl: "http://127.0.0.1:3128" };
  }

  async verify(): Promise<ReadinessReport> {
    return { ready: this.ready, checks: [{ name: "scripted", ok: this.ready }] };
  }

  private removeWhere(match: (c: FakeContainer) => boolean): void {
    if (this.fd.mode !== "up") throw new Error("the fake daemon is not answering");
    for (const [id, c] of this.fd.containers) if (match(c)) this.fd.containers.delete(id);
  }

  async stop(sandboxId: string, generation: number): Promise<void> {
    this.calls.push(`stop ${sandboxId} g${generation}`);
    this.removeWhere((c) => c.labels[LABEL.sandbox] === sandboxId && Number(c.labels[LABEL.generation]) <= generation);
  }

  async remove(sandboxId: string): Promise<void> {
    this.calls.push(`remove ${sandboxId}`);
    this.removeWhere((c) => c.labels[LABEL.sandbox] === sandboxId);
  }

  exec(): Promise<ExecSession> {
    return Promise.reject(new Error("exec is not supported by the fake docker driver"));
  }

  controlAddress(): null {
    return null;
  }

  watch(sink: MonitorSink): DockerMonitor {
    this.sink = this.wrapSink(sink);
    this.monitor = new DockerMonitor({
      socketPath: this.fd.socketPath,
      gatewayId: this.fd.gatewayId,
      sink: this.sink,
      log: pino({ level: process.env.SANDGATE_TEST_LOG ?? "silent" }),
      healthSocket: () => this.fd.healthSocket,
      pingIntervalMs: 100,
      pingTimeoutMs: 300,
      attributionGraceMs: 50,
      backoff: { initialMs: 20, factor: 1.5, maxMs: 100, jitter: 0 },
      ...this.monitorOptions,
    });
    return this.monitor;
  }

  async close(): Promise<void> {}
}
