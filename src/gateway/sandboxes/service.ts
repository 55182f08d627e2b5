// What users may ask of sandboxes: create, start, stop, delete, change the
// policy, dry-run it, exec. Each intent is validated by the state machine and
// persisted with a compare-and-set first (LifecycleController); the runtime work
// then runs in the sandbox's serial queue (LifecycleTasks).

import { randomBytes } from "node:crypto";
import type { Logger } from "pino";
import type { ComputeDriver, ExecOptions, ExecSession } from "../../driver/contract.js";
import { policyChangeRefused } from "../../lifecycle/machine.js";
import { LIVE_PHASES, type Phase, type UserEvent } from "../../lifecycle/phases.js";
import { DEFAULT_RESOURCES, checkSandboxName, type SandboxSpec } from "../../lifecycle/spec.js";
import { DEFAULT_DISK_BYTES, checkDiskBytes, parseDiskSize } from "../../lifecycle/disk-size.js";
import { checkLabels } from "../../lifecycle/labels.js";
import { changedFixedSections, evaluate, policyHash, type Decision, type EgressRequest, type Policy } from "../../policy/index.js";
import { DuplicateNameError, type Transaction, type SandboxRecord, type Store } from "../../store/contract.js";
import type { BoundaryHealth } from "../control/boundary.js";
import type { ControlPlane } from "../control/control-plane.js";
import { ApiError } from "../errors.js";
import type { LifecycleController } from "./controller.js";
import type { Generations } from "./generations.js";
import { checkFilesystemPolicy, parsePolicyInput } from "./policy-input.js";
import { timeSpec, type CreateTimeOptions } from "./create-options.js";
import { checkHostName, place } from "../../lifecycle/placement.js";
import type { SandboxReadModel } from "./read-model.js";
import type { RuntimeGate } from "./runtime-gate.js";
import { activePolicy, type LifecycleTasks } from "./tasks.js";

export interface CreateInput extends CreateTimeOptions {
  name: string;
  image?: string;
  command?: string[];
  env?: Record<string, string>;
  resources?: Partial<SandboxSpec["resources"]>;
  /** Workspace size: "512M", "10G", "1GiB" or bytes; default DEFAULT_DISK_BYTES. */
  disk?: string | number;
  /** Policy as YAML text or as an object; default: deny all egress. */
  policy?: string | Record<string, unknown>;
  /** The user's labels; kept in the store only, never on containers (src/lifecycle/labels.ts). */
  labels?: Record<string, string>;
  /** In a fleet, the host to run it on (src/lifecycle/placement.ts); default: this gateway's. */
  host?: string;
}

export interface ServiceOptions {
  /** How long readiness evidence may take to appear after the containers start. */
  readyTimeoutMs?: number;
  /** How long a sandbox may stay Recovering after losing Docker before it fails closed. Default RECOVERY_DEADLINE_DEFAULT_S. */
  recoveryDeadlineMs?: number;
  /** How long it may stay Recovering after its boundary was reported unhealthy (Docker answering). Default 30 s. */
  boundaryDeadlineMs?: number;
  /** How often a Recovering sandbox is re-checked while Docker answers. Default 1 s. */
  recoveryRetryMs?: number;
  /** Detached execs kept per sandbox (DetachedExecs). Default 32. */
  detachedExecs?: number;
  /** Launches at once (gateway start --launch-concurrency); default DEFAULT_LAUNCH_CONCURRENCY. */
  launchConcurrency?: number;
}

export interface ServiceDeps {
  store: Store;
  driver: ComputeDriver;
  control: ControlPlane | null;
  controller: LifecycleController;
  generations: Generations;
  tasks: LifecycleTasks;
  runtime: RuntimeGate;
  read: SandboxReadModel;
  log: Logger;
}

/** The labels of a create request, checked again here (the API schema checks them first): null when valid. */
function checkLabelsInput(labels: unknown): string | null {
  if (labels === undefined) return null;
  if (typeof labels !== "object" || labels === null || Array.isArray(labels)) return "labels: must be an object of KEY: VALUE strings";
  const bad = checkLabels(labels as Record<string, unknown>);
  return bad ? `labels: ${bad}` : null;
}

const newId = (): string => `sbx_${randomBytes(8).toString("hex")}`;

export class SandboxService {
  #closed = false;

  constructor(private readonly d: ServiceDeps) {}

