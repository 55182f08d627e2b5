// ComputeDriver on the Docker Engine API. One sandbox = an internal network, a
// workspace volume, and per generation a supervisor and a workload container,
// all labelled with the gateway, sandbox, generation, role and launch nonce.

import { SandboxCas, TRUST_ENV, WORKLOAD_TRUST_DIR } from "./sandbox-ca.js";
import { DEFAULT_SANDBOX_SUBNETS, parseSandboxSubnets } from "./sandbox-subnets.js";
import { formatCidr, type Cidr } from "../../policy/cidr.js";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import type { Logger } from "pino";
import {
  ProvisionError,
  type ComputeDriver,
  type ExecOptions,
  type ExecSession,
  type LaunchRequest,
  type LogEnd,
  type LogLine,
  type LogRequest,
  type MonitorSink,
  type ReadinessReport,
  type RuntimeCall,
  type RuntimeMonitor,
  type RuntimeRecord,
  type WorkloadStats,
} from "../contract.js";
import { ensureGatewayId } from "../../home.js";
import { PROXY_PORT } from "../../protocol/launch.js";
import { EngineClient } from "./engine/client.js";
import { describe, must, type EngineResult } from "./engine/result.js";
import type { ContainerInspect } from "./engine/types.js";
import { startExec } from "./exec-session.js";
import { expectedInstance, identityOf, notRunningInstance } from "./identity.js";
import { ensureImages, type EnsureImagesResult } from "./images.js";
import { DockerMonitor } from "./monitor/docker-monitor.js";
import {
  NO_RESOLVER,
  resolverOf,
  containerName,
  egressNetworkConfig,
  egressNetworkName,
  networkName,
  SUPERVISOR_RESOURCES,
  supervisorConfig,
  volumeConfig,
  workloadConfig,
  type SandboxObjectsInput,
} from "./objects.js";
import { runtimeChecks, type RuntimeProbes } from "./readiness.js";
import { healthSocketOf, launchRootOf, socketPathProblem } from "./launch-paths.js";
import { SandboxNetworks } from "./sandbox-networks.js";
import { SandboxTeardown } from "./teardown.js";
import { transparentPathProblem, writeLaunchConfig } from "./launch-config.js";
import { dropCounters, programSupervisor, programWorkload, ProcessGone } from "./netns.js";

import { ensureRangeUnreachable } from "./route-table.js";
import type { Resources, SandboxSpec } from "../../lifecycle/spec.js";
import { readHostIdFiles } from "./host-id-files.js";
import { specProblem } from "./spec-check.js";
import { DEFAULT_IDS } from "./rootfs.js";
import { hostIdConflicts, processUserProblem, type HostIdFiles, type RoleIds } from "./host-ids.js";
import { WorkspaceDisks, type WorkspaceUsage } from "./workspace-disk.js";
import { workloadStatsOf } from "./stats.js";
import { DEFAULT_CONTAINER_LOG, keptBytes, type ContainerLogBound } from "./log-config.js";
import { LogArchive } from "./log-archive.js";
import { ContainerLogs } from "./logs.js";

/** The workload's resolv.conf, in its launch directory (bind-mounted read-only, 0644). */
const WORKLOAD_RESOLV_FILE = "resolv.conf";
/** See DockerDriverOptions.provisionCallTimeoutMs. */
const PROVISION_CALL_TIMEOUT_MS = 120_000;

