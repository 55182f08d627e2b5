// Watches every armed sandbox of this gateway through ONE Docker events stream
// (filtered by the gateway's label) plus a ping watchdog, so the number of
// Docker connections stays constant as sandboxes grow. It reports facts and
// decides nothing: a broken stream or a failed ping is reported as a lost
// channel (never an exit), each inspect of a generation's two containers as
// their verdicts, and the re-verification probes it is asked for as their
// checks. The gateway's generation handle decides (src/lifecycle/supervision.ts)
// and answers each report with the monitor's next step. After every reconnect
// the verdicts come from re-read state (inspect), never from replayed events.

import type { Logger } from "pino";
import type { MonitorFact, MonitorSink, MonitorStep, ReadinessCheck, RuntimeCall, RuntimeMonitor, Watched } from "../../contract.js";
import { isTerminal, type RoleVerdicts, type Verdict } from "../../../lifecycle/supervision.js";
import { backoffDelay, DEFAULT_BACKOFF, type BackoffPolicy } from "../../../util/backoff.js";
import { Limiter } from "../../../util/limiter.js";
import { EngineClient } from "../engine/client.js";
import { describe, type EngineResult } from "../engine/result.js";
import type { ContainerInspect, ContainerSummary, DockerEvent } from "../engine/types.js";
import { expectedInstance } from "../identity.js";
import { errorMessage } from "../../../util/error-message.js";
import { LABEL, containerName } from "../objects.js";
import { execProbeCheck, healthCheck, transparentCheck, type RuntimeProbes } from "../readiness.js";
import { classifyInspect } from "./classify.js";
import { MonitorRegistry } from "./registry.js";

export interface MonitorOptions {
  /** The Docker socket; the monitor opens (and closes) a connection of its own. */
  socketPath: string;
  /** Deadline of each Docker call the monitor makes. Default 3000. */
  engineTimeoutMs?: number;
  gatewayId: string;
  sink: MonitorSink;
  log: Logger;
  pingIntervalMs?: number;
  pingTimeoutMs?: number;
  /** Wait before attributing a failure to the workload while its supervisor still runs, and before a "recheck" step. */
  attributionGraceMs?: number;
  backoff?: BackoffPolicy;
  random?: () => number;
  /** Command run in the workload as the exec probe of a re-verification. Default ["true"]. */
  probeCommand?: string[];
  /** Where a generation's supervisor serves its health endpoint, on the host (launch-paths.ts: healthSocketOf). */
  healthSocket: (sandboxId: string, generation: number) => string;
  /** The transparent path's check of a launch (readiness.ts RuntimeProbes.transparent). */
  transparent?: RuntimeProbes["transparent"];
  /** Told of every Docker call the monitor makes (the gateway's metrics). */
  observe?: (call: RuntimeCall) => void;
}

export interface MonitorMetrics {
  dockerConnected: boolean;
  reconnectAttempts: number;
  /** Delays chosen by the backoff, most recent last (bounded). */
  recentBackoffMs: number[];
  disconnects: number;
  classifications: { exited: number; instance_changed: number; gone: number; channel_lost: number; alive: number; stale_dropped: number };
  monitors: number;
}

const COUNTER: Record<Verdict["kind"], keyof MonitorMetrics["classifications"]> = {
  Exited: "exited",
  InstanceChanged: "instance_changed",
  Gone: "gone",
  ChannelLost: "channel_lost",
  Alive: "alive",
};

/** How often a disconnected monitor pings for the daemon's return. */
const DAEMON_POLL_MS = 200;
/**
 * Sandboxes checked at once: two inspects (in parallel) and a health request
 * each, cheap next to an exec probe, which has its own, lower bound.
 */
const CHECK_CONCURRENCY = 16;
/** Exec probes at once: each starts a process in a workload (runc), CPU-bound on a restoring daemon. */
const PROBE_CONCURRENCY = 8;

const WATCHED_ACTIONS = new Set(["die", "kill", "oom", "stop", "destroy", "start", "restart", "pause", "unpause"]);

