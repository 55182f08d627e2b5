// Orchestrates sandbox lifecycles: validates intents against the state machine,
// persists them with a compare-and-set first, then does the runtime work in a
// per-sandbox serial queue. Runtime results are applied only if the sandbox is
// still at the generation and phase they were computed for.

import { randomBytes } from "node:crypto";
import type { Logger } from "pino";
import type { ComputeDriver, ExecOptions, ExecSession, LaunchRequest, ReadinessReport, RuntimeMonitor, RuntimeRecord } from "../../driver/contract.js";
import { transition, type LifecycleState } from "../../lifecycle/machine.js";
import type { LifecycleEvent, UserEvent } from "../../lifecycle/phases.js";
import { DEFAULT_RESOURCES, checkSandboxName, type SandboxSpec } from "../../lifecycle/spec.js";
import {
  changedFixedSections,
  defaultPolicy,
  evaluate,
  parsePolicyYaml,
  policyFromObject,
  type Decision,
  type EgressRequest,
  type Policy,
} from "../../policy/index.js";
import type { MonitorSink } from "../../driver/monitor-sink.js";
import { DuplicateNameError, type SandboxRecord, type Store } from "../../store/store.js";
import type { BoundaryHealth } from "../control/boundary.js";
import type { ControlPlane } from "../control/control-plane.js";
import { ApiError, notFound } from "../errors.js";
import { KeyedSerial } from "../../util/keyed-serial.js";

export interface CreateInput {
  name: string;
  image?: string;
  command?: string[];
  env?: Record<string, string>;
  resources?: Partial<SandboxSpec["resources"]>;
  /** Policy as YAML text or as an object; default: deny all egress. */
  policy?: string | Record<string, unknown>;
}

export interface ServiceOptions {
  /** How long readiness evidence may take to appear after the containers start. */
  readyTimeoutMs?: number;
  /** How long a sandbox may stay Recovering before it fails closed. Default 60 s. */
  recoveryDeadlineMs?: number;
}

/** Phases in which the policy may change (never while Recovering: new work waits for re-verification). */
const POLICY_PHASES: SandboxRecord["phase"][] = ["Provisioning", "Ready", "Stopped", "Completed", "Error"];

/** Phases in which a launch may hold a control session. */
const SESSION_PHASES = new Set(["Provisioning", "Ready", "Recovering"]);

function parsePolicyInput(input: CreateInput["policy"]): Policy {
  if (input === undefined) return defaultPolicy();
  const parsed = typeof input === "string" ? parsePolicyYaml(input) : policyFromObject(input);
  if (!parsed.ok) throw new ApiError("invalid_request", `invalid policy: ${parsed.errors.join("; ")}`);
  return parsed.policy;
}

/**
 * The filesystem section maps to mounts: the root filesystem is read-only,
 * /sandbox (the workspace) and /tmp are writable, each other readWrite path
 * gets a tmpfs. A readOnly path inside a writable one cannot be honoured, and
 * the process never runs as root.
 */
function checkFilesystemPolicy(policy: Policy): string | null {
  const writable = ["/sandbox", "/tmp", ...policy.filesystem.readWrite];
  for (const [i, p] of policy.filesystem.readOnly.entries()) {
    const inside = writable.find((w) => p === w || p.startsWith(`${w}/`));
    if (inside) return `filesystem.readOnly[${i}]: ${JSON.stringify(p)} is inside the writable ${inside}`;
  }
  for (const [i, p] of policy.filesystem.readWrite.entries()) {
    if (p === "/" || p === "/proc" || p.startsWith("/proc/") || p === "/dev" || p.startsWith("/dev/") || p === "/sys" || p.startsWith("/sys/")) {
      return `filesystem.readWrite[${i}]: ${JSON.stringify(p)} cannot be made writable`;
    }
  }
  const uid = policy.process.user?.split(":")[0];
  if (uid === "0") return "process.user: the workload never runs as root (uid 0)";
  return null;
}

const newId = (): string => `sbx_${randomBytes(8).toString("hex")}`;
const newNonce = (): string => randomBytes(12).toString("hex");
const stateOf = (s: SandboxRecord): LifecycleState => ({ phase: s.phase, generation: s.generation, reason: s.reason });
const message = (err: unknown): string => (err instanceof Error ? err.message : String(err));

