// `sandbox exec` beyond its command: -e, --env-file, -w, -u, --timeout and --detach;
// `sandbox exec-status`; and the signals an attached exec forwards (Ctrl-C and the
// like go to the command, as a shell would send them to its foreground job).

import { Command } from "commander";
import { EXEC_TIMEOUT_RANGE, checkExecEnv, checkWorkdir } from "../lifecycle/process-input.js";
import { secondsArg } from "./args.js";
import type { ExecRequest } from "../sdk/exec.js";
import { GatewayClient } from "./client.js";
import { envPairArg, mergeEnv } from "./env-file.js";
import { CliError, EXIT } from "./errors.js";
import { printJson, table, when } from "./format.js";

export interface ExecFlags {
  env?: Record<string, string>;
  envFile: string[];
  workdir?: string;
  user?: string;
  timeout?: number;
  detach?: boolean;
  json?: boolean;
}

export function addExecFlags(cmd: Command): Command {
  return cmd
    .option("-e, --env <KEY=VALUE>", "set an environment variable for the command (repeatable; wins over --env-file)", envPairArg)
    .option("--env-file <file>", "read variables from a file: KEY=VALUE lines, # comments, KEY alone takes this shell's value (repeatable)", (v: string, prev: string[]) => [...prev, v], [] as string[])
    .option("-w, --workdir <dir>", "working directory, an absolute path (default: the sandbox's, /sandbox unless created with --workdir)")
    .option("-u, --user <uid[:gid]>", "run as this user: only the workload's own user is allowed (see docs/security.md)")
    .option("--timeout <duration>", `end the command after this long: SIGTERM, SIGKILL 5 s later, exit code 124 (e.g. 30s, 10m; ${EXEC_TIMEOUT_RANGE.minS} s-${EXEC_TIMEOUT_RANGE.maxS / 86_400} d)`, secondsArg("--timeout", EXEC_TIMEOUT_RANGE))
    .option("-d, --detach", "start the command and print its exec id; its status: sandgate sandbox exec-status NAME ID (output is not kept)")
    .option("--json", "with --detach: print the exec as JSON");
}

/** The options as the gateway takes them (the SDK's request for the WebSocket, fields for a detached exec); usage errors first. */
export function execRequest(o: ExecFlags): { request: Omit<ExecRequest, "cmd" | "tty" | "size">; body: Record<string, unknown> } {
  const env = mergeEnv(o.envFile, o.env);
  const badEnv = checkExecEnv(env);
  if (badEnv) throw new CliError(badEnv, EXIT.usage);
  if (o.workdir !== undefined) {
    const bad = checkWorkdir(o.workdir);
    if (bad) throw new CliError(`-w: ${bad}`, EXIT.usage);
  }
  const request: Omit<ExecRequest, "cmd" | "tty" | "size"> = {};
  const body: Record<string, unknown> = {};
  if (Object.keys(env).length > 0) {
    request.env = env;
    body.env = { ...env };
  }
  if (o.workdir !== undefined) request.cwd = body.workdir = o.workdir;
  if (o.user !== undefined) request.user = body.user = o.user;
  if (o.timeout !== undefined) request.timeout = body.timeout = String(o.timeout);
  return { request, body };
}

export interface DetachedExecView {
  id: string;
  sandbox: string;
  generation: number;
  cmd: string[];
  state: string;
  exitCode: number | null;
  timedOut: boolean;
  startedAt: string;
  endedAt: string | null;
  error: string | null;
}

/** `exec --detach`: prints the exec id (or the JSON) and returns. */
export async function runDetached(client: GatewayClient, name: string, cmd: string[], o: ExecFlags & { tty?: boolean; interactive?: boolean }): Promise<void> {
  if (o.tty || o.interactive) throw new CliError("--detach runs the command with no terminal and no input: drop -t and -i", EXIT.usage);
  const { body } = execRequest(o);
  const view = await client.request<DetachedExecView>("POST", `/v1/sandboxes/${encodeURIComponent(name)}/execs`, { cmd, ...body });
  if (o.json) printJson(view);
  else process.stdout.write(`${view.id}\n`);
}