export class DockerMonitor implements RuntimeMonitor {
  readonly registry = new MonitorRegistry();
  private readonly opts: Required<Omit<MonitorOptions, "socketPath" | "engineTimeoutMs" | "sink" | "log" | "gatewayId" | "observe" | "transparent">> & Pick<MonitorOptions, "transparent">;
  private readonly engine: EngineClient;
  private readonly sink: MonitorSink;
  private readonly log: Logger;
  private readonly gatewayId: string;
  private connected = false;
  private closed = false;
  private stream: AbortController | undefined;
  private loop: Promise<void> | undefined;
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly inflight = new Map<string, Promise<void>>();
  private readonly limiter = new Limiter(CHECK_CONCURRENCY);
  private readonly probeLimiter = new Limiter(PROBE_CONCURRENCY);
  private readonly again = new Set<string>();
  private pinging = false;
  private readonly m: MonitorMetrics = {
    dockerConnected: false,
    reconnectAttempts: 0,
    recentBackoffMs: [],
    disconnects: 0,
    classifications: { exited: 0, instance_changed: 0, gone: 0, channel_lost: 0, alive: 0, stale_dropped: 0 },
    monitors: 0,
  };

  constructor(o: MonitorOptions) {
    this.engine = new EngineClient({ socketPath: o.socketPath, timeoutMs: o.engineTimeoutMs ?? 3_000 });
    if (o.observe) this.engine.observe(o.observe);
    this.sink = o.sink;
    this.log = o.log.child({ component: "monitor" });
    this.gatewayId = o.gatewayId;
    this.opts = {
      pingIntervalMs: o.pingIntervalMs ?? 2_000,
      pingTimeoutMs: o.pingTimeoutMs ?? 1_500,
      attributionGraceMs: o.attributionGraceMs ?? 750,
      backoff: o.backoff ?? DEFAULT_BACKOFF,
      random: o.random ?? Math.random,
      probeCommand: o.probeCommand ?? ["true"],
      healthSocket: o.healthSocket,
      ...(o.transparent === undefined ? {} : { transparent: o.transparent }),
    };
  }

  metrics(): MonitorMetrics {
    return {
      ...this.m,
      classifications: { ...this.m.classifications },
      recentBackoffMs: [...this.m.recentBackoffMs],
      dockerConnected: this.connected,
      monitors: this.registry.size,
    };
  }

  /** Pending checks and timers, for leak assertions in tests. */
  pending(): { checks: number; timers: number } {
    return { checks: this.inflight.size, timers: this.timers.size };
  }

  start(): void {
    if (this.loop) return;
    this.loop = this.run();
    this.every(this.opts.pingIntervalMs, () => void this.watchdog());
  }

  /** Arm the monitor of a generation that just became Ready (or is being adopted). */
  arm(w: Watched): void {
    const r = this.registry.arm(w);
    this.log.info({ sandboxId: w.sandboxId, generation: w.generation, result: r }, "monitor arm");
    if (r === "refused-older" || r === "already-armed") return;
    // The handle hears of the channel's state when it is watched; with the channel up, it is inspected now.
    if (this.connected) this.check(w.sandboxId);
  }

