// Runs the gateway in this process until SIGTERM/SIGINT, on the Docker driver.

import type { OriginCa } from "../util/origin-ca.js";
import type { HomePaths } from "../home.js";
import { startGateway } from "../gateway/gateway.js";
import { createLogger } from "../gateway/logger.js";
import { StartupError } from "../gateway/startup.js";
import { DockerDriver } from "../driver/docker/docker-driver.js";
import { launchRootOf, socketPathProblem } from "../driver/docker/launch-paths.js";
import { CliError, EXIT } from "./errors.js";
import { roleIds } from "../driver/docker/host-ids.js";
import { portForwardLimitsFromEnv } from "../gateway/api/port-forward-ws.js";
import type { FilesLimits } from "../gateway/files/limits.js";
import type { ListenAddress } from "../gateway/api/listen-address.js";

export async function runGatewayForeground(opts: { home: HomePaths; listen: readonly ListenAddress[]; logLevel: string; recoveryDeadlineS: number; boundaryDeadlineS: number; uidBase?: number; resolvers: string[]; audit?: { rate: number; keep: number; maxAgeS: number }; supervisor?: { cpus: number; memoryMb: number }; containerLog?: { maxBytes: number; files: number }; logStreams?: number; detachedExecs?: number; launchConcurrency?: number; proposals?: { pending: number; kept: number }; files?: FilesLimits; sandboxSubnets?: string; originCa?: OriginCa; connections?: { headerTimeoutS: number; idleTimeoutS: number; maxConnections: number; maxUnauthenticated: number; proxyConnections: number } }): Promise<void> {
  let portForward: ReturnType<typeof portForwardLimitsFromEnv>;
  try {
    portForward = portForwardLimitsFromEnv(process.env);
  } catch (err) {
    throw new CliError((err as Error).message, EXIT.usage);
  }
  // Before anything is made in the home: its supervisors' health sockets must fit a socket path.
  const tooLong = socketPathProblem(launchRootOf(opts.home.dir));
  if (tooLong !== null) throw new CliError(tooLong, EXIT.usage);
  const log = createLogger({ level: opts.logLevel });
  let driver: DockerDriver;
  try {
    driver = DockerDriver.fromEnv({ log, homeDir: opts.home.dir, ...(opts.originCa === undefined ? {} : { originCaPem: opts.originCa.pem }), ...(opts.uidBase === undefined ? {} : { ids: roleIds(opts.uidBase) }), ...(opts.supervisor === undefined ? {} : { supervisor: opts.supervisor }), ...(opts.containerLog === undefined ? {} : { containerLog: opts.containerLog }), ...(opts.sandboxSubnets === undefined ? {} : { sandboxSubnets: opts.sandboxSubnets }) });
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
      home: opts.home,
      driver,
      log,
      listen: opts.listen,
      resolvers: opts.resolvers,
      portForward,
      supervisorLimits: { cpus: driver.supervisorResources.cpus, memoryMb: driver.supervisorResources.memoryMb },
      ...(opts.originCa === undefined ? {} : { originCa: { path: opts.originCa.path, subjects: opts.originCa.subjects } }),
      service: { recoveryDeadlineMs: opts.recoveryDeadlineS * 1000, boundaryDeadlineMs: opts.boundaryDeadlineS * 1000, ...(opts.detachedExecs === undefined ? {} : { detachedExecs: opts.detachedExecs }), ...(opts.launchConcurrency === undefined ? {} : { launchConcurrency: opts.launchConcurrency }) },
      ...(opts.audit === undefined
        ? {}
        : { audit: { ratePerSecond: opts.audit.rate, burst: Math.max(opts.audit.rate * 4, 200), audit: { perSandbox: opts.audit.keep, maxAgeMs: opts.audit.maxAgeS * 1000 } } }),
      ...(opts.logStreams === undefined ? {} : { logs: { maxStreams: opts.logStreams } }),
      ...(opts.files === undefined ? {} : { files: opts.files }),
      ...(opts.proposals === undefined ? {} : { proposals: opts.proposals }),
      ...(opts.connections === undefined
        ? {}
        : {
            connections: { headerTimeoutMs: Math.round(opts.connections.headerTimeoutS * 1000), idleTimeoutMs: Math.round(opts.connections.idleTimeoutS * 1000), maxAuthenticated: opts.connections.maxConnections, maxUnauthenticated: opts.connections.maxUnauthenticated },
            proxyConnections: opts.connections.proxyConnections,
          }),
      onProgress: (msg) => log.info({ step: msg }, "preparing"),
    });
  } catch (err) {
    await driver.close().catch(() => undefined);
    if (err instanceof StartupError) throw new CliError(err.message, EXIT.usage);
    throw err;
  }
  log.info({ resolvers: opts.resolvers }, "supervisors resolve names at these DNS servers");
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