export interface DockerDriverOptions {
  engine: EngineClient;
  /** Stable id of this gateway: its objects carry it, other gateways' are never touched. */
  gatewayId: string;
  /** Host directory for per-launch supervisor configuration (bind-mounted read-only) and run directories (launch-paths.ts). */
  launchRoot: string;
  log: Logger;
  /** Command run in the workload as the readiness exec probe. */
  probeCommand?: string[];
  /** The uids of the two roles (host-ids.ts). Default: DEFAULT_IDS. */
  ids?: RoleIds;
  /** Where workspace images are kept and mounted. Default: <dirname(launchRoot)>/workspaces. */
  workspaceRoot?: string;
  /** Read at prepare, and for each policy naming a process.user, to check that no host account holds the ids. Default: the host's /etc files. */
  hostIdFiles?: () => HostIdFiles;
  /** Where each sandbox's CA is kept. Default: <dirname(launchRoot)>/cas. */
  caRoot?: string;
  /** Extra PEM certificates supervisors trust for origins besides the system roots (private origins). */
  originCaPem?: string;
  /** The supervisor container's CPU and memory limits. Default: SUPERVISOR_RESOURCES. */
  supervisor?: { cpus: number; memoryMb: number };
  /** The IPv4 range sandbox networks take a /28 from (sandbox-subnets.ts). Default: DEFAULT_SANDBOX_SUBNETS. */
  sandboxSubnets?: string;
  /** What Docker keeps of each container's output (log-config.ts). Default: 10 MiB × 3 files. */
  containerLog?: ContainerLogBound;
  /** Where the logs of ended generations are kept. Default: <dirname(launchRoot)>/logs. */
  logRoot?: string;
  /** How long a log read keeps retrying while Docker does not answer. Default 120 s. */
  logReconnectWindowMs?: number;
  /**
   * Deadline of each Docker call of a launch (create, connect, start, inspect). A daemon busy
   * with many launches answers late, not never: its answer is waited for (default 120 s).
   */
  provisionCallTimeoutMs?: number;
}

/** A Docker call that must succeed; anything else is an error naming the step. */
/** Lines of a workload's output kept in the event when it exits during start-up. */
const EXIT_OUTPUT_LINES = 10;

export class DockerDriver implements ComputeDriver {
  readonly kind = "docker";
  readonly supervised = true;
  readonly engine: EngineClient;
  readonly gatewayId: string;
  private readonly launchRoot: string;
  private readonly log: Logger;
  private readonly probeCommand: string[];
  readonly ids: RoleIds;
  /** The host's kernel has IPv6: then it is turned off in sandboxes (their only path out is IPv4, governed). */
  private readonly ipv6 = existsSync("/proc/sys/net/ipv6");
  readonly workspaces: WorkspaceDisks;
  private readonly hostIdFiles: () => HostIdFiles;
  readonly cas: SandboxCas;
  private readonly originCaPem: string | undefined;
  /** The limits each supervisor container gets. */
  readonly supervisorResources: Resources;
  private readonly sandboxSubnets: Cidr;
  private readonly networks: SandboxNetworks;
  private readonly teardown: SandboxTeardown;
  /** What Docker keeps of each container's output. */
  readonly containerLog: ContainerLogBound;
  readonly logArchive: LogArchive;
  readonly containerLogs: ContainerLogs;
  private images: EnsureImagesResult | undefined;
  private egressGateway: string | null = null;
  /** Options of a launch's Docker calls: a long deadline (provisionCallTimeoutMs). */
  private readonly slow: { timeoutMs: number };
  private observer: ((call: RuntimeCall) => void) | null = null;

  constructor(opts: DockerDriverOptions) {
    this.engine = opts.engine;
    this.gatewayId = opts.gatewayId;
    this.launchRoot = opts.launchRoot;
    this.log = opts.log;
    this.probeCommand = opts.probeCommand ?? ["true"];
    this.slow = { timeoutMs: opts.provisionCallTimeoutMs ?? PROVISION_CALL_TIMEOUT_MS };
    this.ids = opts.ids ?? DEFAULT_IDS;
    this.workspaces = new WorkspaceDisks(opts.workspaceRoot ?? join(dirname(opts.launchRoot), "workspaces"));
    this.hostIdFiles = opts.hostIdFiles ?? readHostIdFiles;
    this.cas = new SandboxCas(opts.caRoot ?? join(dirname(opts.launchRoot), "cas"));
    this.originCaPem = opts.originCaPem;
    this.supervisorResources = { ...SUPERVISOR_RESOURCES, ...opts.supervisor };
    const range = parseSandboxSubnets(opts.sandboxSubnets ?? DEFAULT_SANDBOX_SUBNETS);
    if (!range.ok) throw new Error(range.error);
    this.sandboxSubnets = range.range;
    this.networks = new SandboxNetworks(this.engine, this.sandboxSubnets, this.slow);
    this.containerLog = opts.containerLog ?? DEFAULT_CONTAINER_LOG;
    this.logArchive = new LogArchive(opts.logRoot ?? join(dirname(opts.launchRoot), "logs"), () => keptBytes(this.containerLog));
    this.containerLogs = new ContainerLogs({
      engine: this.engine,
      archive: this.logArchive,
      gatewayId: this.gatewayId,
      log: this.log,
      ...(opts.logReconnectWindowMs === undefined ? {} : { reconnectWindowMs: opts.logReconnectWindowMs }),
    });
    this.teardown = new SandboxTeardown(this.engine, this.gatewayId, this.launchRoot, this.containerLogs);
  }