  /** Stop and delete disarm first, so an intended exit is never reported as a crash. */
  disarm(sandboxId: string): void {
    if (this.registry.disarm(sandboxId)) this.log.info({ sandboxId }, "monitor disarmed");
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const wake of [...this.wakers]) wake();
    for (const t of this.timers) clearInterval(t);
    this.timers.clear();
    this.stream?.abort();
    await this.loop;
    while (this.inflight.size > 0 || this.told.size > 0) await Promise.all([...this.inflight.values(), ...this.told]);
    await this.engine.close();
  }

  private every(ms: number, fn: () => void): void {
    const t = setInterval(fn, ms);
    this.timers.add(t);
  }

  // ---- the events stream and its reconnect loop -------------------------------------

  private async run(): Promise<void> {
    let attempt = 0;
    while (!this.closed) {
      this.stream = new AbortController();
      let opened = false;
      const end = await this.engine.events(
        {
          filters: { type: ["container"], label: [`${LABEL.gateway}=${this.gatewayId}`] },
          signal: this.stream.signal,
          onOpen: () => {
            opened = true;
            this.onConnected();
          },
        },
        (e) => this.onEvent(e),
      );
      if (this.closed) break;
      const cause = end.kind === "aborted" ? (this.abortCause ?? "stream aborted") : `events stream ended: ${describe(end)}`;
      this.abortCause = undefined;
      this.onDisconnected(cause);
      // Backoff grows while the daemon stays away and resets after a connection held.
      if (opened) attempt = 0;
      const delay = backoffDelay(attempt++, this.opts.random(), this.opts.backoff);
      this.m.reconnectAttempts++;
      this.m.recentBackoffMs.push(delay);
      if (this.m.recentBackoffMs.length > 50) this.m.recentBackoffMs.shift();
      await this.untilDaemonAnswers(delay);
    }
    this.connected = false;
  }

  private abortCause: string | undefined;

  /**
   * The backoff delay, cut short as soon as a cheap ping answers: a daemon that
   * comes back is noticed within a fraction of a second, while stream
   * reconnects stay paced by the backoff.
   */
  private async untilDaemonAnswers(delayMs: number): Promise<void> {
    const until = Date.now() + delayMs;
    while (!this.closed && Date.now() < until) {
      await this.pause(Math.min(DAEMON_POLL_MS, until - Date.now()));
      if (this.closed || Date.now() >= until) return;
      if ((await this.engine.ping({ timeoutMs: DAEMON_POLL_MS * 2 })).kind === "ok") return;
    }
  }

  /** A wait that close() cuts short (it resolves early, never hangs). */
  private pause(ms: number): Promise<void> {
    if (this.closed) return Promise.resolve();
    return new Promise((resolve) => {
      const wake = (): void => {
        clearTimeout(t);
        this.timers.delete(t);
        this.wakers.delete(wake);
        resolve();
      };
      const t = setTimeout(wake, ms);
      this.timers.add(t);
      this.wakers.add(wake);
    });
  }

  private readonly wakers = new Set<() => void>();

  private onConnected(): void {
    this.connected = true;
    this.log.info({ monitors: this.registry.size }, "docker events stream connected; reconciling from inspect");
    // Containers that failed while Docker was away are removed now that it answers (the gateway's part).
    this.tell({ kind: "channel", up: true });
    for (const w of this.registry.all()) this.check(w.sandboxId);
  }

  private onDisconnected(cause: string): void {
    const was = this.connected;
    this.connected = false;
    if (!was) {
      this.log.debug({ cause }, "reconnect attempt failed");
    } else {
      this.m.disconnects++;
      this.log.warn({ cause, monitors: this.registry.size }, "docker channel lost; sandboxes go Recovering, nothing is stopped");
      for (const w of this.registry.all()) {
        // A broken stream is classified once for every sandbox it was watching.
        this.m.classifications.channel_lost++;
        this.log.info({ sandboxId: w.sandboxId, generation: w.generation, verdict: { kind: "ChannelLost", cause } }, "classification");
      }
    }
    // Also after a failed attempt: anything armed meanwhile must not stay Ready.
    this.tell({ kind: "channel", up: false, cause });
  }

  /** Report a fact whose answer asks nothing of the monitor; close() waits for it. */
  private tell(fact: MonitorFact): void {
    const p: Promise<void> = this.sink
      .report(fact)
      .then(() => undefined)
      .catch((err: unknown) => this.log.error({ err: errorMessage(err) }, "monitor report failed"))
      .finally(() => this.told.delete(p));
    this.told.add(p);
  }

  private readonly told = new Set<Promise<void>>();

  /** A silent stream proves nothing: a frozen daemon keeps the socket open. Ping it. */
  private async watchdog(): Promise<void> {
    if (!this.connected || this.pinging || this.closed) return;
    this.pinging = true;
    try {
      const r = await this.engine.ping({ timeoutMs: this.opts.pingTimeoutMs });
      if (r.kind !== "ok" && this.connected && !this.closed) {
        this.abortCause = `ping failed: ${describe(r)}`;
        this.stream?.abort();
      }
    } finally {
      this.pinging = false;
    }
  }

  private onEvent(e: DockerEvent): void {
    const attrs = e.Actor?.Attributes ?? {};
    const sandboxId = attrs[LABEL.sandbox];
    const action = (e.Action ?? "").split(":")[0] ?? "";
    if (!sandboxId || !WATCHED_ACTIONS.has(action)) return;
    const generation = Number(attrs[LABEL.generation]);
    const watched = this.registry.get(sandboxId);
    if (!watched) return; // not monitored (provisioning, stopping): the lifecycle task owns it
    if (generation !== watched.generation) {
      this.m.classifications.stale_dropped++;
      this.log.info({ sandboxId, generation, watched: watched.generation, action }, "stale event for another generation dropped");
      return;
    }
    this.log.debug({ sandboxId, generation, action, role: attrs[LABEL.role] }, "container event");
    this.check(sandboxId);
  }

  // ---- per-sandbox checks, serialized ------------------------------------------------

  /** Re-check a sandbox from inspect; one check per sandbox at a time. */
  check(sandboxId: string): void {
    if (this.closed || !this.connected || !this.registry.get(sandboxId)) return;
    if (this.inflight.has(sandboxId)) {
      this.again.add(sandboxId);
      return;
    }
    const p = this.limiter
      .run(() => this.checkOnce(sandboxId))
      .catch((err: unknown) => this.log.error({ sandboxId, err: errorMessage(err) }, "monitor check failed"))
      .finally(() => {
        this.inflight.delete(sandboxId);
        if (this.again.delete(sandboxId)) this.check(sandboxId);
      });
    this.inflight.set(sandboxId, p);
  }

  /** One inspect of the recorded instance, classified. */
  private async verdictFor(w: Watched, role: "workload" | "supervisor"): Promise<Verdict> {
    const expected = expectedInstance(this.gatewayId, w, role);
    const r: EngineResult<ContainerInspect> = await this.engine.inspectContainer(expected.id, { timeoutMs: this.opts.pingTimeoutMs });
    let v = classifyInspect(r, expected);
    if (v.kind === "Gone") {
      // A look-alike under the recorded name is a replacement, not an absence.
      const name = containerName(w.sandboxId, w.generation, role);
      const list: EngineResult<ContainerSummary[]> = await this.engine.listContainers({ all: true, filters: { name: [`^/${name}$`] } }, { timeoutMs: this.opts.pingTimeoutMs });
      if (list.kind !== "ok") v = { kind: "ChannelLost", cause: describe(list) };
      else if (list.body.length > 0) v = { kind: "InstanceChanged", detail: `${name} is now container ${list.body[0]!.Id.slice(0, 12)}, not the recorded ${expected.id.slice(0, 12)}` };
    }
    this.m.classifications[COUNTER[v.kind]]++;
    this.log.info({ sandboxId: w.sandboxId, generation: w.generation, role, instance: { id: expected.id.slice(0, 12), startedAt: expected.startedAt }, verdict: v }, "classification");
    return v;
  }

  /**
   * The runtime's part of a re-verification, once inspect showed both instances alive:
   * supervisor health (its socket), the transparent path, and the exec probe in the
   * workload when asked for (the handle skips it where an unbroken control session
   * proves the same). Stops at the first failure.
   */
  private async probe(w: Watched, exec: boolean): Promise<ReadinessCheck[]> {
    const checks: ReadinessCheck[] = [{ name: "supervisor identity", ok: true }, { name: "workload identity", ok: true }];
    const failed = (): boolean => checks.some((c) => !c.ok);
    checks.push(await healthCheck(this.probes, w));
    if (!failed()) checks.push(await transparentCheck(this.probes, w, w.record));
    if (!failed() && exec) checks.push(await this.probeLimiter.run(() => execProbeCheck(this.probes, w.record)));
    return checks;
  }

  private get probes(): RuntimeProbes {
    return { engine: this.engine, probeCommand: this.opts.probeCommand, healthSocket: this.opts.healthSocket, ...(this.opts.transparent === undefined ? {} : { transparent: this.opts.transparent }) };
  }

  private async checkOnce(sandboxId: string): Promise<void> {
    const w = this.registry.get(sandboxId);
    if (!w) return;
    // Both containers at once: the two inspects do not depend on each other.
    const [first, workload] = await Promise.all([this.verdictFor(w, "supervisor"), this.verdictFor(w, "workload")]);
    let supervisor = first;
    if (isTerminal(workload) && supervisor.kind === "Alive") {
      // When both go down together (a daemon stopping its containers), the
      // boundary's failure is the cause to report: give the supervisor's exit a
      // moment to land before blaming the workload.
      await this.pause(this.opts.attributionGraceMs);
      supervisor = await this.verdictFor(w, "supervisor");
    }
    const verdicts: RoleVerdicts = { supervisor, workload };
    if (!this.registry.isCurrent(sandboxId, w.generation)) {
      this.m.classifications.stale_dropped++;
      return;
    }
    let step = await this.sink.report({ kind: "verdicts", sandboxId, generation: w.generation, verdicts });
    if (step.do === "probe") {
      const exec = step.exec;
      const checks = await this.probe(w, exec);
      if (!this.registry.isCurrent(sandboxId, w.generation)) return;
      step = await this.sink.report({ kind: "probed", sandboxId, generation: w.generation, checks, exec });
    }
    this.follow(w, step);
  }

  /** What the handle asked of the monitor after a report. */
  private follow(w: Watched, step: MonitorStep): void {
    switch (step.do) {
      case "stale":
        this.m.classifications.stale_dropped++;
        this.registry.disarm(w.sandboxId, w.generation);
        return;
      case "recheck":
        // Runs once this check has ended (check() serializes per sandbox).
        void this.pause(this.opts.attributionGraceMs).then(() => this.check(w.sandboxId));
        return;
      case "probe": // answered a probe report with another probe: a handle's mistake, not looped on
      case "nothing":
        return;
    }
  }
}
