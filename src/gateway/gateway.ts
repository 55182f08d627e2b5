// The long-running gateway process, and the one place its parts are put
// together: state store, lifecycle (controller, generation handles, tasks,
// recovery sink, runtime monitor), the supervisors' control plane, and the API.

import { chmodSync, existsSync, readFileSync, rmSync } from "node:fs";
import { hostname } from "node:os";
import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "pino";
import type { ComputeDriver, RuntimeMonitor } from "../driver/contract.js";
import type { Store } from "../store/contract.js";
import { openStore as openChosenStore, takeHostLease, type HeldLease } from "../store/open.js";
import type { SqliteStore } from "../store/store.js";
import { redactStoreUrl, showStoreLocation, type StoreLocation } from "../util/store-url.js";
import { VERSION } from "../version.js";
import { buildApi } from "./api/api.js";
import { execUpgrades } from "./api/exec-ws.js";
import { fleetView } from "./api/fleet-view.js";
import { portForwardUpgrades, type PortForwardLimits } from "./api/port-forward-ws.js";
import { attachUpgrades } from "./api/upgrades.js";
import type { WatchLimits } from "./api/watch.js";
import type { LogLimits } from "./api/logs-routes.js";
import { AuditSink, type AuditLimits } from "./audit/audit-sink.js";
import { createGatewayMetrics } from "./metrics/gateway-metrics.js";
import { SandboxStats } from "./stats/sandbox-stats.js";
import { ControlPlane } from "./control/control-plane.js";
import { SecretStore, ensureSecretsKey } from "./secrets/secret-store.js";
import { SecretDelivery, secretValuesFrom } from "./secrets/secret-delivery.js";
import { ensureApproverToken, ensureGatewayId, ensureHomeDir, ensureToken, readAddress, writeAddress, type HomePaths } from "../home.js";
import { StartupError, assertPortFree } from "./startup.js";
import { checkSocketPath, claimSocketPath, openExtraListeners, type ExtraListeners } from "./api/listeners.js";
import type { Authenticated } from "./api/auth.js";
import { boundConnections, boundedServerOptions, type ConnectionBounds, type ConnectionBoundsSettings } from "../util/connection-bounds.js";
import { clientUrl, type ListenAddress } from "./api/listen-address.js";
import { ensureTlsIdentity } from "./control/tls.js";
import { createLifecycle, type Lifecycle } from "./sandboxes/lifecycle.js";
import { everyHost, oneHost } from "./sandboxes/host-scope.js";
import { FileTransfers } from "./files/transfers.js";
import type { FilesLimits } from "./files/limits.js";
import type { SandboxReadModel } from "./sandboxes/read-model.js";
import type { SandboxService, ServiceOptions } from "./sandboxes/service.js";
import { PolicyProposals, type ProposalLimits } from "./sandboxes/policy-proposals.js";
import { PolicyTools } from "./sandboxes/policy-tools.js";