  static fromEnv(opts: { log: Logger; homeDir: string; env?: NodeJS.ProcessEnv; ids?: RoleIds; supervisor?: { cpus: number; memoryMb: number }; containerLog?: ContainerLogBound; sandboxSubnets?: string; originCaPem?: string }): DockerDriver {
    return new DockerDriver({
      engine: EngineClient.fromEnv(opts.env ?? process.env),
      gatewayId: ensureGatewayId(opts.homeDir),
      launchRoot: launchRootOf(opts.homeDir),
      workspaceRoot: join(opts.homeDir, "workspaces"),
      caRoot: join(opts.homeDir, "cas"),
      log: opts.log,
      ...(opts.originCaPem === undefined ? {} : { originCaPem: opts.originCaPem }),
      ...(opts.ids === undefined ? {} : { ids: opts.ids }),
      ...(opts.supervisor === undefined ? {} : { supervisor: opts.supervisor }),
      ...(opts.containerLog === undefined ? {} : { containerLog: opts.containerLog }),
      ...(opts.sandboxSubnets === undefined ? {} : { sandboxSubnets: opts.sandboxSubnets }),
    });
  }

  /** Refuse a home whose launch directories would hold health sockets longer than a Unix socket path. */
  checkLaunchPaths(): void {
    const problem = socketPathProblem(this.launchRoot);
    if (problem !== null) throw new Error(problem);
  }

  /** Refuse ids that a host account, group or subordinate range already holds. */
  checkHostIds(): void {
    const conflicts = hostIdConflicts(this.ids, this.hostIdFiles());
    if (conflicts.length > 0) {
      throw new Error(`the sandbox user ids are taken on this host: ${conflicts.join("; ")}; choose another range with --uid-base (env SANDGATE_UID_BASE)`);
    }
  }

  /** Without user namespaces the policy's ids are the host's: read the host's files now (accounts come and go). */
  checkWorkloadUser(user: string): string | null {
    return processUserProblem(user, this.ids, this.hostIdFiles());
  }

  private input(req: LaunchRequest): SandboxObjectsInput {
    return { gatewayId: this.gatewayId, sandboxId: req.sandboxId, name: req.name, generation: req.generation, nonce: req.nonce };
  }

  get imageRefs(): EnsureImagesResult | undefined {
    return this.images;
  }

  async prepare(onProgress?: (msg: string) => void): Promise<void> {
    this.checkHostIds();
    this.checkLaunchPaths();
    // Before anything of Docker: the host reaches no sandbox network, whether Docker is up or not.
    const range = formatCidr(this.sandboxSubnets);
    if ((await ensureRangeUnreachable(range)) === "installed") this.log.info({ range }, "host route installed: the sandbox range is unreachable from the host");
    const ping = await this.engine.ping();
    if (ping.kind !== "ok") {
      throw new Error(`cannot reach the Docker daemon at ${this.engine.socketPath} (${describe(ping)}); is dockerd running? (DOCKER_HOST selects another socket)`);
    }
    this.images = await ensureImages(this.engine, { onProgress, ids: this.ids });
    await this.networks.ensure(egressNetworkConfig(this.gatewayId));
    const egress = must("inspect egress network", await this.engine.inspectNetwork(egressNetworkName(this.gatewayId)));
    this.egressGateway = egress.IPAM.Config?.[0]?.Gateway ?? null;
    if (!this.egressGateway) throw new Error(`the egress network ${egress.Name} has no gateway address for supervisors to reach`);
    mkdirSync(this.launchRoot, { recursive: true, mode: 0o755 });
    writeFileSync(this.resolvConfPath, NO_RESOLVER, { mode: 0o644 });
  }

  /** The egress bridge's host address: supervisors reach the gateway's endpoint there. */
  controlAddress(): string | null {
    return this.egressGateway;
  }

  checkSpec(spec: SandboxSpec): Promise<string | null> {
    return specProblem(this.engine, this.workspaces, spec);
  }

