// Watches every armed sandbox of this gateway through ONE Docker events stream
// (filtered by the gateway's label) plus a ping watchdog, so the number of
// Docker connections stays constant as sandboxes grow. A broken stream or a
// failed ping is a lost channel, never an exit: the affected sandboxes go
// Recovering and nothing is stopped. After every reconnect the verdict comes
// from re-read state (inspect), never from replayed events.

import type { Logger } from "pino";
import { RECOVERY_DEADLINE_DEFAULT_S, type MonitorSink, type ReadinessCheck, type ReadinessReport, type RuntimeCall, type RuntimeMonitor, type Watched } from "../../contract.js";
import type { LifecycleEvent } from "../../../lifecycle/phases.js";
import { backoffDelay, DEFAULT_BACKOFF, type BackoffPolicy } from "../../../util/backoff.js";
import { Limiter } from "../../../util/limiter.js";
import { EngineClient } from "../engine/client.js";
import { describe, type EngineResult } from "../engine/result.js";
import type { ContainerInspect, ContainerSummary, DockerEvent } from "../engine/types.js";
import { expectedInstance } from "../identity.js";
import { LABEL, containerName } from "../objects.js";
import { execProbeCheck, healthCheck, transparentCheck, type RuntimeProbes } from "../readiness.js";
import { classifyInspect, isTerminal, type Verdict } from "./classify.js";
import { decide, type RoleVerdicts } from "./decide.js";
import { MonitorRegistry } from "./registry.js";

export interface MonitorOptions {
  /** The Docker socket; the monitor opens (and closes) a connection of its own. */
  socketPath: string;
  /** Deadline of each Docker call the monitor makes. Default 3000. */
  engineTimeoutMs?: number;
  gatewayId: string;
  sink: MonitorSink;
  log: Logger;
  /** How long a sandbox may stay Recovering after losing Docker before it fails closed. Default 60 s. */
  recoveryDeadlineMs?: number;
  /** How long it may stay Recovering after its boundary was reported unhealthy, while Docker answers. Default 30 s. */
  boundaryDeadlineMs?: number;
  pingIntervalMs?: number;
  pingTimeoutMs?: number;
  /** How often Recovering sandboxes are re-checked while Docker answers. */
  retryIntervalMs?: number;
  /** Wait before attributing a failure to the workload while its supervisor still runs. */
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
  recoveringNow: number;
  recoveringMsTotal: number;
  recovered: number;
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
  /**
   * Recovering sandboxes: since when, whether the runtime or the boundary was
   * lost, and (runtime losses only) the control session that was up just before.
   */
  private readonly recoveringAt = new Map<string, { since: number; cause: "runtime" | "boundary"; problem?: string; session?: string }>();
  private pinging = false;
  private readonly m: MonitorMetrics = {
    dockerConnected: false,
    reconnectAttempts: 0,
    recentBackoffMs: [],
    disconnects: 0,
    classifications: { exited: 0, instance_changed: 0, gone: 0, channel_lost: 0, alive: 0, stale_dropped: 0 },
    recoveringNow: 0,
    recoveringMsTotal: 0,
    recovered: 0,
    monitors: 0,
  };

  constructor(o: MonitorOptions) {
    this.engine = new EngineClient({ socketPath: o.socketPath, timeoutMs: o.engineTimeoutMs ?? 3_000 });
    if (o.observe) this.engine.observe(o.observe);
    this.sink = o.sink;
    this.log = o.log.child({ component: "monitor" });
    this.gatewayId = o.gatewayId;
    this.opts = {
      recoveryDeadlineMs: o.recoveryDeadlineMs ?? RECOVERY_DEADLINE_DEFAULT_S * 1000,
      boundaryDeadlineMs: o.boundaryDeadlineMs ?? 30_000,
      pingIntervalMs: o.pingIntervalMs ?? 2_000,
      pingTimeoutMs: o.pingTimeoutMs ?? 1_500,
      retryIntervalMs: o.retryIntervalMs ?? 1_000,
      attributionGraceMs: o.attributionGraceMs ?? 750,
      backoff: o.backoff ?? DEFAULT_BACKOFF,
      random: o.random ?? Math.random,
      probeCommand: o.probeCommand ?? ["true"],
      healthSocket: o.healthSocket,
      ...(o.transparent === undefined ? {} : { transparent: o.transparent }),
    };
  }

