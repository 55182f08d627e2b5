// A private dockerd plus a real gateway on the Docker driver, for integration
// tests. Images come from the shared tar cache (.cache/images), so each file's
// fresh daemon imports them in a few seconds.

import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { DockerDriver } from "../../src/driver/docker/docker-driver.js";
import { ensureGatewayId } from "../../src/gateway/home.js";
import { EngineClient } from "../../src/driver/docker/engine.js";
import type { ServiceOptions } from "../../src/gateway/sandbox-service.js";
import { PrivateDockerd, type DockerdOptions } from "./dockerd.js";
import { FaultProxy } from "./fault-proxy.js";
import { startTestGateway, type TestGateway } from "./gateway-fixture.js";

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
  opts: Partial<DockerdOptions> & { service?: ServiceOptions; viaFaultProxy?: boolean; supervisorGraceMs?: number } = {},
): Promise<DockerFixture> {
  const dockerd = await PrivateDockerd.start({ liveRestore: opts.liveRestore ?? true, name: opts.name ?? "it" });
  const proxy = opts.viaFaultProxy ? await FaultProxy.start({ upstreamSocket: dockerd.socketPath }) : undefined;
  const gatewaySocket = proxy?.socketPath ?? dockerd.socketPath;
  const homeDir = mkdtempSync(join(tmpdir(), "sg-home-"));
  const makeDriver = (): DockerDriver =>
    new DockerDriver({
      engine: new EngineClient({ socketPath: gatewaySocket }),
      gatewayId: ensureGatewayId(homeDir),
      launchRoot: join(homeDir, "launch"),
      log: pino({ level: process.env.SANDGATE_TEST_LOG ?? "silent" }),
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
      fx.t = await startTestGateway(fx.driver, { homeDir, service: opts.service, supervisorGraceMs: opts.supervisorGraceMs });
    },
    async close() {
      await fx.t.close().catch(() => undefined);
      await fx.engine.close();
      await proxy?.close();
      await dockerd.destroy();
    },
  };
  try {
    fx.t = await startTestGateway(fx.driver, { homeDir, service: opts.service, supervisorGraceMs: opts.supervisorGraceMs });
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
    log: pino({ level: process.env.SANDGATE_TEST_LOG ?? "silent" }),
  });
  return { t: await startTestGateway(driver, { homeDir, service }), driver };
}