  private async resolveWorkloadImage(image: string | undefined): Promise<{ id: string; isDefault: boolean }> {
    if (image === undefined) {
      if (!this.images) throw new ProvisionError("images are not prepared");
      return { id: this.images.workload.id, isDefault: true };
    }
    const r = await this.engine.inspectImage(image, this.slow);
    if (r.kind === "docker" && r.status === 404) {
      throw new ProvisionError(`No such image: ${image} (no registry is used: build or import it locally, e.g. docker import)`);
    }
    return { id: must(`inspect image ${image}`, r).Id, isDefault: this.images?.workload.ref === image };
  }

  private get resolvConfPath(): string {
    return join(this.launchRoot, "workload-resolv.conf");
  }

  async provision(req: LaunchRequest, onProgress: (msg: string) => void = () => undefined): Promise<void> {
    const i = this.input(req);
    if (!this.images) throw new ProvisionError("images are not prepared");
    const workloadImage = await this.resolveWorkloadImage(req.spec.image);
    onProgress("creating network and workspace");
    // The workspace (mkfs and a loop mount: a few hundred ms) is needed only by the
    // workload's container, so it is made while the network and the supervisor come up.
    const workspaceReady = this.prepareWorkspace(req, i);
    // The sandbox's CA (a key pair and a signature: ~45 ms on the create path when it was made
    // in turn, bench create) is made while the network is.
    const trustReady = this.cas.ensure(req.sandboxId).catch((err: unknown) => {
      throw new ProvisionError(`sandbox CA: ${(err as Error).message}`);
    });
    // Handled now (a rejection while the other calls are pending is not unhandled); awaited below.
    workspaceReady.catch(() => undefined);
    trustReady.catch(() => undefined);
    try {
      const subnet = await this.networks.ensureSandbox(i);
      // A retried launch of this generation starts clean.
      await this.stop(req.sandboxId, req.generation);

      // The boundary comes up first: the workload never runs without its supervisor.
      onProgress("starting supervisor");
      const trust = await trustReady;
      const launchDir = writeLaunchConfig({ launchRoot: this.launchRoot, supervisorUid: this.ids.supervisor, originCaPem: this.originCaPem }, req, trust.ca, subnet);
      const sup = await this.engine.createContainer(containerName(req.sandboxId, req.generation, "supervisor"), supervisorConfig(i, this.images.supervisor.id, launchDir, this.ids.supervisor, this.supervisorResources, this.containerLog, this.ipv6), this.slow);
      const supId = this.provisionStep("create supervisor container", sup).Id;
      this.provisionStep("connect supervisor to egress network", await this.engine.connectNetwork(egressNetworkName(this.gatewayId), supId, this.slow));
      this.provisionStep("start supervisor", await this.engine.startContainer(supId, this.slow));
      const supInspect = this.provisionStep("inspect supervisor", await this.engine.inspectContainer(supId, this.slow));
      const ip = supInspect.NetworkSettings.Networks?.[networkName(req.sandboxId)]?.IPAddress;
      if (!ip) throw new ProvisionError("the supervisor has no address on the sandbox network");
      // The transparent path: the supervisor's namespace redirects the workload's packets to it.
      try {
        await programSupervisor(supInspect.State.Pid, { subnet, supervisorIp: ip });
      } catch (err) {
        throw new ProvisionError(`transparent path: ${(err as Error).message}`);
      }
      // The workload's resolver is its supervisor (what any DNS packet reaches anyway).
      const resolvConf = join(launchDir, WORKLOAD_RESOLV_FILE);
      writeFileSync(resolvConf, resolverOf(ip), { mode: 0o644 });

      const workspace = await workspaceReady;
      onProgress("creating workload");
      const config = workloadConfig(i, {
        imageId: workloadImage.id,
        command: req.spec.command,
        env: req.spec.env,
        resources: req.spec.resources,
        proxyUrl: `http://${ip}:${PROXY_PORT}`,
        defaultImage: workloadImage.isDefault,
        resolvConf,
        ipv6: this.ipv6,
        filesystem: req.policy.policy.filesystem,
        user: req.policy.policy.process.user,
        ...(req.spec.workdir === undefined ? {} : { workdir: req.spec.workdir }),
        uid: this.ids.workload,
        workspace,
        trust: { dir: trust.trustDir, target: WORKLOAD_TRUST_DIR, env: TRUST_ENV },
        log: this.containerLog,
      });
      this.provisionStep("create workload container", await this.engine.createContainer(containerName(req.sandboxId, req.generation, "workload"), config, this.slow));
    } catch (err) {
      // Nothing of this launch may still be running when the caller retries or deletes:
      // a delete racing a mkfs or a mount (or the CA's files) would leave them behind.
      await Promise.all([workspaceReady.catch(() => undefined), trustReady.catch(() => undefined)]);
      throw err;
    }
  }

