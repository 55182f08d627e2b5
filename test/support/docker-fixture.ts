// A private dockerd plus a real gateway on the Docker driver, for integration
// tests. Images come from the shared tar cache (.cache/images), so each file's
// fresh daemon imports them in a few seconds.

import { randomBytes } from "node:crypto";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { DockerDriver } from "../../src/driver/docker/docker-driver.js";
import { ensureGatewayId } from "../../src/home.js";
import { EngineClient } from "../../src/driver/docker/engine/client.js";
import type { ServiceOptions } from "../../src/gateway/sandboxes/service.js";
import type { ContainerLogBound } from "../../src/driver/docker/log-config.js";
import type { ConnectionBoundsSettings } from "../../src/util/connection-bounds.js";
import { PrivateDockerd, type DockerdOptions } from "./dockerd.js";
import { FaultProxy } from "./fault-proxy.js";
import type { ListenAddress } from "../../src/gateway/api/listen-address.js";
import { eventually, startTestGateway, type TestGateway } from "./gateway-fixture.js";
import type { StoreLocation } from "../../src/util/store-url.js";

export interface DockerFixture {
  dockerd: PrivateDockerd;
  /** Present with `viaFaultProxy`: the gateway reaches dockerd only through it. */
  proxy: FaultProxy | undefined;
  engine: EngineClient;
  driver: DockerDriver;
  t: TestGateway;
  /** Env for CLI child processes: points them at this gateway. */
  cliEnv: Record<string, string>;
  /** Restart the gateway on the same home (same gateway id and state). */
  restartGateway(): Promise<void>;
  close(): Promise<void>;
}

export async function startDockerFixture(
  opts: Partial<DockerdOptions> & { service?: ServiceOptions; viaFaultProxy?: boolean; supervisorGraceMs?: number; resolvers?: string[]; hostAddressIntervalMs?: number; originCaPem?: string; logSink?: (line: string) => void; containerLog?: ContainerLogBound; sandboxSubnets?: string; listen?: ListenAddress[]; connections?: Partial<ConnectionBoundsSettings>; proxyConnections?: number; store?: StoreLocation } = {},
): Promise<DockerFixture> {
  const dockerd = await PrivateDockerd.start({
    liveRestore: opts.liveRestore ?? true,
    name: opts.name ?? "it",
    ...(opts.resolvConf === undefined ? {} : { resolvConf: opts.resolvConf }),
    ...(opts.extraArgs === undefined ? {} : { extraArgs: opts.extraArgs }),
    ...(opts.startTimeoutMs === undefined ? {} : { startTimeoutMs: opts.startTimeoutMs }),
  });
  const proxy = opts.viaFaultProxy ? await FaultProxy.start({ upstreamSocket: dockerd.socketPath }) : undefined;
  const gatewaySocket = proxy?.socketPath ?? dockerd.socketPath;
  const homeDir = mkdtempSync(join(tmpdir(), "sg-home-"));
  const makeDriver = (): DockerDriver =>
    new DockerDriver({
      engine: new EngineClient({ socketPath: gatewaySocket }),
      gatewayId: ensureGatewayId(homeDir),
      launchRoot: join(homeDir, "launch"),
      workspaceRoot: dockerd.workspaceRoot,
      ...(opts.originCaPem === undefined ? {} : { originCaPem: opts.originCaPem }),
      ...(opts.containerLog === undefined ? {} : { containerLog: opts.containerLog }),
      ...(opts.sandboxSubnets === undefined ? {} : { sandboxSubnets: opts.sandboxSubnets }),
      log: opts.logSink === undefined ? pino({ level: process.env.SANDGATE_TEST_LOG ?? "silent" }) : pino({ level: "debug" }, { write: opts.logSink }),
    });
  const gatewayOpts = () => ({
    homeDir,
    service: opts.service,
    supervisorGraceMs: opts.supervisorGraceMs,
    ...(opts.resolvers === undefined ? {} : { resolvers: opts.resolvers }),
    ...(opts.hostAddressIntervalMs === undefined ? {} : { hostAddressIntervalMs: opts.hostAddressIntervalMs }),
    ...(opts.logSink === undefined ? {} : { logSink: opts.logSink }),
    ...(opts.listen === undefined ? {} : { listen: opts.listen }),
    ...(opts.connections === undefined ? {} : { connections: opts.connections }),
    ...(opts.proxyConnections === undefined ? {} : { proxyConnections: opts.proxyConnections }),
    ...(opts.store === undefined ? {} : { store: opts.store }),
  });
  const fx: DockerFixture = {
    dockerd,
    proxy,
    // A separate client for the test's own checks, so the gateway's is never disturbed.
    engine: new EngineClient({ socketPath: dockerd.socketPath }),
    driver: makeDriver(),
    t: undefined as unknown as TestGateway,
    cliEnv: { SANDGATE_HOME: homeDir },
    async restartGateway() {
      await fx.t.close({ keepHome: true });
      fx.driver = makeDriver();
      fx.t = await startTestGateway(fx.driver, gatewayOpts());
    },
    async close() {
      const gw = fx.t.gw;
      await fx.t.close();
      // Nothing may outlive the gateway: no monitor check, timer or lifecycle task.
      const leaks = gw.pending();
      await fx.engine.close();
      await proxy?.close();
      await dockerd.destroy();
      if (leaks.checks + leaks.timers + leaks.tasks > 0) throw new Error(`leaked after close: ${JSON.stringify(leaks)}`);
    },
  };
  try {
    fx.t = await startTestGateway(fx.driver, gatewayOpts());
  } catch (err) {
    await dockerd.destroy();
    throw err;
  }
  return fx;
}

/** Another gateway (own home, own gateway id) on the same daemon. */
export async function startSecondGateway(fx: DockerFixture, service?: ServiceOptions): Promise<{ t: TestGateway; driver: DockerDriver }> {
  const homeDir = mkdtempSync(join(tmpdir(), "sg-home2-"));
  const driver = new DockerDriver({
    engine: new EngineClient({ socketPath: fx.dockerd.socketPath }),
    gatewayId: ensureGatewayId(homeDir),
    launchRoot: join(homeDir, "launch"),
    workspaceRoot: join(fx.dockerd.dir, `ws-${randomBytes(3).toString("hex")}`),
    log: pino({ level: process.env.SANDGATE_TEST_LOG ?? "silent" }),
  });
  return { t: await startTestGateway(driver, { homeDir, service }), driver };
}

/** Delete every sandbox and check that no monitor or check is left behind. */
export async function deleteAllAndCheckMonitors(fx: DockerFixture): Promise<void> {
  const { sandboxes } = (await fx.t.api("GET", "/v1/sandboxes")).body as { sandboxes: { name: string }[] };
  for (const s of sandboxes) await fx.t.api("DELETE", `/v1/sandboxes/${s.name}`);
  await eventually(async () => ((await fx.t.api("GET", "/v1/sandboxes")).body.sandboxes.length === 0 ? true : undefined), 60_000, "all deleted");
  await fx.t.gw.idle();
  const m = (await fx.t.api("GET", "/v1/status")).body.monitor as { monitors: number };
  if (m.monitors !== 0) throw new Error(`${m.monitors} monitors left after deleting every sandbox`);
  const monitor = fx.t.gw.monitor;
  await eventually(() => (monitor && monitor.pending().checks === 0 ? true : undefined), 10_000, "no monitor check in flight");
}