export class SandboxService {
  private readonly serial = new KeyedSerial();
  private readonly readyTimeoutMs: number;
  private closed = false;
  /** Why the runtime cannot launch sandboxes yet (images, Docker unreachable); null when ready. */
  private runtimeProblem: string | null = "the runtime is being prepared";
  private preparing: Promise<void> | undefined;
  readonly monitor: RuntimeMonitor | null;
  /** Launches in flight: the nonce a supervisor must present before its runtime is recorded. */
  private readonly launching = new Map<string, { generation: number; nonce: string }>();
  private control: ControlPlane | null = null;

  constructor(
    readonly store: Store,
    readonly driver: ComputeDriver,
    private readonly log: Logger,
    opts: ServiceOptions = {},
  ) {
    this.readyTimeoutMs = opts.readyTimeoutMs ?? 30_000;
    this.monitor = driver.watch(this.sink(), { recoveryDeadlineMs: opts.recoveryDeadlineMs });
  }

  /** Attach the supervisors' control plane: readiness and recovery then require a healthy boundary. */
  attachControl(control: ControlPlane): void {
    this.control = control;
    control.boundary.onAudit((id, generation, event) => {
      const s = this.store.get(id);
      if (!s) return;
      const target = `${event.method ?? event.protocol.toUpperCase()} ${event.host}:${event.port}${event.path ?? ""}`;
      this.store.appendEvent({ id, name: s.name, generation }, "audit", `egress ${event.decision} ${target}${event.reason ? ` (${event.reason})` : ""}`, event);
    });
  }

  /** The launch a supervisor of this sandbox must prove it belongs to, or null. */
  expectedLaunch(id: string): { generation: number; nonce: string } | null {
    const s = this.store.get(id);
    if (!s || !SESSION_PHASES.has(s.phase)) return null;
    const pending = this.launching.get(id);
    if (pending?.generation === s.generation) return pending;
    if (s.runtime?.generation === s.generation) return { generation: s.generation, nonce: s.runtime.nonce };
    return null;
  }

  boundaryOf(id: string): BoundaryHealth | null {
    return this.control?.boundary.health(id) ?? null;
  }

  /** Readiness evidence from the runtime, plus the boundary's own proof when supervisors report in. */
  private async evidence(req: LaunchRequest, record: RuntimeRecord): Promise<ReadinessReport> {
    const report = await this.driver.verify(req, record);
    if (!this.control) return report;
    const h = this.control.boundary.health(req.sandboxId);
    const ok = h.healthy && h.generation === req.generation;
    const detail = ok ? undefined : (h.problem ?? `session of generation ${h.generation ?? "none"}, launch is generation ${req.generation}`);
    const checks = [...report.checks, detail === undefined ? { name: "control session", ok } : { name: "control session", ok, detail }];
    return { ready: report.ready && ok, checks };
  }

  /** What the runtime monitor may read and do; every write is a compare-and-set. */
  private sink(): MonitorSink {
    return {
      current: (id) => {
        const s = this.store.get(id);
        return s ? { phase: s.phase, generation: s.generation } : null;
      },
      apply: async (id, generation, event, msg) => {
        let applied = false;
        await this.serial.run(
          id,
          async () => {
            applied = this.observe(id, generation, event, msg) !== null;
          },
          (err) => this.log.error({ sandboxId: id, err: message(err) }, "monitor observation failed"),
        );
        return applied;
      },
      verify: async (id, generation) => {
        const s = this.store.get(id);
        if (!s?.runtime || s.generation !== generation) return { ready: false, checks: [{ name: "record", ok: false, detail: "no runtime recorded for this generation" }] };
        return this.evidence(this.launchRequestOf(s), s.runtime);
      },
      teardown: (id, generation) =>
        this.serial.run(
          id,
          async () => {
            await this.driver.stop(id, generation);
            const s = this.store.get(id);
            if (s && s.generation === generation && (s.phase === "Error" || s.phase === "Completed")) this.store.setRuntime(id, { phase: s.phase, generation }, null);
            this.log.info({ sandboxId: id, generation }, "workload stopped (fail closed)");
          },
          (err) => {
            throw err;
          },
        ),
      owedTeardowns: () =>
        this.store
          .list()
          .filter((s) => (s.phase === "Error" || s.phase === "Completed") && s.runtime !== null)
          .map((s) => ({ sandboxId: s.id, generation: s.generation })),
      recoveringSince: (id) => {
        const at = this.store.enteredPhaseAt(id, "Recovering");
        return at === null ? undefined : Date.parse(at);
      },
    };
  }