  /** A size-limited workspace (spec.diskBytes; its bind source), or the named volume of a sandbox created before limits (null). */
  private async prepareWorkspace(req: LaunchRequest, i: SandboxObjectsInput): Promise<string | null> {
    if (req.spec.diskBytes === undefined) {
      must(`create volume`, await this.engine.createVolume(volumeConfig(i), this.slow));
      return null;
    }
    try {
      return await this.workspaces.ensure(req.sandboxId, req.spec.diskBytes, this.ids.workload);
    } catch (err) {
      throw new ProvisionError(`workspace: ${(err as Error).message}`);
    }
  }

  private provisionStep<T>(step: string, r: EngineResult<T>): T {
    if (r.kind === "ok") return r.body;
    throw new ProvisionError(r.kind === "docker" ? `${step}: ${r.message}` : `${step}: ${describe(r)}`);
  }

  async start(req: LaunchRequest, onProgress: (msg: string) => void = () => undefined): Promise<RuntimeRecord> {
    onProgress("starting workload");
    const workloadName = containerName(req.sandboxId, req.generation, "workload");
    this.provisionStep("start workload", await this.engine.startContainer(workloadName, this.slow));
    const [w, sup] = await Promise.all([this.engine.inspectContainer(workloadName, this.slow), this.engine.inspectContainer(containerName(req.sandboxId, req.generation, "supervisor"), this.slow)]);
    const workload = this.provisionStep("inspect workload", w);
    const supervisor = this.provisionStep("inspect supervisor", sup);
    const ip = supervisor.NetworkSettings.Networks?.[networkName(req.sandboxId)]?.IPAddress ?? "";
    // Its every packet off its /28 goes to its supervisor (before this, to nowhere: Docker's
    // gateway of an internal network has no address). Verified before Ready (verify).
    // A workload that already exited has no namespace to program and cannot run again
    // (restart policy "no"): verify reports its exit (code and last lines), not a failure of ours.
    // Its process can be gone before the daemon says so; left unprogrammed it has no route
    // out at all, and verify reads the path back before Ready, so this stays fail-closed.
    if (workload.State.Running) {
      try {
        await programWorkload(workload.State.Pid, ip);
      } catch (err) {
        if (!(err instanceof ProcessGone) && !(await this.hasExited(workload.Id))) throw new ProvisionError(`transparent path: ${(err as Error).message}`);
      }
    }
    return {
      generation: req.generation,
      nonce: req.nonce,
      workload: identityOf(workload),
      supervisor: identityOf(supervisor),
      proxyUrl: `http://${ip}:${PROXY_PORT}`,
    };
  }

  /** Evidence, not status: identities (one inspect per container), supervisor health and a workload exec probe. */
  async verify(req: LaunchRequest, record: RuntimeRecord): Promise<ReadinessReport> {
    const checks: ReadinessReport["checks"] = [];
    const inspected: Partial<Record<"supervisor" | "workload", ContainerInspect>> = {};
    const roles = ["supervisor", "workload"] as const;
    const answers = await Promise.all(roles.map((role) => this.engine.inspectContainer(record[role].id, { timeoutMs: 3000 })));
    for (const [i, role] of roles.entries()) {
      const r = answers[i]!;
      const problem = r.kind === "ok" ? notRunningInstance(r.body, expectedInstance(this.gatewayId, { sandboxId: req.sandboxId, generation: req.generation, record }, role)) : describe(r);
      checks.push(problem === null ? { name: `${role} identity`, ok: true } : { name: `${role} identity`, ok: false, detail: problem });
      if (problem === null && r.kind === "ok") inspected[role] = r.body;
    }
    if (!inspected.supervisor || !inspected.workload) {
      const exited = await this.exitedWorkload(record);
      return { ready: false, checks, ...(exited === null ? {} : { exited }) };
    }
    checks.push(...(await runtimeChecks(this.probes, req, record)));
    return { ready: checks.every((c) => c.ok), checks };
  }

