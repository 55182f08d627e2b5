// `sandgate gateway start|status|stop`.

import { spawn } from "node:child_process";
import { openSync } from "node:fs";
import { Command, InvalidArgumentError } from "commander";
import { DEFAULT_PORT, ensureHomeDir, readAddress, resolveHome } from "../gateway/home.js";
import { GatewayClient } from "./client.js";
import { CliError, EXIT } from "./errors.js";
import { printJson, table } from "./format.js";
import { DEFAULT_UID_BASE, parseUidBase } from "../driver/docker/host-ids.js";

interface Common {
  home?: string;
  url?: string;
  json?: boolean;
}

function port(v: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new InvalidArgumentError("must be 0-65535");
  return n;
}

function seconds(v: string): number {
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError("must be a positive number of seconds");
  return n;
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

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export function gatewayCommands(global: () => Common): Command {
  const gw = new Command("gateway").description("run and inspect the gateway");

  gw.command("start")
    .description("start the gateway (foreground; --detach to run it in the background)")
    .option("--port <port>", "API port on 127.0.0.1 (0 picks a free one)", port, DEFAULT_PORT)
    .option("--detach", "run in the background, logging to <home>/gateway.log")
    .option("--log-level <level>", "trace, debug, info, warn or error", "info")
    .option(
      "--recovery-deadline <seconds>",
      "how long a sandbox may stay Recovering before it fails closed (env SANDGATE_RECOVERY_DEADLINE)",
      seconds,
      Number(process.env.SANDGATE_RECOVERY_DEADLINE ?? 60),
    )
    .option(
      "--boundary-deadline <seconds>",
      "how long a sandbox whose supervisor runs but cannot show its boundary may stay Recovering (env SANDGATE_BOUNDARY_DEADLINE)",
      seconds,
      Number(process.env.SANDGATE_BOUNDARY_DEADLINE ?? 30),
    )
    .option(
      "--uid-base <id>",
      `uid (and gid) of every workload; supervisors run as the next id. No host account or group may hold either (env SANDGATE_UID_BASE; default ${DEFAULT_UID_BASE})`,
      uidBase,
    )
    .option(
      "--resolver <addr>",
      "a DNS server supervisors ask directly, IP[:port] (repeatable; env SANDGATE_RESOLVERS; default: the host's /etc/resolv.conf)",
      (v: string, prev: string[]) => [...prev, v],
      [] as string[],
    )
    .action(async (o: { port: number; detach?: boolean; logLevel: string; recoveryDeadline: number; boundaryDeadline: number; uidBase?: number; resolver: string[] }) => {
      o.uidBase = resolveUidBase(o.uidBase);
      const paths = resolveHome(global().home);
      // Checked before anything starts, and once more in the detached child (same sources).
      const { chooseResolvers } = await import("../gateway/control/resolvers.js");
      const resolvers = chooseResolvers({ flags: o.resolver, env: process.env.SANDGATE_RESOLVERS });
      if (!resolvers.ok) throw new CliError(resolvers.error, EXIT.usage);
      const running = readAddress(paths);
      if (running && (await answers(new GatewayClient({ home: global().home })))) {
        throw new CliError(`a gateway is already running at ${running.url} (pid ${running.pid})`, EXIT.conflict);
      }
      if (o.detach) return detach(paths.dir, paths.log, o);
      const { runGatewayForeground } = await import("./gateway-run.js");
      await runGatewayForeground({ home: paths, port: o.port, logLevel: o.logLevel, recoveryDeadlineS: o.recoveryDeadline, boundaryDeadlineS: o.boundaryDeadline, uidBase: o.uidBase, resolvers: resolvers.resolvers });
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
    .option("--timeout <seconds>", "how long to wait for it to exit", "30")
    .action(async (o: { timeout: string }) => {
      const paths = resolveHome(global().home);
      const addr = readAddress(paths);
      if (!addr || !alive(addr.pid)) throw new CliError("the gateway is not running", EXIT.unreachable);
      process.kill(addr.pid, "SIGTERM");
      const deadline = Date.now() + Number(o.timeout) * 1000;
      while (alive(addr.pid)) {
        if (Date.now() > deadline) throw new CliError(`gateway pid ${addr.pid} did not exit in time`, EXIT.timeout);
        await sleep(100);
      }
      process.stdout.write(`gateway (pid ${addr.pid}) stopped\n`);
    });

  return gw;
}

/** Nested status objects as dotted rows: monitor.classifications.exited  0 */
function flatten(value: Record<string, unknown>, prefix = ""): string[][] {
  return Object.entries(value).flatMap(([k, v]) =>
    v !== null && typeof v === "object" && !Array.isArray(v)
      ? flatten(v as Record<string, unknown>, `${prefix}${k}.`)
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

async function answers(client: GatewayClient): Promise<boolean> {
  try {
    await client.request("GET", "/v1/status");
    return true;
  } catch {
    return false;
  }
}

/** Re-run ourselves in the background and wait until the new gateway answers. */
async function detach(homeDir: string, logPath: string, o: { port: number; logLevel: string; recoveryDeadline: number; boundaryDeadline: number; uidBase?: number; resolver: string[] }): Promise<void> {
  ensureHomeDir(resolveHome(homeDir));
  const out = openSync(logPath, "a");
  const args = [...process.execArgv, process.argv[1]!, "--home", homeDir, "gateway", "start", "--port", String(o.port), "--log-level", o.logLevel, "--recovery-deadline", String(o.recoveryDeadline), "--boundary-deadline", String(o.boundaryDeadline), ...(o.uidBase === undefined ? [] : ["--uid-base", String(o.uidBase)]), ...o.resolver.flatMap((r) => ["--resolver", r])];
  const child = spawn(process.execPath, args, { detached: true, stdio: ["ignore", out, out] });
  child.unref();
  process.stderr.write(`starting gateway (pid ${child.pid}); log: ${logPath}\n`);
  const deadline = Date.now() + 180_000;
  for (;;) {
    const addr = readAddress(resolveHome(homeDir));
    if (addr?.pid === child.pid && (await answers(new GatewayClient({ home: homeDir })))) {
      process.stdout.write(`gateway listening on ${addr!.url} (pid ${addr!.pid})\n`);
      const status = await new GatewayClient({ home: homeDir }).request<{ runtime?: { ready: boolean; problem: string | null } }>("GET", "/v1/status");
      if (status.runtime && !status.runtime.ready) {
        process.stderr.write(`warning: the runtime is not ready yet (${status.runtime.problem ?? "?"}); the gateway keeps retrying\n`);
      }
      return;
    }
    if (child.exitCode !== null || !alive(child.pid!)) {
      throw new CliError(`the gateway exited during start-up; see ${logPath}`, EXIT.failed);
    }
    if (Date.now() > deadline) throw new CliError(`the gateway did not come up in time; see ${logPath}`, EXIT.timeout);
    await sleep(200);
  }
}