  async create(input: CreateInput): Promise<SandboxRecord> {
    this.#assertOpen();
    this.d.runtime.assertReady();
    const bad = checkSandboxName(input.name) ?? checkLabelsInput(input.labels);
    if (bad) throw new ApiError("invalid_request", bad);
    const policy = parsePolicyInput(input.policy);
    const problem = checkFilesystemPolicy(policy) ?? this.#userProblem(policy);
    if (problem) throw new ApiError("invalid_request", `invalid policy: ${problem}`);
    let diskBytes = DEFAULT_DISK_BYTES;
    if (typeof input.disk === "string") {
      const d = parseDiskSize(input.disk);
      if (!d.ok) throw new ApiError("invalid_request", `disk: ${d.error}`);
      diskBytes = d.bytes;
    } else if (input.disk !== undefined) {
      const bad = checkDiskBytes(input.disk);
      if (bad) throw new ApiError("invalid_request", `disk: ${bad}`);
      diskBytes = input.disk;
    }
    const spec: SandboxSpec = {
      env: input.env ?? {},
      // Explicit resources win over the policy's process limits, which win over the defaults.
      resources: { ...DEFAULT_RESOURCES, ...policy.process.limits, ...input.resources },
      diskBytes,
      ...timeSpec(input),
    };
    if (input.image !== undefined) spec.image = input.image;
    if (input.command !== undefined) spec.command = input.command;
    // What the runtime can tell now (an image it lacks, more CPUs than its host has, a disk
    // its filesystem cannot hold) is refused before anything is stored, as docker run does.
    const refused = (await this.d.driver.checkSpec?.(spec)) ?? null;
    if (refused !== null) throw new ApiError("invalid_request", refused);
    const host = await this.#place(input.host);
    this.#assertOpen();
    let sandbox: SandboxRecord;
    try {
      sandbox = await this.d.store.createSandbox({
        id: newId(),
        name: input.name,
        spec,
        policy,
        policySource: typeof input.policy === "string" ? input.policy : null,
        labels: input.labels ?? {},
        host,
      });
    } catch (err) {
      if (err instanceof DuplicateNameError) throw new ApiError("already_exists", err.message);
      throw err;
    }
    this.d.log.info({ sandboxId: sandbox.id, name: sandbox.name, generation: 1, host }, "sandbox created");
    // Another host's gateway launches it when the row's event reaches it (lifecycle.ts: handoff).
    if (this.d.read.scope.drives(sandbox)) this.d.tasks.launch(sandbox);
    return sandbox;
  }