  metrics(): MonitorMetrics {
    const now = Date.now();
    let open = 0;
    for (const r of this.recoveringAt.values()) open += now - r.since;
    return {
      ...this.m,
      classifications: { ...this.m.classifications },
      recentBackoffMs: [...this.m.recentBackoffMs],
      dockerConnected: this.connected,
      recoveringNow: this.recoveringAt.size,
      recoveringMsTotal: this.m.recoveringMsTotal + open,
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
    this.every(Math.min(500, this.opts.retryIntervalMs), () => this.tick());
  }

  /** Arm the monitor of a generation that just became Ready (or is being adopted). */
  arm(w: Watched): void {
    const r = this.registry.arm(w);
    this.log.info({ sandboxId: w.sandboxId, generation: w.generation, result: r }, "monitor arm");
    if (r === "refused-older" || r === "already-armed") return;
    // Adopted while Recovering: its deadline runs from when it entered Recovering.
    const current = this.sink.current(w.sandboxId);
    if (current?.phase === "Recovering" && current.generation === w.generation) {
      this.recoveringAt.set(w.sandboxId, { since: this.sink.recoveringSince(w.sandboxId) ?? Date.now(), cause: "runtime" });
    }
    if (!this.connected && this.loop) void this.lose(w, "the Docker events stream is down");
    else if (this.connected) this.check(w.sandboxId);
  }

  boundaryLost(sandboxId: string, generation: number, problem: string): void {
    const w = this.registry.get(sandboxId);
    if (!w || w.generation !== generation || this.closed) return;
    // A killed supervisor drops its session a moment before Docker reports the
    // exit: with Docker answering, inspect first, so a proven exit is an Error
    // at once and only a supervisor still running goes Recovering.
    if (!this.connected) {
      void this.lose(w, `boundary unhealthy: ${problem}`, "boundary");
      return;
    }
    this.boundaryPending.set(sandboxId, { generation, problem });
    this.check(sandboxId);
  }

  /** Boundary losses waiting for the inspect that decides between Error and Recovering. */
  private readonly boundaryPending = new Map<string, { generation: number; problem: string }>();

  /** Stop and delete disarm first, so an intended exit is never reported as a crash. */
  disarm(sandboxId: string): void {
    if (this.registry.disarm(sandboxId)) this.log.info({ sandboxId }, "monitor disarmed");
    this.boundaryPending.delete(sandboxId);
    this.settleRecovery(sandboxId, false);
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const wake of [...this.wakers]) wake();
    for (const t of this.timers) clearInterval(t);
    this.timers.clear();
    this.stream?.abort();
    await this.loop;
    while (this.inflight.size > 0) await Promise.all([...this.inflight.values()]);
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
    // Containers that failed while Docker was away are removed now that it answers.
    this.sink.reconnected();
    for (const w of this.registry.all()) this.check(w.sandboxId);
  }

