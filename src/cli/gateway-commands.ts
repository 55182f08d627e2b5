// `sandgate gateway start|status|stop`.

import { spawn } from "node:child_process";
import { openSync, readFileSync, statSync } from "node:fs";
import { Command, InvalidArgumentError } from "commander";
import { formatListenAddress, parseListenAddress, type ListenAddress } from "../gateway/api/listen-address.js";
import { DEFAULT_PORT, ensureHomeDir, inspectAddress, readAddress, resolveHome, type HomePaths } from "../home.js";
import { assertPortFree, commandLine, printableCommand } from "../gateway/startup.js";
import { filesLimitsFromEnv } from "../gateway/files/limits.js";
import { SettingError, fromFlagOrEnv, parseDecimal, parseDuration, parseInteger } from "../util/settings.js";
import { SUPERVISOR_RESOURCES } from "../driver/docker/objects.js";
import { DEFAULT_SANDBOX_SUBNETS, parseSandboxSubnets } from "../driver/docker/sandbox-subnets.js";
import { formatCidr } from "../policy/cidr.js";
import { AUDIT_AGE, AUDIT_KEEP, AUDIT_RATE, DEADLINE, LOG_LEVELS, PORT, SUPERVISOR_CPUS, SUPERVISOR_MEMORY, WAIT, intArg, logLevel, secondsArg, setting } from "./args.js";
import { GatewayClient } from "./client.js";
import { CliError, EXIT } from "./errors.js";
import { printJson, table } from "./format.js";
import { DEFAULT_UID_BASE, parseUidBase } from "../driver/docker/host-ids.js";
import { CONTAINER_LOG_LIMITS, DEFAULT_CONTAINER_LOG } from "../driver/docker/log-config.js";
import { DEFAULT_LOG_LIMITS } from "../gateway/api/logs-routes.js";
import { formatSize, parseByteSize } from "../util/byte-size.js";
import { readOriginCa, type OriginCa } from "../util/origin-ca.js";
import { resolve as resolvePath } from "node:path";

const LOG_STREAMS = { min: 1, max: 100_000 };
import { DEFAULT_DETACHED_EXECS, DETACHED_EXECS_RANGE } from "../gateway/sandboxes/detached-execs.js";
import { DEFAULT_LAUNCH_CONCURRENCY, LAUNCH_CONCURRENCY_RANGE } from "../gateway/sandboxes/launch-limits.js";
import { DEFAULT_PROPOSAL_LIMITS, PROPOSALS_KEPT_RANGE, PROPOSALS_PENDING_RANGE } from "../gateway/sandboxes/policy-proposals.js";
import { RECOVERY_DEADLINE_DEFAULT_S } from "../driver/contract.js";
import { CONNECTION_BOUNDS_RANGES, DEFAULT_CONNECTION_BOUNDS } from "../util/connection-bounds.js";
import { DEFAULT_PROXY_BOUNDS, PROXY_BOUNDS_RANGE } from "../protocol/launch.js";
import { setTimeout as sleep } from "node:timers/promises";

/** The connection bounds `gateway start` takes (seconds for the timeouts). */
interface ConnectionSettings {
  headerTimeoutS: number;
  idleTimeoutS: number;
  maxConnections: number;
  maxUnauthenticated: number;
  proxyConnections: number;
}

interface Common {
  home?: string;
  url?: string;
  json?: boolean;
}

function uidBase(v: string): number {
  const r = parseUidBase(v);
  if (!r.ok) throw new InvalidArgumentError(r.error);
  return r.base;
}

/** --uid-base, else SANDGATE_UID_BASE, else the default; the env value is checked like the flag. */
function resolveUidBase(flag: number | undefined): number {
  if (flag !== undefined) return flag;
  const env = process.env.SANDGATE_UID_BASE;
  if (env === undefined || env === "") return DEFAULT_UID_BASE;
  const r = parseUidBase(env);
  if (!r.ok) throw new CliError(`SANDGATE_UID_BASE: ${r.error}`, EXIT.usage);
  return r.base;
}