export interface GatewayOptions {
  home: HomePaths;
  /** Where the state is kept (default: the embedded SQLite file in the home). */
  store?: StoreLocation;
  /** Connections to PostgreSQL at most (default 10). */
  storeConnections?: number;
  /** This gateway's host in the fleet: on PostgreSQL it drives the host's Docker daemon only while it holds the host's lease. Default: the machine's hostname. */
  hostName?: string;
  /** Another gateway took this host's lease: this one must stop acting at once (the CLI exits). Default: the gateway closes. */
  onLeaseLost?: (why: string) => void;
  driver: ComputeDriver;
  log: Logger;
  /**
   * Listeners besides the home's Unix socket (`<home>/api.sock`, always there): more sockets, and
   * TCP listeners, which serve TLS with the home's API certificate only (listen-address.ts).
   */
  listen?: readonly ListenAddress[];
  service?: ServiceOptions;
  /** Port of the supervisors' control endpoint (on the runtime's bridge address). Default 7421. */
  supervisorPort?: number;
  /** How long a supervisor keeps egress open without its session. Default 15 s. */
  supervisorGraceMs?: number;
  /**
   * The host's DNS servers supervisors ask directly (canonical addr:port, see
   * src/gateway/control/resolvers.ts); absent: the containers' own resolver (Docker's).
   */
  resolvers?: string[];
  /** How often the host's addresses are re-read (default 3 s). */
  hostAddressIntervalMs?: number;
  onProgress?: (msg: string) => void;
  /** Rate limits and retention of the audit trail and event log (defaults: DEFAULT_AUDIT_LIMITS). */
  audit?: Partial<AuditLimits>;
  /** The limits each supervisor container runs with, as the driver applies them (shown by GET /v1/status). */
  supervisorLimits?: { cpus: number; memoryMb: number };
  /** Every setting as resolved at start (settings.ts: settingsView), for `gateway status`. */
  settings?: Record<string, string>;
  /** The CAs supervisors trust for origins besides the system roots (`--origin-ca`), for `gateway status`. */
  originCa?: { path: string; subjects: string[] };
  /** Bounds of watch streams (defaults: DEFAULT_WATCH_LIMITS). */
  watch?: Partial<WatchLimits>;
  /** Bounds of forwarded connections (defaults: DEFAULT_PORT_FORWARD_LIMITS). */
  portForward?: Partial<PortForwardLimits>;
  /** Bounds of log streams (defaults: DEFAULT_LOG_LIMITS). */
  logs?: Partial<LogLimits>;
  /** Bounds of file transfers, `sandbox cp` (defaults: DEFAULT_FILES_LIMITS). */
  files?: Partial<FilesLimits>;
  /** Bounds of policy proposals per sandbox (defaults: DEFAULT_PROPOSAL_LIMITS). */
  proposals?: Partial<ProposalLimits>;
  /** Bounds of each listener's connections (header and idle timeouts, caps per pool; defaults: DEFAULT_CONNECTION_BOUNDS); the timeouts bound every proxy's too. */
  connections?: Partial<ConnectionBoundsSettings>;
  /** Open connections each sandbox's workload may hold to its proxy (default 512). */
  proxyConnections?: number;
}

export interface RunningGateway {
  /** `unix://<home>/api.sock`: where this home's clients reach it. */
  url: string;
  /** Every listener as a client URL: the home's socket first, then those of `listen` (TCP with the port it got). */
  listeners: readonly string[];
  service: SandboxService;
  read: SandboxReadModel;
  /** The store this gateway opened (the rest of the gateway sees only its interface, src/store/contract.ts). */
  store: Store;
  /** The same, when it is the embedded SQLite one (tests look inside its file); null on PostgreSQL. */
  sqlite: SqliteStore | null;
  monitor: RuntimeMonitor | null;
  /** The HTTP routes the API serves (method, fastify path), as fastify registered them. */
  routes(): readonly { method: string; url: string }[];
  /** Resolves when no lifecycle work is queued or running. */
  idle(): Promise<void>;
  /** Work still pending (leak checks after close): lifecycle tasks, monitor checks and timers, handle timers. */
  pending(): { tasks: number; checks: number; timers: number };
  close(): Promise<void>;
}

/**
 * The one place the gateway creates its store (everything it hands the store to takes the
 * Store interface); a StartupError that says what is wrong and what to do when it cannot.
 */
async function openStore(
  loc: StoreLocation,
  path: string,
  opts: { maxConnections?: number; log: Logger; fence?: { host: string; epoch: number; onLost: (why: string) => void } },
): Promise<{ store: Store; sqlite: SqliteStore | null }> {
  try {
    return await openChosenStore(loc, path, {
      ...(opts.maxConnections === undefined ? {} : { maxConnections: opts.maxConnections }),
      ...(opts.fence === undefined ? {} : { fence: opts.fence }),
      onError: (err) => opts.log.warn({ err: err.message, store: showStoreLocation(loc) }, "state store connection"),
    });
  } catch (err) {
    const code = (err as { code?: string }).code ?? "";
    const why = (err as Error).message;
    if (loc.kind === "postgres") throw new StartupError(`cannot use the state database ${redactStoreUrl(loc.url)}: ${why.split(loc.url).join(redactStoreUrl(loc.url))}`);
    if (/^SQLITE_(NOTADB|CORRUPT)/.test(code) || /not a database|malformed/i.test(why)) {
      throw new StartupError(
        `${path} is not a readable Sandgate database (${why}); move it aside (mv ${path} ${path}.corrupt) to start with no sandboxes, or restore it from a backup`,
      );
    }
    throw new StartupError(`cannot open ${path}: ${why}`);
  }
}