  private onDisconnected(cause: string): void {
    const was = this.connected;
    this.connected = false;
    if (!was) {
      this.log.debug({ cause }, "reconnect attempt failed");
      // Still down: anything armed meanwhile must not stay Ready (idempotent for the rest).
      for (const w of this.registry.all()) void this.lose(w, cause);
      return;
    }
    this.m.disconnects++;
    this.log.warn({ cause, monitors: this.registry.size }, "docker channel lost; sandboxes go Recovering, nothing is stopped");
    for (const w of this.registry.all()) {
      // A broken stream is classified once for every sandbox it was watching.
      this.m.classifications.channel_lost++;
      this.log.info({ sandboxId: w.sandboxId, generation: w.generation, verdict: { kind: "ChannelLost", cause } }, "classification");
      void this.lose(w, cause);
    }
  }

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
    const current = this.sink.current(sandboxId);
    const watched = this.registry.get(sandboxId);
    if ((current && generation < current.generation) || (watched && generation !== watched.generation)) {
      this.m.classifications.stale_dropped++;
      this.log.info({ sandboxId, generation, current: current?.generation, action }, "stale event for an older generation dropped");
      return;
    }
    if (!watched) return; // not monitored (provisioning, stopping): the lifecycle task owns it
    this.log.debug({ sandboxId, generation, action, role: attrs[LABEL.role] }, "container event");
    this.check(sandboxId);
  }

  // ---- per-sandbox checks, serialized ------------------------------------------------

  /** Re-check a sandbox from inspect; one check per sandbox at a time. */
  private check(sandboxId: string): void {
    if (this.closed) return;
    if (this.inflight.has(sandboxId)) {
      this.again.add(sandboxId);
      return;
    }
    const p = this.limiter
      .run(() => this.checkOnce(sandboxId))
      .catch((err: unknown) => this.log.error({ sandboxId, err: (err as Error).message }, "monitor check failed"))
      .finally(() => {
        this.inflight.delete(sandboxId);
        if (this.again.delete(sandboxId)) this.check(sandboxId);
      });
    this.inflight.set(sandboxId, p);
  }

  /** One inspect of the recorded instance, classified. */
  private async verdictFor(w: Watched, role: "workload" | "supervisor"): Promise<{ verdict: Verdict }> {
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
    return { verdict: v };
  }

  /**
   * Everything a Recovering sandbox must prove before it is Ready again, once
   * inspect showed both instances alive: supervisor health (its socket), the
   * gateway's own evidence of a healthy control session, and an exec probe in the
   * workload, unless the control session stayed up throughout (unbrokenSession).
   * The last check names the evidence used for the workload.
   */
  private async reverify(w: Watched): Promise<ReadinessReport> {
    const checks: ReadinessCheck[] = [{ name: "supervisor identity", ok: true }, { name: "workload identity", ok: true }];
    const report = (): ReadinessReport => ({ ready: checks.every((c) => c.ok), checks });
    checks.push(await healthCheck(this.probes, w));
    if (report().ready) checks.push(await transparentCheck(this.probes, w, w.record));
    if (report().ready) checks.push(this.sink.boundary(w.sandboxId, w.generation));
    if (!report().ready) return report();
    const session = this.unbrokenSession(w);
    if (session !== null) checks.push({ name: "unbroken control session", ok: true, detail: `session ${session} up since before Recovering` });
    else checks.push(await this.probeLimiter.run(() => execProbeCheck(this.probes, w.record)));
    return report();
  }

  /**
   * The control session of this generation that was up when the runtime was lost
   * (Ready → Recovering), when it is still that same session now; else null. Only
   * for a runtime loss: a sandbox adopted at gateway start, or one whose boundary
   * was reported lost, has no such session and always gets the exec probe.
   */
  private unbrokenSession(w: Watched): string | null {
    const r = this.recoveringAt.get(w.sandboxId);
    if (r?.session === undefined) return null;
    return this.sink.liveSession(w.sandboxId, w.generation) === r.session ? r.session : null;
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
    if (isTerminal(workload.verdict) && supervisor.verdict.kind === "Alive") {
      // When both go down together (a daemon stopping its containers), the
      // boundary's failure is the cause to report: give the supervisor's exit a
      // moment to land before blaming the workload.
      await this.pause(this.opts.attributionGraceMs);
      supervisor = await this.verdictFor(w, "supervisor");
    }
    const verdicts: RoleVerdicts = { supervisor: supervisor.verdict, workload: workload.verdict };
    if (!this.registry.isCurrent(sandboxId, w.generation)) {
      this.m.classifications.stale_dropped++;
      return;
    }
    const current = this.sink.current(sandboxId);
    if (!current || current.generation !== w.generation) {
      this.m.classifications.stale_dropped++;
      this.registry.disarm(sandboxId, w.generation);
      return;
    }
    const d = decide(current.phase, verdicts);
    const boundary = this.boundaryPending.get(sandboxId);
    this.boundaryPending.delete(sandboxId);
    switch (d.action) {
      case "fail":
        await this.failClosed(w, { type: "failed", reason: d.reason }, `${d.reason.code}: proven by inspect`);
        return;
      case "complete":
        await this.failClosed(w, { type: "completed" }, "workload exited 0");
        return;
      case "lost":
        await this.lose(w, d.cause);
        return;
      case "verify": {
        const report = await this.reverify(w);
        if (!report.ready) {
          const r = this.recoveringAt.get(sandboxId);
          if (r) r.problem = report.checks.filter((c) => !c.ok).map((c) => `${c.name}: ${c.detail ?? "failed"}`).join("; ");
          this.log.info({ sandboxId, generation: w.generation, checks: report.checks }, "not yet verified; still Recovering");
          return;
        }
        if (!this.registry.isCurrent(sandboxId, w.generation)) return;
        const evidence = report.checks.at(-1)!.name;
        this.log.info({ sandboxId, generation: w.generation, evidence, checks: report.checks }, `re-verified by ${evidence}`);
        if (await this.sink.apply(sandboxId, w.generation, { type: "recovered" }, `re-verified: same instances, boundary healthy, ${evidence === "workload exec probe" ? "exec probe ok" : "unbroken control session (no exec probe)"}`)) {
          this.settleRecovery(sandboxId, true);
        }
        return;
      }
      case "none":
        if (boundary && boundary.generation === w.generation) {
          // A killed supervisor's session drops before Docker has reaped it: look
          // again after the grace; only a supervisor still alive is a boundary loss.
          await this.pause(this.opts.attributionGraceMs);
          const again = await this.verdictFor(w, "supervisor");
          if (again.verdict.kind === "Alive") await this.lose(w, `boundary unhealthy: ${boundary.problem}`, "boundary");
          else this.again.add(sandboxId);
        }
        return;
    }
  }

  /** Ready → Recovering; nothing is stopped. */
  private async lose(w: Watched, cause: string, what: "runtime" | "boundary" = "runtime"): Promise<void> {
    const current = this.sink.current(w.sandboxId);
    if (!current || current.generation !== w.generation) return;
    // The control session up while still Ready: if that very session is still up once
    // both instances check out unchanged, it stands in for the exec probe (reverify).
    const session = what === "runtime" && current.phase === "Ready" ? this.sink.liveSession(w.sandboxId, w.generation) : null;
    if (current.phase === "Ready" && (await this.sink.apply(w.sandboxId, w.generation, { type: "contactLost", cause }, cause))) {
      this.recoveringAt.set(w.sandboxId, { since: Date.now(), cause: what, problem: cause, ...(session === null ? {} : { session }) });
      // Re-verification starts at once (it also runs on every tick while Recovering).
      if (what === "boundary" && this.connected) this.check(w.sandboxId);
    } else if (current.phase === "Recovering" && !this.recoveringAt.has(w.sandboxId)) {
      this.recoveringAt.set(w.sandboxId, { since: this.sink.recoveringSince(w.sandboxId) ?? Date.now(), cause: what, problem: cause });
    }
  }

  private settleRecovery(sandboxId: string, recovered: boolean): void {
    const r = this.recoveringAt.get(sandboxId);
    this.lastRetry.delete(sandboxId);
    if (r === undefined) return;
    this.recoveringAt.delete(sandboxId);
    this.m.recoveringMsTotal += Date.now() - r.since;
    if (recovered) this.m.recovered++;
  }

  /**
   * A proven failure: Error (or Completed) through the sink. The gateway then locks
   * the boundary down and removes the containers, retrying until Docker allows it.
   */
  private async failClosed(w: Watched, event: LifecycleEvent, message: string): Promise<void> {
    const applied = await this.sink.apply(w.sandboxId, w.generation, event, message);
    if (!applied) return; // a stop or delete won, or a newer generation exists: not ours to act on
    this.registry.disarm(w.sandboxId, w.generation);
    this.settleRecovery(w.sandboxId, false);
  }

  /** Deadlines, and re-checks of Recovering sandboxes while Docker answers. */
  private tick(): void {
    const now = Date.now();
    // Only Recovering sandboxes need anything here: idle cost stays flat in N.
    for (const [sandboxId, r] of [...this.recoveringAt]) {
      const w = this.registry.get(sandboxId);
      const current = this.sink.current(sandboxId);
      if (!w || !current || current.phase !== "Recovering" || current.generation !== w.generation) {
        this.settleRecovery(sandboxId, false);
        continue;
      }
      // A lost boundary has its own (shorter) deadline while Docker answers; without
      // Docker the runtime deadline applies whatever the cause.
      const deadlineMs = r.cause === "boundary" && this.connected ? this.opts.boundaryDeadlineMs : this.opts.recoveryDeadlineMs;
      if (now - r.since > deadlineMs) {
        const seconds = Math.round(deadlineMs / 1000);
        const reason = this.connected
          ? ({ code: "BoundaryUnhealthy", detail: `boundary not re-verified within ${seconds} s${r.problem ? ` (${r.problem})` : ""}` } as const)
          : ({ code: "RuntimeUnavailable", detail: `Docker unreachable for more than ${seconds} s` } as const);
        if (!this.inflight.has(sandboxId)) {
          const p = this.failClosed(w, { type: "failed", reason }, reason.detail).finally(() => this.inflight.delete(sandboxId));
          this.inflight.set(sandboxId, p);
        }
        continue;
      }
      if (this.connected && now - (this.lastRetry.get(sandboxId) ?? 0) >= this.opts.retryIntervalMs) {
        this.lastRetry.set(sandboxId, now);
        this.check(sandboxId);
      }
    }
  }

  private readonly lastRetry = new Map<string, number>();
}