  private launchRequestOf(s: SandboxRecord): LaunchRequest {
    return { sandboxId: s.id, name: s.name, generation: s.generation, nonce: s.runtime?.nonce ?? "", spec: s.spec, policy: this.activePolicy(s) };
  }

  private activePolicy(s: SandboxRecord): { revision: number; policy: Policy } {
    const p = this.store.policy(s.id);
    return p ? { revision: p.revision, policy: p.policy } : { revision: 1, policy: s.spec.policy };
  }

  /**
   * Prepare the runtime (images, shared networks). Resolves after the first
   * attempt; if that failed, keeps retrying in the background, so a gateway can
   * start, adopt its sandboxes and wait while Docker is away.
   */
  async prepareRuntime(onProgress?: (msg: string) => void, retryMs = 2_000): Promise<void> {
    const attempt = async (): Promise<boolean> => {
      try {
        await this.driver.prepare(onProgress);
        const address = this.driver.controlAddress();
        if (this.control && address) await this.control.listen(address);
        this.runtimeProblem = null;
        return true;
      } catch (err) {
        this.runtimeProblem = message(err);
        this.log.warn({ err: this.runtimeProblem }, "runtime not ready; retrying in the background");
        return false;
      }
    };
    if (await attempt()) return;
    this.preparing = (async () => {
      while (!this.closed && !(await attempt())) await new Promise((r) => setTimeout(r, retryMs));
    })();
  }

  runtimeStatus(): { ready: boolean; problem: string | null } {
    return { ready: this.runtimeProblem === null, problem: this.runtimeProblem };
  }

  private assertRuntime(): void {
    if (this.runtimeProblem !== null) throw new ApiError("unavailable", `the runtime is not ready: ${this.runtimeProblem}`);
  }

  /** Monitoring counters for `gateway status`. */
  metrics(): object | null {
    return this.monitor?.metrics() ?? null;
  }

  get(nameOrId: string): SandboxRecord {
    const s = this.store.get(nameOrId);
    if (!s) throw notFound(nameOrId);
    return s;
  }

  list(): SandboxRecord[] {
    return this.store.list();
  }

  create(input: CreateInput): SandboxRecord {
    this.assertOpen();
    this.assertRuntime();
    const bad = checkSandboxName(input.name);
    if (bad) throw new ApiError("invalid_request", bad);
    const policy = parsePolicyInput(input.policy);
    const fsProblem = checkFilesystemPolicy(policy);
    if (fsProblem) throw new ApiError("invalid_request", `invalid policy: ${fsProblem}`);
    const spec: SandboxSpec = {
      env: input.env ?? {},
      // Explicit resources win over the policy's process limits, which win over the defaults.
      resources: { ...DEFAULT_RESOURCES, ...policy.process.limits, ...input.resources },
      policy,
    };
    if (input.image !== undefined) spec.image = input.image;
    if (input.command !== undefined) spec.command = input.command;
    let sandbox: SandboxRecord;
    try {
      sandbox = this.store.createSandbox({ id: newId(), name: input.name, spec });
    } catch (err) {
      if (err instanceof DuplicateNameError) throw new ApiError("already_exists", err.message);
      throw err;
    }
    this.log.info({ sandboxId: sandbox.id, name: sandbox.name, generation: 1 }, "sandbox created");
    this.enqueueLaunch(sandbox);
    return sandbox;
  }

  /** A user intent: validated by the state machine, persisted, then carried out. */
  request(nameOrId: string, intent: UserEvent): SandboxRecord {
    this.assertOpen();
    const before = this.get(nameOrId);
    if (intent === "start") this.assertRuntime();
    const after = this.apply(before, { type: intent }, `${intent} requested`);
    // The intent is persisted: cancel monitoring before any runtime work, so the
    // exit this causes is never reported as a crash.
    if (intent !== "start") {
      this.monitor?.disarm(after.id);
      if (intent === "delete") this.control?.boundary.forget(after.id);
      else this.control?.boundary.disconnect(after.id, "sandbox stopping");
    }
    this.log.info({ sandboxId: after.id, name: after.name, generation: after.generation, intent }, "intent accepted");
    if (intent === "start") this.enqueueLaunch(after);
    else if (intent === "stop") this.enqueueStop(after);
    else this.enqueueDelete(after);
    return after;
  }