/** A process of this machine that runs a gateway (a recycled pid that runs something else is not one). */
function gatewayRuns(pid: number): boolean {
  if (!existsSync(`/proc/${pid}`)) return false;
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("gateway");
  } catch {
    return false;
  }
}

/**
 * On PostgreSQL, wait for this host's lease (a standby waits here, binding nothing), and
 * after taking it, for the previous holder's process to be gone: the old owner stops
 * before this one starts.
 */
async function holdHostLease(url: string, host: string, home: HomePaths, log: Logger): Promise<HeldLease> {
  try {
    const lease = await takeHostLease(url, host, {
      gatewayId: ensureGatewayId(home.dir),
      pid: process.pid,
      onWaiting: (holder) => log.info({ host, holder }, "standby: another gateway holds the lease of this host; waiting for it"),
      previousGone: async (previous) => {
        for (let said = false; gatewayRuns(previous.pid); said = true) {
          if (!said) log.info({ host, pid: previous.pid }, "standby: the previous holder still runs; waiting for it to end");
          await sleep(100);
        }
      },
      onConnection: (state, why) => (state === "lost" ? log.warn({ host, why }, "the lease's connection was lost; taking it again") : log.info({ host }, why)),
    });
    log.info({ host, epoch: lease.epoch }, "holding the lease of this host");
    return lease;
  } catch (err) {
    throw new StartupError(`cannot use the state database ${redactStoreUrl(url)} (for the lease of host ${host}): ${(err as Error).message.split(url).join(redactStoreUrl(url))}`);
  }
}

