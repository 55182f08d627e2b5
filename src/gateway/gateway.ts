// The long-running gateway process: state store, lifecycle service, API server.

import { rmSync } from "node:fs";
import type { Logger } from "pino";
import type { ComputeDriver } from "../driver/contract.js";
import { Store } from "../store/store.js";
import { VERSION } from "../version.js";
import { buildApi } from "./api/api.js";
import { ControlPlane } from "./control/control-plane.js";
import { attachExec } from "./api/exec-ws.js";
import { ensureGatewayId, ensureHomeDir, ensureToken, readAddress, writeAddress, type HomePaths } from "./home.js";
import { SandboxService, type ServiceOptions } from "./sandboxes/service.js";

export interface GatewayOptions {
  home: HomePaths;
  driver: ComputeDriver;
  log: Logger;
  host?: string;
  port?: number;
  service?: ServiceOptions;
  /** Port of the supervisors' control endpoint (on the runtime's bridge address). Default 7421. */
  supervisorPort?: number;
  /** How long a supervisor keeps egress open without its session. Default 15 s. */
  supervisorGraceMs?: number;
  onProgress?: (msg: string) => void;
}

export interface RunningGateway {
  url: string;
  service: SandboxService;
  store: Store;
  close(): Promise<void>;
}

export async function startGateway(opts: GatewayOptions): Promise<RunningGateway> {
  const { home, driver, log } = opts;
  ensureHomeDir(home);
  const token = ensureToken(home);
  const startedAt = new Date();
  const store = Store.open(home.db);
  const service = new SandboxService(store, driver, log, opts.service);
  // Supervisors authenticate to a control plane whenever the runtime has supervisors.
  const control =
    driver.supervised
      ? await ControlPlane.open({
          homeDir: home.dir,
          gatewayId: ensureGatewayId(home.dir),
          log,
          expected: (id) => service.expectedLaunch(id),
          port: opts.supervisorPort,
          graceMs: opts.supervisorGraceMs,
        })
      : null;
  if (control) service.attachControl(control);
  await service.prepareRuntime(opts.onProgress);
  const app = buildApi({
    service,
    token,
    log,
    status: () => ({
      version: VERSION,
      pid: process.pid,
      startedAt: startedAt.toISOString(),
      uptimeSeconds: Math.round((Date.now() - startedAt.getTime()) / 1000),
      driver: driver.kind,
      runtime: service.runtimeStatus(),
      supervisorEndpoint: control ? { url: control.url, ...control.stats() } : null,
      sandboxes: countPhases(service),
      monitor: service.metrics(),
    }),
  });
  const exec = attachExec(app.server, { service, token, log });
  let url: string;
  try {
    // Loopback only: the API is never exposed to other hosts or to sandboxes.
    url = await app.listen({ host: opts.host ?? "127.0.0.1", port: opts.port ?? 0 });
  } catch (err) {
    store.close();
    throw err;
  }
  writeAddress(home, { url, pid: process.pid, startedAt: startedAt.toISOString(), version: VERSION });
  service.resume();
  log.info({ url, home: home.dir, driver: driver.kind }, "gateway listening");

  let closing: Promise<void> | undefined;
  const close = (): Promise<void> =>
    (closing ??= (async () => {
      log.info("gateway shutting down");
      exec.close();
      await app.close();
      await service.close();
      await control?.close();
      await driver.close();
      store.close();
      if (readAddress(home)?.pid === process.pid) rmSync(home.address, { force: true });
      log.info("gateway stopped");
    })());
  return { url, service, store, close };
}

function countPhases(service: SandboxService): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const s of service.list()) counts[s.phase] = (counts[s.phase] ?? 0) + 1;
  return counts;
}