  policyOf(nameOrId: string): { sandbox: SandboxRecord; revision: number; policy: Policy; hash: string; createdAt: string; boundary: BoundaryHealth | null } {
    const s = this.get(nameOrId);
    const p = this.store.policy(s.id);
    const active = p ?? { revision: 1, policy: s.spec.policy, hash: "", createdAt: s.createdAt };
    return { sandbox: s, ...active, boundary: this.boundaryOf(s.id) };
  }

  /**
   * Accept a new policy revision. Invalid input changes nothing; while the
   * sandbox runs, it is pushed to the supervisor over its authenticated session.
   */
  setPolicy(nameOrId: string, input: string | Record<string, unknown>): { revision: number; pushed: boolean } {
    this.assertOpen();
    const s = this.get(nameOrId);
    if (!POLICY_PHASES.includes(s.phase)) {
      throw new ApiError(
        "not_allowed",
        `cannot change the policy of sandbox "${s.name}": it is ${s.phase}; policy changes are allowed from ${POLICY_PHASES.slice(0, -1).join(", ")} or ${POLICY_PHASES.at(-1)!}`,
      );
    }
    const next = parsePolicyInput(input);
    const fixed = changedFixedSections(this.activePolicy(s).policy, next);
    if (fixed.length > 0) {
      throw new ApiError("invalid_request", `invalid policy: ${fixed.join(" and ")} ${fixed.length > 1 ? "are" : "is"} fixed at creation and cannot change`);
    }
    const revision = this.store.addPolicy(s, next);
    const live = s.phase === "Provisioning" || s.phase === "Ready";
    const pushed = live && !!this.control?.boundary.setDesired(s.id, s.generation, next, revision);
    this.log.info({ sandboxId: s.id, revision, pushed }, "policy revision accepted");
    return { revision, pushed };
  }

  async waitForPolicy(id: string, revision: number, timeoutMs: number): Promise<{ enforced: boolean; boundary: BoundaryHealth | null }> {
    if (!this.control) return { enforced: false, boundary: null };
    const r = await this.control.boundary.waitForRevision(id, revision, timeoutMs);
    return { enforced: r.reached, boundary: r.health };
  }

  /** Dry run: what the active policy decides for a URL (the address check happens at resolution, in the proxy). */
  checkPolicy(nameOrId: string, url: string, method = "GET"): { revision: number; request: EgressRequest; decision: Decision } {
    const { revision, policy } = this.policyOf(nameOrId);
    let u: URL;
    try {
      u = new URL(url);
    } catch {
      throw new ApiError("invalid_request", `url: not an absolute URL: ${JSON.stringify(url)}`);
    }
    if (u.protocol !== "http:" && u.protocol !== "https:") throw new ApiError("invalid_request", `url: expected http:// or https://, got ${u.protocol}`);
    const https = u.protocol === "https:";
    const request: EgressRequest = https
      ? { host: u.hostname, port: Number(u.port || 443), protocol: "https" }
      : { host: u.hostname, port: Number(u.port || 80), protocol: "http", method: method.toUpperCase(), path: u.pathname };
    return { revision, request, decision: evaluate(policy, request) };
  }

  async exec(nameOrId: string, opts: ExecOptions): Promise<ExecSession> {
    const s = this.get(nameOrId);
    if (s.phase !== "Ready" || !s.runtime) {
      throw new ApiError("not_allowed", `cannot exec in sandbox "${s.name}": it is ${s.phase}; exec needs Ready`);
    }
    return this.driver.exec(s.runtime, opts);
  }

  /** Lifecycle tasks queued or running (for leak checks). */
  pendingTasks(): number {
    return this.serial.size;
  }

  /** Resolves when no lifecycle work is queued or running. */
  idle(): Promise<void> {
    return this.serial.idle();
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.monitor?.close();
    await this.preparing;
    await this.serial.idle();
  }

  private assertOpen(): void {
    if (this.closed) throw new ApiError("unavailable", "the gateway is shutting down");
  }

