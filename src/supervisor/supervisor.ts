// Wires the supervisor together: launch config → policy holder → proxy + health.
import type { AddressInfo } from "node:net";
import { readLaunchConfig } from "./launch-config.js";
import type { LaunchSettings } from "./launch-config.js";
import { PolicyHolder } from "./policy-holder.js";
import { createEgressProxy } from "./proxy.js";
import type { EgressProxy, Resolver } from "./proxy.js";
import { createHealthServer } from "./health.js";
import type { HealthServer } from "./health.js";
import type { Logger } from "./logger.js";

export interface SupervisorOptions {
  configPath: string;
  logger: Logger;
  /** Listen address for both servers; 0.0.0.0 in the container. */
  host?: string;
  resolve?: Resolver;
  shutdownGraceMs?: number;
}

export interface Supervisor {
  readonly settings: LaunchSettings;
  readonly policy: PolicyHolder;
  readonly proxy: EgressProxy;
  readonly health: HealthServer;
  readonly proxyAddress: AddressInfo;
  readonly healthAddress: AddressInfo;
  close(): Promise<void>;
}

export async function startSupervisor(opts: SupervisorOptions): Promise<Supervisor> {
  const { logger } = opts;
  const host = opts.host ?? "0.0.0.0";
  const loaded = await readLaunchConfig(opts.configPath);
  const { settings } = loaded;
  const policy = new PolicyHolder(loaded.policy);
  const ids = { sandboxId: settings.sandboxId, generation: settings.generation };

  if (loaded.errors.length > 0) {
    logger.error("launch config invalid: denying all egress", { ...ids, configPath: opts.configPath, errors: loaded.errors });
  }
  policy.onChange((p) => logger.info("policy changed", { ...ids, policy: p === undefined ? "missing" : "loaded", policyRevision: p?.revision ?? null }));

  const proxy = createEgressProxy({
    policy,
    logger,
    onAudit: (event) => logger.record({ ...event, sandboxId: settings.sandboxId }),
    ...(opts.resolve === undefined ? {} : { resolve: opts.resolve }),
  });
  const health = createHealthServer({ identity: ids, policy, proxyListening: () => proxy.isListening() });

  const close = async (): Promise<void> => {
    await Promise.all([proxy.close(opts.shutdownGraceMs), health.close()]);
  };
  try {
    const healthAddress = await health.listen(settings.healthPort, host);
    const proxyAddress = await proxy.listen(settings.proxyPort, host);
    logger.info("supervisor listening", {
      ...ids,
      policy: loaded.policy === undefined ? "missing" : "loaded",
      policyRevision: loaded.policy?.revision ?? null,
      proxyPort: proxyAddress.port,
      healthPort: healthAddress.port,
    });
    return { settings, policy, proxy, health, proxyAddress, healthAddress, close };
  } catch (err) {
    await close();
    throw err;
  }
}