/** --listen (else SANDGATE_LISTEN, comma-separated), then --port as tcp://127.0.0.1:PORT; each checked. */
function listenAddresses(flags: string[], env: string | undefined, port: number | undefined): ListenAddress[] {
  const given = flags.length > 0 ? flags.map((v) => ({ what: "--listen", v })) : (env ?? "").split(",").map((v) => v.trim()).filter(Boolean).map((v) => ({ what: "SANDGATE_LISTEN", v }));
  const out = given.map(({ what, v }) => {
    const r = parseListenAddress(v);
    if (!r.ok) throw new SettingError(`${what}: ${r.error}`);
    return r.address;
  });
  if (port !== undefined) out.push({ kind: "tcp", host: "127.0.0.1", port });
  return out;
}

export function gatewayCommands(global: () => Common): Command {
  const gw = new Command("gateway").description("run and inspect the gateway");

  gw.command("start")
    .description("start the gateway (foreground; --detach to run it in the background)")
    .option(
      "--listen <url>",
      "also serve the API at unix:///PATH or tcp://HOST:PORT (TLS only, with <home>/api-cert.pem, which a client pins: SANDGATE_CERT); repeatable (env SANDGATE_LISTEN, comma-separated). The API always listens on <home>/api.sock, which the CLI, SDK and MCP use",
      (v: string, prev: string[]) => [...prev, v],
      [] as string[],
    )
    .option("--port <port>", `the same as --listen tcp://127.0.0.1:PORT (0 picks a free one; e.g. ${DEFAULT_PORT})`, intArg("--port", PORT))
    .option("--detach", "run in the background, logging to <home>/gateway.log")
    .option("--log-level <level>", `${LOG_LEVELS.join(", ")} (env SANDGATE_LOG_LEVEL; default info)`)
    .option("--recovery-deadline <seconds>", `how long a sandbox may stay Recovering before it fails closed (env SANDGATE_RECOVERY_DEADLINE; default ${RECOVERY_DEADLINE_DEFAULT_S})`)
    .option(
      "--boundary-deadline <seconds>",
      "how long a sandbox whose supervisor runs but cannot show its boundary may stay Recovering (env SANDGATE_BOUNDARY_DEADLINE; default 30)",
    )
    .option(
      "--uid-base <id>",
      `uid (and gid) of every workload; supervisors run as the next id. No host account or group may hold either (env SANDGATE_UID_BASE; default ${DEFAULT_UID_BASE})`,
      uidBase,
    )
    .option("--audit-rate <n>", `audit records a sandbox may add per second; more are dropped and counted (${AUDIT_RATE.min}-${AUDIT_RATE.max}; env SANDGATE_AUDIT_RATE; default 50)`)
    .option("--audit-keep <n>", `audit records kept per sandbox, newest first (${AUDIT_KEEP.min}-${AUDIT_KEEP.max}; env SANDGATE_AUDIT_KEEP; default 10000)`)
    .option("--audit-max-age <duration>", "how long audit records are kept, e.g. 12h, 7d (1h-366d; env SANDGATE_AUDIT_MAX_AGE; default 7d)")
    .option("--supervisor-cpus <n>", `CPU limit of each sandbox's supervisor, a cap not a reservation (${SUPERVISOR_CPUS.min}-${SUPERVISOR_CPUS.max}; env SANDGATE_SUPERVISOR_CPUS; default ${SUPERVISOR_RESOURCES.cpus})`)
    .option("--supervisor-memory <MiB>", `memory limit of each sandbox's supervisor (${SUPERVISOR_MEMORY.min}-${SUPERVISOR_MEMORY.max}; env SANDGATE_SUPERVISOR_MEMORY; default ${SUPERVISOR_RESOURCES.memoryMb})`)
    .option("--container-log-size <size>", `output Docker keeps per log file of each sandbox container before rotating it, e.g. 512K, 10M (${formatSize(CONTAINER_LOG_LIMITS.maxBytes.min)}-${formatSize(CONTAINER_LOG_LIMITS.maxBytes.max)}; env SANDGATE_CONTAINER_LOG_SIZE; default ${formatSize(DEFAULT_CONTAINER_LOG.maxBytes)})`)
    .option("--container-log-files <n>", `log files kept per container, so at most size × files of output (${CONTAINER_LOG_LIMITS.files.min}-${CONTAINER_LOG_LIMITS.files.max}; env SANDGATE_CONTAINER_LOG_FILES; default ${DEFAULT_CONTAINER_LOG.files})`)
    .option("--log-streams <n>", `log streams (sandbox logs) open at once; more are refused (${LOG_STREAMS.min}-${LOG_STREAMS.max}; env SANDGATE_LOG_STREAMS; default ${DEFAULT_LOG_LIMITS.maxStreams})`)
    .option("--launch-concurrency <n>", `sandboxes launched (provisioned, started, verified) at once; more wait their turn in order, Provisioning, and say so (${LAUNCH_CONCURRENCY_RANGE.min}-${LAUNCH_CONCURRENCY_RANGE.max}; env SANDGATE_LAUNCH_CONCURRENCY; default ${DEFAULT_LAUNCH_CONCURRENCY})`)
    .option("--detached-execs <n>", `detached execs (exec --detach) kept per sandbox; when every one is running, another is refused (${DETACHED_EXECS_RANGE.min}-${DETACHED_EXECS_RANGE.max}; env SANDGATE_DETACHED_EXECS; default ${DEFAULT_DETACHED_EXECS})`)
    .option("--proposals-pending <n>", `pending policy proposals per sandbox; past it a new one is refused until a person decides one (${PROPOSALS_PENDING_RANGE.min}-${PROPOSALS_PENDING_RANGE.max}; env SANDGATE_PROPOSALS_PENDING; default ${DEFAULT_PROPOSAL_LIMITS.pending})`)
    .option("--proposals-kept <n>", `decided policy proposals kept per sandbox, the most recently decided (${PROPOSALS_KEPT_RANGE.min}-${PROPOSALS_KEPT_RANGE.max}; env SANDGATE_PROPOSALS_KEPT; default ${DEFAULT_PROPOSAL_LIMITS.kept})`)
    .option("--sandbox-subnets <cidr>", `IPv4 range each sandbox's internal network takes a /28 from, instead of Docker's address pools; the host gets an unreachable route for it (/8-/24; env SANDGATE_SANDBOX_SUBNETS; default ${DEFAULT_SANDBOX_SUBNETS})`)
    .option("--header-timeout <duration>", `a connection to the gateway's listeners or a sandbox's proxy that has not sent a complete request head (TLS handshake included) in this long is closed, e.g. 10s (${CONNECTION_BOUNDS_RANGES.headerTimeout.minS}s-10m; env SANDGATE_HEADER_TIMEOUT; default ${DEFAULT_CONNECTION_BOUNDS.headerTimeoutMs / 1000}s)`)
    .option("--idle-timeout <duration>", `a kept-alive connection with no request in flight is closed after this long, on the same listeners (${CONNECTION_BOUNDS_RANGES.idleTimeout.minS}s-1h; env SANDGATE_IDLE_TIMEOUT; default ${DEFAULT_CONNECTION_BOUNDS.idleTimeoutMs / 1000}s)`)
    .option("--max-connections <n>", `authenticated connections per listener; the supervisor endpoint holds one per running sandbox; past it a newly authenticated one is refused (${CONNECTION_BOUNDS_RANGES.maxAuthenticated.min}-${CONNECTION_BOUNDS_RANGES.maxAuthenticated.max}; env SANDGATE_MAX_CONNECTIONS; default ${DEFAULT_CONNECTION_BOUNDS.maxAuthenticated})`)
    .option("--max-unauthenticated <n>", `connections not yet authenticated per listener; past it the oldest is closed to admit the new one (${CONNECTION_BOUNDS_RANGES.maxUnauthenticated.min}-${CONNECTION_BOUNDS_RANGES.maxUnauthenticated.max}; env SANDGATE_MAX_UNAUTHENTICATED; default ${DEFAULT_CONNECTION_BOUNDS.maxUnauthenticated})`)
    .option("--origin-ca <file>", "a PEM file of CAs the supervisors trust for origins besides the system roots (an origin on a private CA); a sandbox takes them when it starts, so running ones need `sandbox restart` (env SANDGATE_ORIGIN_CA; default: none)")
    .option("--proxy-connections <n>", `connections a sandbox's workload may hold open to its proxy; past it a new one is refused at once and counted in its audit trail (${PROXY_BOUNDS_RANGE.max.min}-${PROXY_BOUNDS_RANGE.max.max}; env SANDGATE_PROXY_CONNECTIONS; default ${DEFAULT_PROXY_BOUNDS.max})`)
    .option(
      "--resolver <addr>",
      "a DNS server supervisors ask directly, IP[:port] (repeatable; env SANDGATE_RESOLVERS; default: the host's /etc/resolv.conf)",
      (v: string, prev: string[]) => [...prev, v],
      [] as string[],
    )
    .action(async (raw: { listen: string[]; port?: number; detach?: boolean; logLevel?: string; recoveryDeadline?: string; boundaryDeadline?: string; uidBase?: number; resolver: string[]; auditRate?: string; auditKeep?: string; auditMaxAge?: string; supervisorCpus?: string; supervisorMemory?: string; containerLogSize?: string; containerLogFiles?: string; logStreams?: string; detachedExecs?: string; launchConcurrency?: string; proposalsPending?: string; proposalsKept?: string; sandboxSubnets?: string; headerTimeout?: string; idleTimeout?: string; maxConnections?: string; maxUnauthenticated?: string; proxyConnections?: string; originCa?: string }) => {
      // Every setting is checked before anything starts: flag, else environment, else default.
      const env = process.env;
      const o = {
        listen: setting(() => listenAddresses(raw.listen, env.SANDGATE_LISTEN, raw.port)),
        logLevel: setting(() => fromFlagOrEnv({ name: "--log-level", value: raw.logLevel }, { name: "SANDGATE_LOG_LEVEL", value: env.SANDGATE_LOG_LEVEL }, "info", logLevel)),
        recoveryDeadline: setting(() =>
          fromFlagOrEnv({ name: "--recovery-deadline", value: raw.recoveryDeadline }, { name: "SANDGATE_RECOVERY_DEADLINE", value: env.SANDGATE_RECOVERY_DEADLINE }, RECOVERY_DEADLINE_DEFAULT_S, (w, r) => parseDuration(w, r, DEADLINE)),
        ),
        boundaryDeadline: setting(() =>
          fromFlagOrEnv({ name: "--boundary-deadline", value: raw.boundaryDeadline }, { name: "SANDGATE_BOUNDARY_DEADLINE", value: env.SANDGATE_BOUNDARY_DEADLINE }, 30, (w, r) => parseDuration(w, r, DEADLINE)),
        ),
        uidBase: resolveUidBase(raw.uidBase),
        launchConcurrency: setting(() => fromFlagOrEnv({ name: "--launch-concurrency", value: raw.launchConcurrency }, { name: "SANDGATE_LAUNCH_CONCURRENCY", value: env.SANDGATE_LAUNCH_CONCURRENCY }, DEFAULT_LAUNCH_CONCURRENCY, (w, r) => parseInteger(w, r, LAUNCH_CONCURRENCY_RANGE))),
        detachedExecs: setting(() => fromFlagOrEnv({ name: "--detached-execs", value: raw.detachedExecs }, { name: "SANDGATE_DETACHED_EXECS", value: env.SANDGATE_DETACHED_EXECS }, DEFAULT_DETACHED_EXECS, (w, r) => parseInteger(w, r, DETACHED_EXECS_RANGE))),
        proposals: {
          pending: setting(() => fromFlagOrEnv({ name: "--proposals-pending", value: raw.proposalsPending }, { name: "SANDGATE_PROPOSALS_PENDING", value: env.SANDGATE_PROPOSALS_PENDING }, DEFAULT_PROPOSAL_LIMITS.pending, (w, r) => parseInteger(w, r, PROPOSALS_PENDING_RANGE))),
          kept: setting(() => fromFlagOrEnv({ name: "--proposals-kept", value: raw.proposalsKept }, { name: "SANDGATE_PROPOSALS_KEPT", value: env.SANDGATE_PROPOSALS_KEPT }, DEFAULT_PROPOSAL_LIMITS.kept, (w, r) => parseInteger(w, r, PROPOSALS_KEPT_RANGE))),
        },
        resolver: raw.resolver,
        audit: {
          rate: setting(() => fromFlagOrEnv({ name: "--audit-rate", value: raw.auditRate }, { name: "SANDGATE_AUDIT_RATE", value: env.SANDGATE_AUDIT_RATE }, 50, (w, r) => parseInteger(w, r, AUDIT_RATE))),
          keep: setting(() => fromFlagOrEnv({ name: "--audit-keep", value: raw.auditKeep }, { name: "SANDGATE_AUDIT_KEEP", value: env.SANDGATE_AUDIT_KEEP }, 10_000, (w, r) => parseInteger(w, r, AUDIT_KEEP))),
          maxAgeS: setting(() => fromFlagOrEnv({ name: "--audit-max-age", value: raw.auditMaxAge }, { name: "SANDGATE_AUDIT_MAX_AGE", value: env.SANDGATE_AUDIT_MAX_AGE }, 7 * 86_400, (w, r) => parseDuration(w, r, AUDIT_AGE))),
        },
        // Environment only (SANDGATE_CP_*): the bounds of `sandbox cp`; a detached gateway inherits them.
        files: setting(() => filesLimitsFromEnv(env)),
        supervisor: {
          cpus: setting(() => fromFlagOrEnv({ name: "--supervisor-cpus", value: raw.supervisorCpus }, { name: "SANDGATE_SUPERVISOR_CPUS", value: env.SANDGATE_SUPERVISOR_CPUS }, SUPERVISOR_RESOURCES.cpus, (w, r) => parseDecimal(w, r, SUPERVISOR_CPUS))),
          memoryMb: setting(() => fromFlagOrEnv({ name: "--supervisor-memory", value: raw.supervisorMemory }, { name: "SANDGATE_SUPERVISOR_MEMORY", value: env.SANDGATE_SUPERVISOR_MEMORY }, SUPERVISOR_RESOURCES.memoryMb, (w, r) => parseInteger(w, r, SUPERVISOR_MEMORY))),
        },
        containerLog: {
          maxBytes: setting(() => fromFlagOrEnv({ name: "--container-log-size", value: raw.containerLogSize }, { name: "SANDGATE_CONTAINER_LOG_SIZE", value: env.SANDGATE_CONTAINER_LOG_SIZE }, DEFAULT_CONTAINER_LOG.maxBytes, (w, r) => parseByteSize(w, r, CONTAINER_LOG_LIMITS.maxBytes))),
          files: setting(() => fromFlagOrEnv({ name: "--container-log-files", value: raw.containerLogFiles }, { name: "SANDGATE_CONTAINER_LOG_FILES", value: env.SANDGATE_CONTAINER_LOG_FILES }, DEFAULT_CONTAINER_LOG.files, (w, r) => parseInteger(w, r, CONTAINER_LOG_LIMITS.files))),
        },
        sandboxSubnets: setting(() =>
          fromFlagOrEnv({ name: "--sandbox-subnets", value: raw.sandboxSubnets }, { name: "SANDGATE_SANDBOX_SUBNETS", value: env.SANDGATE_SANDBOX_SUBNETS }, DEFAULT_SANDBOX_SUBNETS, (what, text) => {
            const r = parseSandboxSubnets(text);
            if (!r.ok) throw new SettingError(`${what}: ${r.error}`);
            return formatCidr(r.range);
          }),
        ),
        originCa: setting(() => {
          const flag = raw.originCa !== undefined;
          const path = flag ? raw.originCa : env.SANDGATE_ORIGIN_CA;
          return path === undefined || path === "" ? undefined : readOriginCa(flag ? "--origin-ca" : "SANDGATE_ORIGIN_CA", path);
        }),
        logStreams: setting(() => fromFlagOrEnv({ name: "--log-streams", value: raw.logStreams }, { name: "SANDGATE_LOG_STREAMS", value: env.SANDGATE_LOG_STREAMS }, DEFAULT_LOG_LIMITS.maxStreams, (w, r) => parseInteger(w, r, LOG_STREAMS))),
        connections: {
          headerTimeoutS: setting(() => fromFlagOrEnv({ name: "--header-timeout", value: raw.headerTimeout }, { name: "SANDGATE_HEADER_TIMEOUT", value: env.SANDGATE_HEADER_TIMEOUT }, DEFAULT_CONNECTION_BOUNDS.headerTimeoutMs / 1000, (w, r) => parseDuration(w, r, CONNECTION_BOUNDS_RANGES.headerTimeout))),
          idleTimeoutS: setting(() => fromFlagOrEnv({ name: "--idle-timeout", value: raw.idleTimeout }, { name: "SANDGATE_IDLE_TIMEOUT", value: env.SANDGATE_IDLE_TIMEOUT }, DEFAULT_CONNECTION_BOUNDS.idleTimeoutMs / 1000, (w, r) => parseDuration(w, r, CONNECTION_BOUNDS_RANGES.idleTimeout))),
          maxConnections: setting(() => fromFlagOrEnv({ name: "--max-connections", value: raw.maxConnections }, { name: "SANDGATE_MAX_CONNECTIONS", value: env.SANDGATE_MAX_CONNECTIONS }, DEFAULT_CONNECTION_BOUNDS.maxAuthenticated, (w, r) => parseInteger(w, r, CONNECTION_BOUNDS_RANGES.maxAuthenticated))),
          maxUnauthenticated: setting(() => fromFlagOrEnv({ name: "--max-unauthenticated", value: raw.maxUnauthenticated }, { name: "SANDGATE_MAX_UNAUTHENTICATED", value: env.SANDGATE_MAX_UNAUTHENTICATED }, DEFAULT_CONNECTION_BOUNDS.maxUnauthenticated, (w, r) => parseInteger(w, r, CONNECTION_BOUNDS_RANGES.maxUnauthenticated))),
          proxyConnections: setting(() => fromFlagOrEnv({ name: "--proxy-connections", value: raw.proxyConnections }, { name: "SANDGATE_PROXY_CONNECTIONS", value: env.SANDGATE_PROXY_CONNECTIONS }, DEFAULT_PROXY_BOUNDS.max, (w, r) => parseInteger(w, r, PROXY_BOUNDS_RANGE.max))),
        } satisfies ConnectionSettings,
      };
      const paths = resolveHome(global().home);
      // Checked before anything starts, and once more in the detached child (same sources).
      const { chooseResolvers } = await import("../gateway/control/resolvers.js");
      const resolvers = chooseResolvers({ flags: o.resolver, env: process.env.SANDGATE_RESOLVERS });
      if (!resolvers.ok) throw new CliError(resolvers.error, EXIT.usage);
      // Another gateway of this home answers on its socket (only the home's owner can have
      // made one there): asked with the token over that socket only, never over TCP.
      const running = await homeGateway(paths);
      if (running) throw new CliError(`a gateway is already running on ${paths.dir} (pid ${running.pid}, at ${running.url})`, EXIT.conflict);
      // A TCP port held by another process is named now, before anything starts (and nothing is sent to it).
      for (const a of o.listen) {
        if (a.kind !== "tcp") continue;
        try {
          await assertPortFree("the API", a.host, a.port);
        } catch (err) {
          throw new CliError((err as Error).message, EXIT.usage);
        }
      }
      if (raw.detach) return detach(paths.dir, paths.log, o);
      const { runGatewayForeground } = await import("./gateway-run.js");
      await runGatewayForeground({ home: paths, listen: o.listen, logLevel: o.logLevel, recoveryDeadlineS: o.recoveryDeadline, boundaryDeadlineS: o.boundaryDeadline, uidBase: o.uidBase, resolvers: resolvers.resolvers, audit: o.audit, supervisor: o.supervisor, containerLog: o.containerLog, logStreams: o.logStreams, detachedExecs: o.detachedExecs, launchConcurrency: o.launchConcurrency, proposals: o.proposals, files: o.files, sandboxSubnets: o.sandboxSubnets, connections: o.connections, ...(o.originCa === undefined ? {} : { originCa: o.originCa }) });
    });

  gw.command("status")
    .description("show whether the gateway runs, and its counters")
    .option("--json", "print as JSON")
    .action(async (_o, cmd: Command) => {
      const o = { ...global(), ...cmd.opts<{ json?: boolean }>() };
      const client = new GatewayClient({ home: o.home, url: o.url });
      const status = await client.request<Record<string, unknown>>("GET", "/v1/status");
      if (o.json) return printJson({ url: client.url, ...status });
      process.stdout.write(table(["FIELD", "VALUE"], flatten({ url: client.url, ...status })) + "\n");
    });

  gw.command("stop")
    .description("stop a gateway started on this home (SIGTERM, graceful); sandboxes keep running")
    .option("--timeout <seconds>", "how long to wait for it to exit", secondsArg("--timeout", WAIT), 30)
    .action(async (o: { timeout: number }) => {
      const paths = resolveHome(global().home);
      const found = inspectAddress(paths);
      if (found.problem) throw new CliError(`cannot find the gateway: ${found.problem}`, EXIT.unreachable);
      const addr = found.address;
      if (!addr || !alive(addr.pid)) throw new CliError("the gateway is not running", EXIT.unreachable);
      // The pid file may be stale and the pid reused: signal only a process that is this gateway.
      const cmd = commandLine(addr.pid);
      if (!(await isOurGateway(addr, cmd, paths.dir))) {
        throw new CliError(
          `the gateway is not running: ${paths.address} names pid ${addr.pid}, which is now ${cmd ? `"${printableCommand(cmd.slice(0, 120))}"` : "another process"}, not a sandgate gateway; nothing was signalled (remove the stale file)`,
          EXIT.unreachable,
        );
      }
      process.kill(addr.pid, "SIGTERM");
      const deadline = Date.now() + o.timeout * 1000;
      while (alive(addr.pid)) {
        if (Date.now() > deadline) throw new CliError(`gateway pid ${addr.pid} did not exit in time`, EXIT.timeout);
        await sleep(100);
      }
      process.stdout.write(`gateway (pid ${addr.pid}) stopped\n`);
    });

  return gw;
}