  /** Validate and compare-and-set one event; throws ApiError when refused or lost. */
  private apply(s: SandboxRecord, event: LifecycleEvent, msg: string): SandboxRecord {
    const t = transition(stateOf(s), event, s.generation, s.name);
    if (!t.ok) throw new ApiError(t.code, t.message);
    const runtime = event.type === "start" ? null : undefined;
    const after = this.store.transition(s.id, {
      expect: { phase: s.phase, generation: s.generation },
      next: t.next,
      message: msg,
      runtime,
    });
    if (!after) {
      const now = this.store.get(s.id);
      throw new ApiError(
        "not_allowed",
        `sandbox "${s.name}" changed while ${event.type} was being applied (now ${now?.phase ?? "deleted"}); try again`,
      );
    }
    return after;
  }

  /**
   * Apply an observation made for `generation` only if the sandbox is still at
   * that generation and in a phase the event is accepted from. Returns null
   * when the observation is stale or lost the race; that is not an error.
   */
  private observe(id: string, generation: number, event: LifecycleEvent, msg: string, runtime?: null): SandboxRecord | null {
    const s = this.store.get(id);
    if (!s) return null;
    const t = transition(stateOf(s), event, generation, s.name);
    if (!t.ok) {
      this.log.info({ sandboxId: id, generation, event: event.type, phase: s.phase, current: s.generation }, `observation dropped: ${t.message}`);
      return null;
    }
    return this.store.transition(id, { expect: { phase: s.phase, generation }, next: t.next, message: msg, runtime });
  }

  /** Still the generation and phase this task was started for? */
  private isCurrent(id: string, generation: number, phase: SandboxRecord["phase"]): boolean {
    const s = this.store.get(id);
    return !!s && s.generation === generation && s.phase === phase;
  }

  private progress(s: SandboxRecord, generation: number) {
    return (msg: string): void => {
      this.store.appendEvent({ id: s.id, name: s.name, generation }, "info", msg);
    };
  }

  private enqueueLaunch(s: SandboxRecord): void {
    const generation = s.generation;
    const req: LaunchRequest = { sandboxId: s.id, name: s.name, generation, nonce: newNonce(), spec: s.spec, policy: this.activePolicy(s) };
    this.launching.set(s.id, { generation, nonce: req.nonce });
    void this.serial
      .run(
        s.id,
        () => this.launch(s, req),
        (err) => this.log.error({ err, sandboxId: s.id, generation }, "launch task failed"),
      )
      .finally(() => {
        if (this.launching.get(s.id)?.nonce === req.nonce) this.launching.delete(s.id);
      });
  }

  private async launch(s: SandboxRecord, req: LaunchRequest): Promise<void> {
    const { sandboxId: id, generation } = req;
    if (!this.isCurrent(id, generation, "Provisioning")) return;
    const progress = this.progress(s, generation);
    try {
      // A new generation never shares containers with an older one.
      if (generation > 1) await this.driver.stop(id, generation - 1);
      if (this.control) {
        req.control = await this.control.launchControl(req);
        this.control.boundary.setDesired(id, generation, req.policy.policy, req.policy.revision);
      }
      await this.driver.provision(req, progress);
      if (!this.isCurrent(id, generation, "Provisioning")) return;
      const record = await this.driver.start(req, progress);
      // Persist the identities before trusting them: recovery re-verifies against these.
      if (!this.store.setRuntime(id, { phase: "Provisioning", generation }, record)) return;
      progress("verifying readiness");
      const report = await this.waitReady(req, record);
      if (!report.ready) {
        const failed = report.checks.filter((c) => !c.ok).map((c) => `${c.name}: ${c.detail ?? "failed"}`);
        throw new Error(`not ready after ${this.readyTimeoutMs} ms (${failed.join("; ")})`);
      }
      const ready = this.observe(id, generation, { type: "ready" }, "readiness verified");
      if (ready) {
        this.log.info({ sandboxId: id, generation, record }, "sandbox ready");
        this.monitor?.arm({ sandboxId: id, name: s.name, generation, record });
      }
    } catch (err) {
      const detail = message(err);
      const failed = this.observe(id, generation, { type: "provisionFailed", detail }, detail);
      this.log.warn({ sandboxId: id, generation, err: detail }, failed ? "provisioning failed" : "provisioning aborted");
      // Leave nothing running behind a failed launch.
      await this.driver.stop(id, generation).catch((e: unknown) =>
        this.log.error({ sandboxId: id, generation, err: message(e) }, "cleanup after failed provisioning failed"),
      );
    }
  }