const stateText = (e: DetachedExecView): string =>
  e.state === "exited" ? `exited ${e.exitCode ?? "?"}${e.timedOut ? " (timed out)" : ""}` : e.state === "unknown" ? `unknown: ${e.error ?? ""}` : e.state;

export function execStatusCommand(sandbox: Command, global: () => { home?: string; url?: string }): void {
  sandbox
    .command("exec-status")
    .description("the status of detached execs (exec --detach): running, or their exit code; ended ones are kept for an hour")
    .argument("<name>", "sandbox name or id")
    .argument("[id]", "the exec id exec --detach printed; without it, every detached exec of the sandbox")
    .option("--json", "print as JSON")
    .addHelpText("after", "\nExamples:\n  id=$(sandgate sandbox exec demo --detach -- sh -c 'make > /sandbox/build.log 2>&1')\n  sandgate sandbox exec-status demo $id")
    .action(async (name: string, id: string | undefined, o: { json?: boolean }) => {
      const c = new GatewayClient(global());
      const enc = encodeURIComponent;
      if (id !== undefined) {
        const e = await c.request<DetachedExecView>("GET", `/v1/sandboxes/${enc(name)}/execs/${enc(id)}`);
        if (o.json) return printJson(e);
        const rows: [string, string][] = [
          ["id", e.id],
          ["sandbox", `${e.sandbox} (generation ${e.generation})`],
          ["command", e.cmd.join(" ")],
          ["state", stateText(e)],
          ["started", when(e.startedAt)],
          ["ended", e.endedAt ? when(e.endedAt) : "-"],
        ];
        const w = Math.max(...rows.map(([k]) => k.length));
        return void process.stdout.write(rows.map(([k, v]) => `${k.padEnd(w)}  ${v}`).join("\n") + "\n");
      }
      const { execs } = await c.request<{ execs: DetachedExecView[] }>("GET", `/v1/sandboxes/${enc(name)}/execs`);
      if (o.json) return printJson(execs);
      if (execs.length === 0) return void process.stdout.write("no detached execs\n");
      process.stdout.write(table(["ID", "STATE", "STARTED", "ENDED", "COMMAND"], execs.map((e) => [e.id, stateText(e), when(e.startedAt), e.endedAt ? when(e.endedAt) : "-", e.cmd.join(" ").slice(0, 60)])) + "\n");
    });
}

/** The signals an attached exec forwards, and their numbers (the CLI exits 128 + n when one cannot be delivered). */
const FORWARDED = { SIGINT: ["INT", 2], SIGTERM: ["TERM", 15], SIGHUP: ["HUP", 1], SIGQUIT: ["QUIT", 3] } as const;
/** Ctrl-C this many times and the CLI stops waiting for a command that ignores it. */
export const INTERRUPTS_TO_GIVE_UP = 3;

export const signalNumber = (sig: string): number => Object.values(FORWARDED).find(([s]) => s === sig)?.[1] ?? 0;

/**
 * While a session is open, SIGINT, SIGTERM, SIGHUP and SIGQUIT go to the command (its
 * exit then ends the session with its code, 130 after Ctrl-C). The third Ctrl-C gives up
 * on a command that ignores them: `giveUp(130)`. Returns the uninstaller.
 */
export function forwardSignals(send: (sig: string) => void, giveUp: (code: number) => void): () => void {
  let interrupts = 0;
  const installed = (Object.entries(FORWARDED) as [NodeJS.Signals, (typeof FORWARDED)[keyof typeof FORWARDED]][]).map(([name, [sig, n]]) => {
    const handler = (): void => {
      if (sig === "INT" && ++interrupts >= INTERRUPTS_TO_GIVE_UP) {
        process.stderr.write(`sandgate: interrupted ${interrupts} times; not waiting for the command any longer (it may still run)\n`);
        giveUp(128 + n);
        return;
      }
      send(sig);
    };
    process.on(name, handler);
    return [name, handler] as const;
  });
  return () => {
    for (const [name, handler] of installed) process.off(name, handler);
  };
}