/**
 * Whether the process at the address file's pid is the gateway of this home: it
 * answers the API with that pid, or its command line is a `sandgate ... gateway
 * start` (one that does not answer yet, or any more).
 */
async function isOurGateway(addr: { url: string; pid: number }, cmd: string, home: string): Promise<boolean> {
  try {
    const status = await new GatewayClient({ url: addr.url, home }).request<{ pid?: number }>("GET", "/v1/status");
    if (status.pid === addr.pid) return true;
  } catch {
    // not answering: judge by the command line
  }
  const argv = cmd.split(" ");
  const i = argv.indexOf("gateway");
  return i > 0 && argv[i + 1] === "start" && argv.slice(0, i).some((a) => /sandgate|[/\\]cli[/\\]main\.[jt]s$/.test(a));
}

/** Nested status objects as dotted rows: monitor.classifications.exited  0 */
function flatten(value: Record<string, unknown>, prefix = ""): string[][] {
  const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === "object" && !Array.isArray(v);
  return Object.entries(value).flatMap(([k, v]) =>
    isObject(v)
      ? flatten(v, `${prefix}${k}.`)
      : // A list of objects (each API listener's connections) row by row: api.connections[0].open.authenticated
        Array.isArray(v) && v.length > 0 && v.every(isObject)
        ? v.flatMap((item, i) => flatten(item, `${prefix}${k}[${i}].`))
        : [[`${prefix}${k}`, typeof v === "string" ? v : JSON.stringify(v)]],
  );
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The gateway answering on the home's socket (its status), or null when none does. */
async function homeGateway(paths: HomePaths): Promise<{ pid: number; url: string } | null> {
  try {
    const status = await new GatewayClient({ home: paths.dir, url: `unix://${paths.socket}` }).request<{ pid?: number }>("GET", "/v1/status");
    return { pid: status.pid ?? 0, url: `unix://${paths.socket}` };
  } catch {
    return null;
  }
}

async function answers(client: GatewayClient): Promise<boolean> {
  try {
    await client.request("GET", "/v1/status");
    return true;
  } catch {
    return false;
  }
}

/** The connection bounds as `gateway start` flags, for the detached child. */
function connectionArgs(c: ConnectionSettings): string[] {
  return ["--header-timeout", `${c.headerTimeoutS}s`, "--idle-timeout", `${c.idleTimeoutS}s`, "--max-connections", String(c.maxConnections), "--max-unauthenticated", String(c.maxUnauthenticated), "--proxy-connections", String(c.proxyConnections)];
}

/** The log's lines from byte `from` on (what the detached gateway wrote). */
function logSince(logPath: string, from: number): string[] {
  try {
    const buf = readFileSync(logPath);
    return buf.subarray(Math.min(from, buf.length)).toString("utf8").split("\n").filter((l) => l.trim() !== "");
  } catch {
    return [];
  }
}

/** A log line for a person: the message of a JSON log line (with its error), else the line itself. */
function readable(line: string): string {
  try {
    const j = JSON.parse(line) as { msg?: string; step?: string; err?: unknown };
    const err = typeof j.err === "string" ? j.err : (j.err as { message?: string } | undefined)?.message;
    return [j.step ?? j.msg ?? line, err].filter(Boolean).join(": ");
  } catch {
    return line;
  }
}

/**
 * Re-run ourselves in the background and wait until the new gateway answers,
 * showing its start-up steps from the log as they come. When it exits first,
 * say so at once with the last lines it logged.
 */
async function detach(homeDir: string, logPath: string, o: { listen: readonly ListenAddress[]; logLevel: string; recoveryDeadline: number; boundaryDeadline: number; uidBase?: number; resolver: string[]; audit: { rate: number; keep: number; maxAgeS: number }; supervisor: { cpus: number; memoryMb: number }; containerLog: { maxBytes: number; files: number }; logStreams: number; detachedExecs: number; launchConcurrency: number; proposals: { pending: number; kept: number }; sandboxSubnets: string; connections: ConnectionSettings; originCa?: OriginCa }): Promise<void> {
  ensureHomeDir(resolveHome(homeDir));
  const out = openSync(logPath, "a");
  const from = statSync(logPath).size;
  const args = [...process.execArgv, process.argv[1]!, "--home", homeDir, "gateway", "start", ...o.listen.flatMap((a) => ["--listen", formatListenAddress(a)]), "--log-level", o.logLevel, "--recovery-deadline", String(o.recoveryDeadline), "--boundary-deadline", String(o.boundaryDeadline), ...(o.uidBase === undefined ? [] : ["--uid-base", String(o.uidBase)]), ...o.resolver.flatMap((r) => ["--resolver", r]), "--audit-rate", String(o.audit.rate), "--audit-keep", String(o.audit.keep), "--audit-max-age", `${o.audit.maxAgeS}s`, "--supervisor-cpus", String(o.supervisor.cpus), "--supervisor-memory", String(o.supervisor.memoryMb), "--container-log-size", String(o.containerLog.maxBytes), "--container-log-files", String(o.containerLog.files), "--log-streams", String(o.logStreams), "--detached-execs", String(o.detachedExecs), "--launch-concurrency", String(o.launchConcurrency), "--proposals-pending", String(o.proposals.pending), "--proposals-kept", String(o.proposals.kept), "--sandbox-subnets", o.sandboxSubnets, ...(o.originCa === undefined ? [] : ["--origin-ca", resolvePath(o.originCa.path)]), ...connectionArgs(o.connections)];
  const child = spawn(process.execPath, args, { detached: true, stdio: ["ignore", out, out] });
  let exited: { code: number | null; signal: string | null } | null = null;
  child.once("exit", (code, signal) => (exited = { code, signal }));
  child.unref();
  process.stderr.write(`starting gateway (pid ${child.pid}); log: ${logPath}\n`);
  const startedAt = Date.now();
  const deadline = startedAt + 180_000;
  let shown = 0;
  let lastSaid = startedAt;
  for (;;) {
    const lines = logSince(logPath, from);
    for (const line of lines.slice(shown)) {
      if (/"msg":"(preparing|runtime not ready[^"]*)"/.test(line)) {
        process.stderr.write(`  ${readable(line)}\n`);
        lastSaid = Date.now();
      }
    }
    shown = lines.length;
    const addr = readAddress(resolveHome(homeDir));
    const own = new GatewayClient({ home: homeDir, url: `unix://${resolveHome(homeDir).socket}` });
    if (addr?.pid === child.pid && (await answers(own))) {
      process.stdout.write(`gateway listening on ${addr!.listeners.join(", ")} (pid ${addr!.pid})\n`);
      const status = await own.request<{ runtime?: { ready: boolean; problem: string | null } }>("GET", "/v1/status");
      if (status.runtime && !status.runtime.ready) {
        process.stderr.write(`warning: the runtime is not ready yet (${status.runtime.problem ?? "?"}); the gateway keeps retrying\n`);
      }
      return;
    }
    const end = exited as { code: number | null; signal: string | null } | null;
    if (end !== null || !alive(child.pid!)) {
      const tail = logSince(logPath, from).slice(-10);
      for (const line of tail) process.stderr.write(`  | ${readable(line)}\n`);
      const how = end?.code != null ? `exit code ${end.code}` : end?.signal ? `signal ${end.signal}` : "exited";
      throw new CliError(`the gateway exited during start-up (${how}); see ${logPath}`, end?.code === EXIT.usage ? EXIT.usage : EXIT.failed);
    }
    if (Date.now() > deadline) throw new CliError(`the gateway did not come up in ${Math.round((deadline - startedAt) / 1000)} s; see ${logPath}`, EXIT.timeout);
    if (Date.now() - lastSaid >= 10_000) {
      process.stderr.write(`  still starting (${Math.round((Date.now() - startedAt) / 1000)} s)\n`);
      lastSaid = Date.now();
    }
    await sleep(200);
  }
}
