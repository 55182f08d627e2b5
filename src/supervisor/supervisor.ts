// Wires the supervisor together: launch config → policy holder → proxy + health, and the
// control session to the gateway when the launch config names one.
import { readFile } from "node:fs/promises";
import type { AddressInfo } from "node:net";
import { readLaunchConfig } from "./launch-config.js";
import type { LaunchSettings } from "../protocol/launch.js";
import { LockdownPolicyHolder } from "./lockdown.js";
import { ControlSession } from "./control-session.js";
import { lazyLeafSource } from "./tls/lazy-leaves.js";
import { createEgressProxy, defaultResolver } from "./proxy/index.js";
import { upstreamAnswers } from "./resolver.js";
import { DnsCache, withoutTtl } from "./dns-cache.js";
import { hostAddressSet, type HostAddresses } from "../policy/core.js";
import type { EgressProxy, Resolver } from "./proxy/index.js";
import { createHealthServer } from "./health.js";
import type { HealthServer } from "./health.js";
import type { Logger } from "./logger.js";
import { addressIn } from "./listen.js";
import { AuditAggregator } from "./audit-aggregator.js";
import { SecretVault } from "./secret-vault.js";
import { startTransparentPath, type TransparentPath } from "./transparent/index.js";

export interface SupervisorOptions {
  configPath: string;
  logger: Logger;
  /** The proxy's listen address when the launch config names no proxySubnet (standalone use). Default 0.0.0.0. */
  host?: string;
  resolve?: Resolver;
  shutdownGraceMs?: number;
  /** Control-session timing overrides (tests); the grace period comes from the launch config. */
  control?: { heartbeatMs?: number; deadAfterMs?: number; backoffInitialMs?: number; backoffMaxMs?: number };
  /** The transparent path's Node-API addon (in the image: beside the bundle). Needed when the launch config turns the path on. */
  origDstAddon?: string;
  /** The transparent path's ports (tests: free ones); default the protocol's. */
  transparentPorts?: { transparent: number; dns: number; udpSink: number };
}

export interface Supervisor {
  readonly settings: LaunchSettings;
  readonly policy: LockdownPolicyHolder;
  /** Null when the launch config has no control section. */
  readonly control: ControlSession | null;
  readonly proxy: EgressProxy;
  /** The secret values the gateway sent (memory only; emptied on lockdown). */
  readonly secrets: SecretVault;
  readonly health: HealthServer;
  readonly proxyAddress: AddressInfo;
  /** The health endpoint's Unix socket; null when the launch config names none. */
  readonly healthSocket: string | null;
  /** The transparent path, when the launch config turns it on. */
  readonly transparent: TransparentPath | null;
  close(): Promise<void>;
}

