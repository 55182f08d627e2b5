// Runs the gateway in this process until SIGTERM/SIGINT, on the Docker driver.

import type { HomePaths } from "../home.js";
import { startGateway } from "../gateway/gateway.js";
import { createLogger } from "../gateway/logger.js";
import { StartupError } from "../gateway/startup.js";
import { DockerDriver } from "../driver/docker/docker-driver.js";
import { launchRootOf, socketPathProblem } from "../driver/docker/launch-paths.js";
import { CliError, EXIT } from "./errors.js";
import { roleIds } from "../driver/docker/host-ids.js";
import { filesLimitsOf } from "../gateway/files/limits.js";
import { settingsView, type GatewaySettings } from "../gateway/settings.js";

/** `resolvers`: the DNS servers chosen from the settings (or the host's resolv.conf). */
export async function runGatewayForeground({ home, settings: s, resolvers }: { home: HomePaths; settings: GatewaySettings; resolvers: string[] }): Promise<void> {
  // Before anything is made in the home: its supervisors' health sockets must fit a socket path.
  const tooLong = socketPathProblem(launchRootOf(home.dir));
  if (tooLong !== null) throw new CliError(tooLong, EXIT.usage);
  const log = createLogger({ level: s.logLevel });
  let driver: DockerDriver;
  try {
    driver = DockerDriver.fromEnv({
      log,
      homeDir: home.dir,
      ...(s.originCa === null ? {} : { originCaPem: s.originCa.pem }),
      ids: roleIds(s.uidBase),
      supervisor: { cpus: s.supervisorCpus, memoryMb: s.supervisorMemoryMb },
      containerLog: { maxBytes: s.containerLogSize, files: s.containerLogFiles },
      sandboxSubnets: s.sandboxSubnets,
    });
  } catch (err) {
    throw new CliError(`cannot use the Docker daemon: ${(err as Error).message}`, EXIT.usage);
  }
  try {
    driver.checkHostIds();
  } catch (err) {
    await driver.close();
    throw new CliError((err as Error).message, EXIT.usage);
  }
  let gw: Awaited<ReturnType<typeof startGateway>>;
  try {
    gw = await startGateway({
      home,
      driver,
      log,
      store: s.store,
      storeConnections: s.storeConnections,
      hostName: s.hostName,
      // Another gateway drives this host now: stop acting at once (its recovery adopts what this one left).
      onLeaseLost: () => process.exit(EXIT.failed),
      listen: s.listen,
      resolvers,
      settings: settingsView(s),
      portForward: { maxPerSandbox: s.portForwardMaxPerSandbox, maxTotal: s.portForwardMax },
      supervisorLimits: { cpus: driver.supervisorResources.cpus, memoryMb: driver.supervisorResources.memoryMb },
      ...(s.originCa === null ? {} : { originCa: { path: s.originCa.path, subjects: s.originCa.subjects } }),
      service: { recoveryDeadlineMs: s.recoveryDeadlineS * 1000, boundaryDeadlineMs: s.boundaryDeadlineS * 1000, detachedExecs: s.detachedExecs, launchConcurrency: s.launchConcurrency },
      audit: { ratePerSecond: s.auditRate, burst: Math.max(s.auditRate * 4, 200), audit: { perSandbox: s.auditKeep, maxAgeMs: s.auditMaxAgeS * 1000 } },
      logs: { maxStreams: s.logStreams },
      files: filesLimitsOf(s),
      proposals: { pending: s.proposalsPending, kept: s.proposalsKept },
      connections: { headerTimeoutMs: Math.round(s.headerTimeoutS * 1000), idleTimeoutMs: Math.round(s.idleTimeoutS * 1000), maxAuthenticated: s.maxConnections, maxUnauthenticated: s.maxUnauthenticated },
      proxyConnections: s.proxyConnections,
      onProgress: (msg) => log.info({ step: msg }, "preparing"),
    });
  } catch (err) {
    await driver.close().catch(() => undefined);
    if (err instanceof StartupError) throw new CliError(err.message, EXIT.usage);
    throw err;
  }
  log.info({ resolvers }, "supervisors resolve names at these DNS servers");
  await new Promise<void>((resolve) => {
    const stop = (signal: string): void => {
      log.info({ signal }, "signal received");
      gw.close().then(resolve, (err: unknown) => {
        log.error({ err }, "shutdown failed");
        process.exitCode = 1;
        resolve();
      });
    };
    process.once("SIGTERM", () => stop("SIGTERM"));
    process.once("SIGINT", () => stop("SIGINT"));
  });
}