  /** Whether container `id` has stopped running (an exit during start-up), as the daemon says now. */
  private async hasExited(id: string): Promise<boolean> {
    const r = await this.engine.inspectContainer(id, { timeoutMs: 3000 });
    return r.kind === "ok" && r.body.Id === id && !r.body.State.Running;
  }

  /** The launched workload instance, when it has exited: its code and last output lines. */
  private async exitedWorkload(record: RuntimeRecord): Promise<{ exitCode: number; output: string[] } | null> {
    const r = await this.engine.inspectContainer(record.workload.id, { timeoutMs: 3000 });
    // Only the instance that was started (same id, and it ran): never a replacement.
    if (r.kind !== "ok" || r.body.Id !== record.workload.id || r.body.State.Running || r.body.State.Status !== "exited") return null;
    const logs = await this.engine.containerLogs(record.workload.id, EXIT_OUTPUT_LINES, { timeoutMs: 3000 });
    return { exitCode: r.body.State.ExitCode, output: logs.kind === "ok" ? logs.body : [] };
  }

  private get probes(): RuntimeProbes {
    return { engine: this.engine, probeCommand: this.probeCommand, healthSocket: (id, generation) => healthSocketOf(this.launchRoot, id, generation), transparent: (l, record) => transparentPathProblem(this.launchRoot, l, record) };
  }

  async stop(sandboxId: string, generation: number): Promise<void> {
    await this.teardown.stop(sandboxId, generation);
  }

  async remove(sandboxId: string): Promise<void> {
    await this.teardown.remove(sandboxId);
    this.cas.remove(sandboxId);
    this.logArchive.remove(sandboxId);
    await this.workspaces.remove(sandboxId);
  }

  /** Used and total bytes of the sandbox's workspace while it is mounted. */
  workspaceUsage(sandboxId: string): WorkspaceUsage | null {
    return this.workspaces.usage(sandboxId);
  }

  /** A container's output: the live container while it is there, else what was kept of it (logs.ts). */
  logs(req: LogRequest, deliver: (line: LogLine) => void | Promise<void>): Promise<LogEnd> {
    return this.containerLogs.read(req, deliver);
  }

  exec(record: RuntimeRecord, opts: ExecOptions): Promise<ExecSession> {
    return startExec(this.engine, record.workload.id, opts, record.workload.pid);
  }

  /** Workloads run as this uid and gid unless their policy names a user (objects.ts: workloadConfig). */
  get workloadUser(): string {
    return `${this.ids.workload}:${this.ids.workload}`;
  }

  /** The recorded workload instance's resource use: one stats sample (by its id, so never a replacement's). */
  async stats(record: RuntimeRecord): Promise<WorkloadStats> {
    const stats = workloadStatsOf(must(`stats of the workload ${record.workload.id.slice(0, 12)}`, await this.engine.containerStats(record.workload.id)));
    // The supervisor's counters (a launch without the transparent path has none: left out).
    const counters = await dropCounters(record.supervisor.pid).catch(() => null);
    return counters === null ? stats : { ...stats, dropped: { icmp: counters.icmp_dropped, other: counters.other_dropped, forward: counters.forward_dropped } };
  }

  /** Every Docker call of this driver, and of the monitor watch() makes, is reported to `observe`. */
  instrument(observe: (call: RuntimeCall) => void): void {
    this.observer = observe;
    this.engine.observe(observe);
  }

  /** One monitor for all of this gateway's sandboxes, on a Docker connection of its own. */
  watch(sink: MonitorSink): RuntimeMonitor {
    return new DockerMonitor({
      socketPath: this.engine.socketPath,
      gatewayId: this.gatewayId,
      sink,
      log: this.log,
      probeCommand: this.probeCommand,
      healthSocket: (id, generation) => healthSocketOf(this.launchRoot, id, generation),
      transparent: (l, record) => transparentPathProblem(this.launchRoot, l, record),
      ...(this.observer === null ? {} : { observe: this.observer }),
    });
  }

  async close(): Promise<void> {
    await this.engine.close();
  }
}