export async function startGateway(opts: GatewayOptions): Promise<RunningGateway> {
  const { home, driver, log } = opts;
  const extra = opts.listen ?? [];
  const location = opts.store ?? { kind: "sqlite" };
  // A standby waits here, before it binds or checks anything the holder has.
  const host = opts.hostName ?? hostname();
  const lease = location.kind === "postgres" ? await holdHostLease(location.url, host, home, log) : null;
  // A busy port or a socket path too long is known at once, not after the images are built.
  checkSocketPath(home.socket);
  for (const a of extra) if (a.kind === "tcp") await assertPortFree("the API", a.host, a.port);
  ensureHomeDir(home);
  const token = ensureToken(home);
  const approverToken = ensureApproverToken(home);
  const startedAt = new Date();
  const { store, sqlite } = await openStore(location, home.db, {
    log,
    ...(opts.storeConnections === undefined ? {} : { maxConnections: opts.storeConnections }),
    ...(lease === null ? {} : { fence: { host, epoch: lease.epoch, onLost: (why: string) => log.error({ host, why }, "a write was refused: this gateway no longer holds its host's lease") } }),
  }).catch(async (err: unknown) => {
    await lease?.release();
    throw err;
  });
  // On a fleet's store, a secret another gateway sets reaches this one's supervisors too.
  const secrets = await SecretStore.open(store, ensureSecretsKey(home.dir), (err) => log.warn({ err: err.message }, "a changed secret could not be read again; the next change or reconnection reads it"));
  // Before the lifecycle: the driver (and the monitor it makes) report Docker calls from the first.
  const metrics = createGatewayMetrics({ store, driver, log, monitor: () => (lifecycle.monitor === null ? null : { metrics: () => lifecycle.monitorMetrics() ?? {} }), audit: () => audit.stats() });
  // The control plane asks which launch a supervisor must belong to; the lifecycle
  // (assembled right after it) knows. Nothing asks before the endpoint listens.
  const control: ControlPlane | null = driver.supervised
    ? await ControlPlane.open({
        homeDir: home.dir,
        gatewayId: ensureGatewayId(home.dir),
        log,
        expected: (id) => lifecycle.expectedLaunch(id),
        port: opts.supervisorPort,
        graceMs: opts.supervisorGraceMs,
        resolvers: opts.resolvers ?? null,
        secretValues: secretValuesFrom(secrets, log.child({ component: "secrets" })),
        ...(opts.connections === undefined ? {} : { bounds: opts.connections }),
        ...(opts.proxyConnections === undefined ? {} : { proxyConnections: opts.proxyConnections }),
        ...(opts.hostAddressIntervalMs === undefined ? {} : { hostAddresses: { intervalMs: opts.hostAddressIntervalMs } }),
      })
    : null;
  // On PostgreSQL the store is the fleet's: this gateway drives its host's sandboxes only.
  const scope = location.kind === "postgres" ? oneHost(host) : everyHost(host);
  const lifecycle: Lifecycle = createLifecycle({ store, driver, control, log, options: opts.service, scope });
  const { service, read, runtime, monitor } = lifecycle;
  const audit = new AuditSink(store, log.child({ component: "audit" }), opts.audit);
  const delivery = new SecretDelivery(store, control?.boundary ?? null);
  secrets.onChange(
    (name) =>
      void delivery.deliver(name, null).then(
        (d) => log.info({ secret: name, pushed: d.pushed }, "a secret changed through another gateway: pushed to this gateway's sandboxes that use it"),
        (err: unknown) => log.warn({ secret: name, err: (err as Error).message }, "pushing a secret another gateway changed failed"),
      ),
  );
  control?.boundary.onAudit((id, generation, event) => {
    // Egress is activity for --idle-stop, whether or not the audit rate limit keeps the record.
    lifecycle.activity.touch(id);
    audit.accept(id, generation, event);
  });

  await runtime.prepare(opts.onProgress);
  // Through the exec service: a transfer is a session --idle-stop waits for.
  const proposals = new PolicyProposals({ store, read, service, tools: new PolicyTools(read), log: log.child({ component: "proposals" }), ...(opts.proposals === undefined ? {} : { limits: opts.proposals }) });
  const files = new FileTransfers({ get: async (n) => await read.driven(n), exec: (n, cmd) => lifecycle.execs.start(n, { cmd, tty: false }), log: log.child({ component: "files" }), ...(opts.files === undefined ? {} : { limits: opts.files }) });
  // Each listener's connections are bounded (connection-bounds.ts); a request that passed the
  // token check moves its connection to the authenticated pool of whichever listener has it.
  const bounds: { url: () => string; bounds: ConnectionBounds }[] = [];
  const authenticated: Authenticated = (socket) => {
    for (const b of bounds) {
      const r = b.bounds.authenticated(socket);
      if (!r.ok) return r;
    }
    return { ok: true };
  };
  const app: ReturnType<typeof buildApi> = buildApi({
    ...(opts.connections === undefined ? {} : { connections: opts.connections }),
    authenticated,
    service,
    read,
    token,
    log,
    status: async () => ({
      version: VERSION,
      pid: process.pid,
      startedAt: startedAt.toISOString(),
      uptimeSeconds: Math.round((Date.now() - startedAt.getTime()) / 1000),
      driver: driver.kind,
      ...(opts.settings === undefined ? {} : { settings: opts.settings }),
      ...(opts.supervisorLimits === undefined ? {} : { supervisorLimits: opts.supervisorLimits }),
      originCa: opts.originCa === undefined ? null : { path: opts.originCa.path, certificates: opts.originCa.subjects.length, subjects: opts.originCa.subjects },
      runtime: runtime.status(),
      api: { listeners: urls, connections: bounds.map((b) => ({ url: b.url(), ...b.bounds.stats() })) },
      supervisorEndpoint: control ? { url: control.url, ...control.stats() } : null,
      sandboxes: await read.countByPhase(),
      monitor: lifecycle.monitorMetrics(),
      audit: { ...audit.stats(), limits: audit.limits() },
      watch: app.watchStats(),
      portForward: forwards.stats(),
      logs: app.logStats(),
      execs: { detachedHeld: lifecycle.execs.detached.size, detachedPerSandbox: lifecycle.execs.detached.max, timeoutTimers: lifecycle.execs.timers },
      files: files.stats(),
      proposals: { limits: proposals.limits },
    }),
    fleet: () => fleetView(store, host),
    ...(opts.watch === undefined ? {} : { watch: opts.watch }),
    secrets: { store: secrets, delivery },
    metrics,
    observeRequest: (r) => metrics.apiRequest(r),
    stats: new SandboxStats({ store, read, driver }),
    logs: { driver, ...(opts.logs === undefined ? {} : { limits: opts.logs }) },
    execs: lifecycle.execs,
    files,
    proposals: { proposals, approverToken },
  });
  const url = clientUrl({ kind: "unix", path: home.socket });
  const urls = [url];
  const forwards = portForwardUpgrades({ execs: lifecycle.execs, read, log, ...(opts.portForward === undefined ? {} : { limits: opts.portForward }) });
  // Both WebSocket routes behind one upgrade listener and its one token check.
  const upgrades = attachUpgrades(app.server, { token, log, authenticated }, [execUpgrades({ execs: lifecycle.execs, log }), forwards]);
  bounds.push({ url: () => url, bounds: boundConnections(app.server, opts.connections ?? {}) });
  // In this order: no new sessions or requests, then the work they started, then the store.
  const closeParts = async (): Promise<void> => {
    for (const b of bounds) b.bounds.close();
    upgrades.close();
    await app.close();
    await lifecycle.close();
    await control?.close();
    await audit.close();
    await driver.close();
    secrets.close();
    await store.close();
    await lease?.release();
  };
  let listeners: ExtraListeners;
  try {
    // The home's socket: only the home's owner can enter the directory (0700), so only
    // they reach it; more listeners only where the operator asked for them.
    await claimSocketPath(home.socket);
    await app.listen({ path: home.socket });
    chmodSync(home.socket, 0o600);
    listeners = await openExtraListeners(app.server, app.handler, extra, () => ensureTlsIdentity({ key: home.apiKey, cert: home.apiCert }, "sandgate-gateway API"), {
      serverOptions: boundedServerOptions(opts.connections),
      onServer: (server) => {
        const n = bounds.length;
        // Its URL once it listens (a TCP port 0 gets its port then).
        bounds.push({ url: () => listeners.urls[n - 1] ?? "", bounds: boundConnections(server, opts.connections ?? {}) });
      },
    });
  } catch (err) {
    await closeParts();
    throw err;
  }
  urls.push(...listeners.urls);
  try {
    await lifecycle.resume();
  } catch (err) {
    await listeners.close();
    await closeParts();
    throw err;
  }
  writeAddress(home, { url, listeners: urls, pid: process.pid, startedAt: startedAt.toISOString(), version: VERSION });
  log.info({ url, listeners: urls, home: home.dir, driver: driver.kind }, "gateway listening");

  // Another gateway took this host's lease (after this one's connection to the database was
  // lost): this one must stop acting at once; its writes are already refused (the fence).
  void lease?.lost.then((why) => {
    log.error({ host, why }, "lost the lease of this host to another gateway; stopping");
    if (opts.onLeaseLost) opts.onLeaseLost(why);
    else void close();
  });
  let closing: Promise<void> | undefined;
  const close = (): Promise<void> =>
    (closing ??= (async () => {
      log.info("gateway shutting down");
      await listeners.close();
      await closeParts();
      if (readAddress(home)?.pid === process.pid) rmSync(home.address, { force: true });
      log.info("gateway stopped");
    })());
  return {
    url,
    listeners: urls,
    service,
    read,
    store,
    sqlite,
    monitor,
    routes: () => app.registeredRoutes(),
    idle: () => lifecycle.idle(),
    pending: () => lifecycle.pending(),
    close,
  };
}