  /** The host a new sandbox runs on: this gateway's, or the one asked for if a gateway drives it now. */
  async #place(requested: string | undefined): Promise<string> {
    const self = this.d.read.scope.name;
    const fleet = requested === undefined || requested === self ? null : this.d.store.fleet;
    const p = place(requested, self, fleet === null ? null : await fleet.hosts());
    if (!p.ok) throw new ApiError(requested !== undefined && checkHostName(requested) !== null ? "invalid_request" : "not_allowed", p.error);
    return p.host;
  }

  /**
   * A user intent: validated by the state machine and persisted. Persisting it
   * settles the generation's handle at once (monitor disarmed, session closed), so
   * the exit the runtime work then causes is never reported as a crash.
   */
  async request(nameOrId: string, intent: UserEvent, expect: { generation?: number } = {}): Promise<SandboxRecord> {
    this.#assertOpen();
    const before = await this.d.read.driven(nameOrId);
    // A precondition (e.g. `sandbox prune`: the generation it saw ended): the compare-and-set
    // below is on this very read, so the intent applies only to what the caller saw.
    if (expect.generation !== undefined && before.generation !== expect.generation) {
      throw new ApiError("stale_generation", `sandbox "${before.name}" is at generation ${before.generation}, not ${expect.generation} as the request expects; nothing was done`);
    }
    if (intent === "start") {
      this.d.runtime.assertReady();
      // Each launch: a host account may have taken the policy's ids since the sandbox was made.
      const problem = this.#userProblem((await activePolicy(this.d.store, before.id)).policy);
      if (problem !== null) throw new ApiError("invalid_request", `sandbox "${before.name}" cannot start: ${problem}; delete it and create it with other ids`);
    }
    const after = await this.d.controller.intent(before, { type: intent }, `${intent} requested`);
    this.d.log.info({ sandboxId: after.id, name: after.name, generation: after.generation, intent }, "intent accepted");
    if (intent === "start") this.d.tasks.launch(after);
    else if (intent === "stop") this.d.tasks.stop(after);
    else this.d.tasks.delete(after);
    return after;
  }

  /**
   * A policy change checked as `policy set` checks it (parsed and validated, the fixed
   * sections unchanged against the active revision), without making it: a policy proposal
   * is checked here before it is stored.
   */
  async checkPolicyChange(nameOrId: string, input: string | Record<string, unknown>): Promise<{ sandbox: SandboxRecord; policy: Policy; activeRevision: number }> {
    const s = await this.d.read.get(nameOrId);
    const next = parsePolicyInput(input);
    const active = await activePolicy(this.d.store, s.id);
    const fixed = changedFixedSections(active.policy, next);
    // process.user is fixed, so it was checked at create; a host account that took its ids since
    // keeps the sandbox from being launched again (start), never from getting a tighter policy.
    // A change to it is refused, and named when it names a host account.
    const problems = [fixed.includes("process") ? this.#userProblem(next) : null, fixed.length > 0 ? `${fixed.join(" and ")} ${fixed.length > 1 ? "are" : "is"} fixed at creation and cannot change` : null];
    const named = problems.filter((p) => p !== null);
    if (named.length > 0) throw new ApiError("invalid_request", `invalid policy: ${named.join("; ")}`);
    return { sandbox: s, policy: next, activeRevision: active.revision };
  }

  /**
   * Accept a new policy revision. Invalid input changes nothing; while the
   * sandbox runs (Recovering included), it is pushed to the supervisor over its
   * authenticated session. `phase`: the sandbox's phase when it was accepted.
   * `expectRevision`: only while that revision is active (else StaleRevisionError, nothing
   * changed); `within` runs in the transaction that records the revision (an approval).
   */
  async setPolicy(
    nameOrId: string,
    input: string | Record<string, unknown>,
    opts: { expectRevision?: number; within?: (revision: number, tx: Transaction) => Promise<void> } = {},
  ): Promise<{ revision: number; pushed: boolean; phase: Phase }> {
    this.#assertOpen();
    const s = await this.d.read.driven(nameOrId);
    const refused = policyChangeRefused(s.phase, s.name);
    if (refused) throw new ApiError("not_allowed", refused);
    const { policy: next } = await this.checkPolicyChange(s.id, input);
    // A direct set (not an approval, which records its own) is a record in the audit
    // trail, committed with the revision: every policy change is accounted for.
    const within =
      opts.within ??
      (async (revision: number, tx: Transaction): Promise<void> => {
        const time = new Date().toISOString();
        await tx.appendAudit([{ sandboxId: s.id, generation: s.generation, time, decision: "policy", count: 1, event: { type: "policy_set", action: "set", by: "api", revision, hash: policyHash(next), time } }]);
      });
    const revision = await this.d.store.addPolicy(s, next, typeof input === "string" ? input : null, { ...opts, within });
    // Recovering too: the control session needs no Docker, and recovery waits for this ack.
    const live = LIVE_PHASES.includes(s.phase);
    const pushed = live && (this.d.generations.get(s.id, s.generation)?.desire(next, revision) ?? false);
    this.d.log.info({ sandboxId: s.id, revision, pushed, phase: s.phase }, "policy revision accepted");
    return { revision, pushed, phase: s.phase };
  }

  /**
   * Waits for the supervisor's ack of `revision`: it is enforced, and the connections it
   * does not allow are closed (connectionsClosed says how many; null when unknown).
   */
  async waitForPolicy(id: string, revision: number, timeoutMs: number): Promise<{ enforced: boolean; boundary: BoundaryHealth | null; connectionsClosed: number | null }> {
    if (!this.d.control) return { enforced: false, boundary: null, connectionsClosed: null };
    const r = await this.d.control.boundary.waitForRevision(id, revision, timeoutMs);
    return { enforced: r.reached, boundary: r.health, connectionsClosed: r.connectionsClosed };
  }

  /** Dry run: what the active policy decides for a URL (the address check happens at resolution, in the proxy). */
  async checkPolicy(nameOrId: string, url: string, method = "GET"): Promise<{ revision: number; request: EgressRequest; decision: Decision }> {
    const { revision, policy } = await this.d.read.policyOf(nameOrId);
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
    const s = await this.d.read.driven(nameOrId);
    if (s.phase !== "Ready" || !s.runtime) {
      throw new ApiError("not_allowed", `cannot exec in sandbox "${s.name}": it is ${s.phase}; exec needs Ready`);
    }
    return this.d.driver.exec(s.runtime, opts);
  }

  close(): void {
    this.#closed = true;
  }

  /** Why the runtime's host refuses the policy's process.user (a host account or the supervisor holds its ids); null when it does not. */
  #userProblem(policy: Policy): string | null {
    const user = policy.process.user;
    return user === undefined ? null : (this.d.driver.checkWorkloadUser?.(user) ?? null);
  }

  #assertOpen(): void {
    if (this.#closed) throw new ApiError("unavailable", "the gateway is shutting down");
  }
}
