// Runs the real `sandgate` CLI as a child process: the plain-JS copy of src/ that
// test/support/global-setup.ts compiles at the start of every run.

import { spawn } from "node:child_process";
import { CLI_MAIN } from "./cli-build.js";

/**
 * The deadline of a test that spawns the CLI: each spawn loads it (about 0.4 s on a quiet
 * machine, several seconds at a load of 14 on 2 cores), so a test of ten spawns can pass
 * 60 s on a busy machine without being hung. Only a hang should reach this.
 */
export const CLI_TEST_TIMEOUT_MS = 240_000;

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function cli(args: string[], env: Record<string, string | undefined> = {}, stdin?: string): Promise<CliRun> {
  return runNode([CLI_MAIN, ...args], { env: { ...process.env, SANDGATE_URL: undefined, SANDGATE_TOKEN: undefined, ...env }, ...(stdin === undefined ? {} : { stdin }) });
}

/** Runs `node ARGV` to its end: its exit code and everything it printed (stdin: `stdin`, then closed). */
export function runNode(argv: string[], o: { env: Record<string, string | undefined>; cwd?: string; stdin?: string }): Promise<CliRun> {
  return runProgram(process.execPath, argv, o);
}

/** Runs `file ARGV` to its end, like runNode (a shell running the CLI, say). */
export function runProgram(file: string, argv: string[], o: { env: Record<string, string | undefined>; cwd?: string; stdin?: string }): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const p = spawn(file, argv, { env: o.env, ...(o.cwd === undefined ? {} : { cwd: o.cwd }), stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    p.stdout.on("data", (b: Buffer) => (stdout += b.toString()));
    p.stderr.on("data", (b: Buffer) => (stderr += b.toString()));
    p.on("error", reject);
    p.on("close", (code) => resolve({ code, stdout, stderr }));
    p.stdin.on("error", () => {}); // a child that exits without reading its input
    p.stdin.end(o.stdin ?? "");
  });
}

/** The command line to run the CLI from a shell (e.g. inside tmux). */
export const CLI_COMMAND = `${process.execPath} ${CLI_MAIN}`;

/** The CLI as argv (for a test that drives the process itself, e.g. to send it a signal). */
export const CLI_ARGS: readonly string[] = [process.execPath, CLI_MAIN];