export async function startSupervisor(opts: SupervisorOptions): Promise<Supervisor> {
  const { logger } = opts;
  const loaded = await readLaunchConfig(opts.configPath);
  const { settings } = loaded;
  const policy = new LockdownPolicyHolder(loaded.policy);
  const ids = { sandboxId: settings.sandboxId, generation: settings.generation };

  if (loaded.errors.length > 0) {
    logger.error("launch config invalid: denying all egress", { ...ids, configPath: opts.configPath, errors: loaded.errors });
  }
  policy.onChange((p) => logger.info("policy changed", { ...ids, policy: p === undefined ? "missing" : "loaded", policyRevision: p?.revision ?? null }));

  // The gateway host's addresses: from the launch file, then whatever the gateway sends.
  let hostAddresses: HostAddresses = hostAddressSet(settings.hostAddresses);
  const setHostAddresses = (list: string[]): void => {
    const next = hostAddressSet(list);
    const same = next.size === hostAddresses.size && [...next].every((a) => hostAddresses.has(a));
    hostAddresses = next;
    if (!same) logger.info("host addresses changed", { ...ids, hostAddresses: next.size });
  };
  // Names resolve at the host's DNS servers when the launch file names them (no Docker needed).
  // Answers are reused for their records' TTL (capped): DNS is off the path of most requests.
  const cache = opts.resolve === undefined ? new DnsCache(settings.resolvers === null ? withoutTtl(defaultResolver) : upstreamAnswers(settings.resolvers, defaultResolver)) : undefined;
  const resolve = opts.resolve ?? cache!.resolve;

  let control: ControlSession | null = null;
  const secrets = new SecretVault();
  // Every decision, aggregated: the container's log and the gateway get the same bounded stream.
  const audit = new AuditAggregator((event) => {
    logger.record({ ...event, sandboxId: settings.sandboxId });
    control?.audit(event);
  });
  const proxy = createEgressProxy({
    policy,
    logger,
    lockdown: () => {
      const r = policy.lockdownReason();
      return r === null ? null : `lockdown_${r}`;
    },
    onAudit: (event) => {
      // A lockdown hides the policy from the proxy (reason policy_missing); say why.
      const lockdown = policy.lockdownReason();
      audit.record(lockdown === null ? event : { ...event, lockdown });
    },
    hostAddresses: () => hostAddresses,
    resolve,
    // A cached answer is used at once (no promise, no timer); it is checked like any other.
    ...(cache === undefined ? {} : { cachedAddresses: cache.cached }),
    // The sandbox's CA, when the gateway gave one: https with L7 rules is terminated here.
    ...(settings.tls === null ? {} : { tls: lazyLeafSource({ certPem: settings.tls.caCertPem, keyPem: settings.tls.caKeyPem }) }),
    ...(settings.tls?.originCaPem === undefined ? {} : { upstreamCa: settings.tls.originCaPem }),
    credentials: secrets,
    connections: settings.connections,
  });
  // A lockdown closes every connection at once; a new revision closes what it no longer allows
  // (the control session calls revoke before its ack).
  policy.onLockdown((reason) => {
    if (reason === null) {
      logger.info("lockdown lifted", { ...ids, reason });
      return;
    }
    const r = proxy.revoke();
    logger.info("lockdown", { ...ids, reason, connectionsClosed: r.closed, tunnels: r.tunnels, clients: r.clients, upstream: r.upstream });
  });
  const revoke = (): number => {
    const r = proxy.revoke();
    if (r.closed > 0) logger.info("connections revoked", { ...ids, policyRevision: policy.held()?.revision ?? null, connectionsClosed: r.closed, tunnels: r.tunnels, clients: r.clients, upstream: r.upstream });
    return r.closed;
  };
  const c = settings.control;
  if (c !== null && settings.sandboxId !== null && settings.generation !== null) {
    const tokenPath = c.tokenPath;
    control = new ControlSession({
      url: c.url,
      fingerprint: c.fingerprint,
      token: () => readFile(tokenPath, "utf8"),
      sandboxId: settings.sandboxId,
      generation: settings.generation,
      policy,
      proxyListening: () => proxy.isListening(),
      revoke,
      logger,
      graceMs: c.graceMs,
      onHostAddresses: setHostAddresses,
      secrets,
      ...opts.control,
    });
  } else if (loaded.errors.length === 0) {
    logger.warn("no control session configured: enforcing the launch policy without the gateway", ids);
  }
  const session = control;
  let transparent: TransparentPath | null = null;
  const health = createHealthServer({
    identity: ids,
    policy,
    proxyListening: () => proxy.isListening(),
    ...(session === null ? {} : { session: () => session.status() }),
    ...(settings.transparent ? { transparentListening: () => transparent?.isListening() ?? false } : {}),
  });

  const close = async (): Promise<void> => {
    await Promise.all([proxy.close(opts.shutdownGraceMs), health.close(), transparent?.close()]);
    // After the drain: requests that finished during it (and cut tunnels) are recorded too.
    audit.close();
    await session?.stop();
  };
  try {
    // The proxy listens on the sandbox network's side only: on the egress leg, where the host
    // and other supervisors are, this container has no listening socket at all. No address in
    // that subnet: it does not start (a proxy on every address would be open to the host).
    let proxyHost = opts.host ?? "0.0.0.0";
    if (settings.proxySubnet !== null) {
      const inSubnet = addressIn(settings.proxySubnet);
      if (inSubnet === null) throw new Error(`no address of this container is in the sandbox subnet ${settings.proxySubnet}`);
      proxyHost = inSubnet;
    }
    // Health is no network port: a Unix socket in a directory only the gateway (root) reaches.
    if (settings.healthSocket !== null) await health.listenUnix(settings.healthSocket);
    const proxyAddress = await proxy.listen(settings.proxyPort, proxyHost);
    // Every other connection and DNS packet of the workload, redirected by the namespace (the
    // gateway's rules): on the same address, through the same pieces as the proxy.
    if (settings.transparent) {
      if (opts.origDstAddon === undefined) throw new Error("the launch config turns the transparent path on, but this supervisor has no addon to read original destinations");
      transparent = await startTransparentPath({
        host: proxyHost,
        entries: proxy.entries,
        policy: () => policy.current()?.policy,
        resolve,
        onAudit: (event) => audit.record(event),
        addonPath: opts.origDstAddon,
        maxConnections: settings.connections.max,
        ...(opts.transparentPorts === undefined ? {} : { ports: opts.transparentPorts }),
      });
    }
    logger.info("supervisor listening", {
      ...ids,
      policy: loaded.policy === undefined ? "missing" : "loaded",
      policyRevision: loaded.policy?.revision ?? null,
      proxyAddress: proxyAddress.address,
      proxyPort: proxyAddress.port,
      healthSocket: settings.healthSocket,
      transparent: transparent?.ports ?? null,
      control: c === null ? null : c.url,
      hostAddresses: hostAddresses.size,
      resolvers: settings.resolvers ?? "container",
    });
    session?.start();
    return { settings, policy, control: session, proxy, secrets, health, proxyAddress, healthSocket: settings.healthSocket, transparent, close };
  } catch (err) {
    await close();
    throw err;
  }
}
