// `sandgate gateway start|status|stop`.

import { spawn } from "node:child_process";
import { openSync, readFileSync, statSync } from "node:fs";
import { Command, Option } from "commander";
import { DEFAULT_PORT, ensureHomeDir, inspectAddress, readAddress, resolveHome, type HomePaths } from "../home.js";
import { assertPortFree, commandLine, printableCommand } from "../gateway/startup.js";
import { SETTINGS, SETTING_NAMES, resolveSettings, settingHelp, settingsArgs, type GatewaySettings, type SettingFlags, type SettingName } from "../gateway/settings.js";
import { PORT, WAIT, intArg, secondsArg, setting } from "./args.js";
import { GatewayClient } from "./client.js";
import { CliError, EXIT } from "./errors.js";
import { printJson, table } from "./format.js";
import { resolve as resolvePath } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

interface Common {
  home?: string;
  url?: string;
  json?: boolean;
}


/** The option of a setting, from its row of the settings table (a repeatable one collects its values). */
function settingOption(name: SettingName): Option {
  const s = SETTINGS[name];
  const o = new Option(`${s.flag} ${s.type.arg}`, settingHelp(name));
  return s.type.repeatable ? o.argParser((v: string, prev: string[] | undefined) => [...(prev ?? []), v]) : o;
}

/** The settings' raw flag values, by setting name, from commander's options. */
function settingFlags(cmd: Command, options: ReadonlyMap<SettingName, Option>): SettingFlags {
  const opts = cmd.opts<Record<string, string | string[] | undefined>>();
  return Object.fromEntries([...options].map(([name, o]) => [name, opts[o.attributeName()]]));
}

export function gatewayCommands(global: () => Common): Command {
  const gw = new Command("gateway").description("run and inspect the gateway");

  const start = gw
    .command("start")
    .description("start the gateway (foreground; --detach to run it in the background)")
    .option("--port <port>", `the same as --listen tcp://127.0.0.1:PORT (0 picks a free one; e.g. ${DEFAULT_PORT})`, intArg("--port", PORT))
    .option("--detach", "run in the background, logging to <home>/gateway.log");
  // Every setting's flag, from the settings table (docs/configuration.md lists them).
  const options = new Map<SettingName, Option>();
  for (const name of SETTING_NAMES) {
    if (SETTINGS[name].flag === null) continue;
    const o = settingOption(name);
    options.set(name, o);
    start.addOption(o);
  }
  start.action(async (raw: { port?: number; detach?: boolean }, cmd: Command) => {
      // Every setting is checked before anything starts: flag, else environment, else default.
      const o = setting(() => resolveSettings(settingFlags(cmd, options), process.env));
      if (raw.port !== undefined) o.listen.push({ kind: "tcp", host: "127.0.0.1", port: raw.port });
      const paths = resolveHome(global().home);
      // Checked before anything starts, and once more in the detached child (same sources).
      const { chooseResolvers } = await import("../gateway/control/resolvers.js");
      const resolvers = chooseResolvers({ flags: o.resolvers });
      if (!resolvers.ok) throw new CliError(resolvers.error, EXIT.usage);
      // Another gateway of this home answers on its socket (only the home's owner can have
      // made one there): asked with the token over that socket only, never over TCP.
      const running = await homeGateway(paths);
      // On PostgreSQL a second gateway of the home stands by for the host's lease instead (docs/fleet.md).
      if (running && o.store.kind !== "postgres") throw new CliError(`a gateway is already running on ${paths.dir} (pid ${running.pid}, at ${running.url})`, EXIT.conflict);
      if (running) process.stderr.write(`a gateway is already running on ${paths.dir} (pid ${running.pid}); this one stands by for the lease of host ${o.hostName} and takes over when it ends\n`);
      // A TCP port held by another process is named now, before anything starts (and nothing is sent to it).
      for (const a of running ? [] : o.listen) {
        if (a.kind !== "tcp") continue;
        try {
          await assertPortFree("the API", a.host, a.port);
        } catch (err) {
          throw new CliError((err as Error).message, EXIT.usage);
        }
      }
      if (raw.detach) return detach(paths.dir, paths.log, o);
      const { runGatewayForeground } = await import("./gateway-run.js");
      await runGatewayForeground({ home: paths, settings: o, resolvers: resolvers.resolvers });
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
async function detach(homeDir: string, logPath: string, o: GatewaySettings): Promise<void> {
  ensureHomeDir(resolveHome(homeDir));
  const out = openSync(logPath, "a");
  const from = statSync(logPath).size;
  // Every setting with a flag is given again as that flag (the origin CA's path made absolute); the
  // environment-only ones the child inherits.
  const settings = { ...o, originCa: o.originCa === null ? null : { ...o.originCa, path: resolvePath(o.originCa.path) } };
  const args = [...process.execArgv, process.argv[1]!, "--home", homeDir, "gateway", "start", ...settingsArgs(settings)];
  // The store's URL may carry a password: through the environment (readable by this user only), never the command line.
  const env = o.store.kind === "postgres" ? { ...process.env, SANDGATE_STORE: o.store.url } : process.env;
  const child = spawn(process.execPath, args, { detached: true, stdio: ["ignore", out, out], env });
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
    // A standby (a gateway of this home already holds the host's lease): it answers only once it takes over.
    if (lines.some((l) => /"msg":"standby: /.test(l))) {
      process.stdout.write(`gateway standing by (pid ${child.pid}): it takes over when the gateway holding this host's lease ends; log: ${logPath}\n`);
      return;
    }
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