  private async waitReady(req: LaunchRequest, record: NonNullable<SandboxRecord["runtime"]>) {
    const deadline = Date.now() + this.readyTimeoutMs;
    for (let delay = 50; ; delay = Math.min(delay * 2, 500)) {
      const report = await this.evidence(req, record);
      if (report.ready || Date.now() + delay > deadline || !this.isCurrent(req.sandboxId, req.generation, "Provisioning")) {
        return report;
      }
      await new Promise((r) => setTimeout(r, delay));
    }
  }

  /**
   * A persisted stop or delete is carried out even if the runtime is away for a
   * while: retry with capped backoff while the intent still stands.
   */
  private async untilDone(s: SandboxRecord, what: string, work: () => Promise<void>, stillWanted: () => boolean): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      try {
        await work();
        return;
      } catch (err) {
        if (this.closed || !stillWanted()) throw err;
        if (attempt === 0) this.store.appendEvent({ id: s.id, name: s.name, generation: s.generation }, "info", `${what} is waiting for the runtime: ${message(err)}`);
        this.log.warn({ sandboxId: s.id, attempt, err: message(err) }, `${what} failed; retrying`);
        await new Promise((r) => setTimeout(r, Math.min(5000, 200 * 2 ** attempt)));
      }
    }
  }

  private enqueueStop(s: SandboxRecord): void {
    const { id, generation } = s;
    void this.serial.run(
      id,
      async () => {
        if (!this.isCurrent(id, generation, "Stopping")) return;
        await this.untilDone(s, "stop", () => this.driver.stop(id, generation), () => this.isCurrent(id, generation, "Stopping"));
        this.observe(id, generation, { type: "stopped" }, "containers removed; workspace kept", null);
      },
      (err) => {
        this.log.error({ sandboxId: id, generation, err: message(err) }, "stop failed; sandbox stays Stopping");
        this.store.appendEvent({ id, name: s.name, generation }, "info", `stop failed: ${message(err)}`);
      },
    );
  }

  private enqueueDelete(s: SandboxRecord): void {
    const { id, generation } = s;
    void this.serial.run(
      id,
      async () => {
        if (!this.isCurrent(id, generation, "Deleting")) return;
        await this.untilDone(s, "delete", () => this.driver.remove(id), () => this.isCurrent(id, generation, "Deleting"));
        this.store.deleteSandbox(id, { generation });
        this.log.info({ sandboxId: id, name: s.name }, "sandbox deleted");
      },
      (err) => {
        this.log.error({ sandboxId: id, generation, err: message(err) }, "delete failed; sandbox stays Deleting");
        this.store.appendEvent({ id, name: s.name, generation }, "info", `delete failed: ${message(err)}`);
      },
    );
  }

  /**
   * On gateway start: finish intents a previous gateway persisted but did not
   * complete, and adopt running sandboxes through the same verification path as
   * recovery (nothing is torn down just because the gateway restarted).
   */
  resume(): void {
    for (const s of this.store.list()) {
      if ((s.phase === "Ready" || s.phase === "Recovering") && s.runtime && this.monitor) {
        // The desired policy lives in the store: supervisors that reconnect get it pushed again.
        const p = this.activePolicy(s);
        this.control?.boundary.setDesired(s.id, s.generation, p.policy, p.revision);
        if (s.phase === "Ready") this.observe(s.id, s.generation, { type: "contactLost", cause: "gateway restarted: re-verifying" }, "gateway restarted: re-verifying before trusting");
        this.monitor.arm({ sandboxId: s.id, name: s.name, generation: s.generation, record: s.runtime });
        continue;
      }
      if (s.phase === "Stopping") this.enqueueStop(s);
      else if (s.phase === "Deleting") this.enqueueDelete(s);
      else if (s.phase === "Provisioning") {
        // The launch was cut short; its half-made runtime cannot be trusted.
        const detail = "the gateway restarted during provisioning";
        if (this.observe(s.id, s.generation, { type: "provisionFailed", detail }, detail)) {
          void this.serial.run(s.id, () => this.driver.stop(s.id, s.generation), (err) =>
            this.log.error({ sandboxId: s.id, err: message(err) }, "cleanup of an interrupted launch failed"),
          );
        }
      }
    }
    this.monitor?.start();
  }
}
