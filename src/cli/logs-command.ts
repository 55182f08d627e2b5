// `sandgate sandbox logs NAME`: a sandbox's output, the workload's stdout on our stdout
// and its stderr on our stderr, from GET /v1/sandboxes/:name/logs (NDJSON records).
//
// The records come from the SDK's reader (src/sdk/logs.ts), which resumes a stream the
// gateway cuts without its last record (it restarted, the connection broke) with no
// line twice or lost, for up to RESUME_WINDOW_MS while the gateway is away, and keeps
// to the generation read first.

import { Command } from "commander";
import { readLogs } from "../sdk/logs.js";
import type { LogRecord } from "../sdk/types.js";
import { intArg, sinceArg } from "./args.js";
import { GatewayClient } from "./client.js";
import { CliError, EXIT, cliErrorOf } from "./errors.js";

interface Common {
  home?: string;
  url?: string;
}

interface Options {
  follow?: boolean;
  tail?: number;
  since?: string;
  timestamps?: boolean;
  supervisor?: boolean;
  previous?: boolean;
  generation?: number;
  json?: boolean;
}

const TAIL = { min: 0, max: 1_000_000 };
const GENERATION = { min: 1, max: 999_999_999 };


export function logsCommand(sandbox: Command, global: () => Common): void {
  sandbox
    .command("logs")
    .description("show a sandbox's output: the workload's stdout on stdout, its stderr on stderr")
    .argument("<name>", "sandbox name or id")
    .option("-f, --follow", "keep printing as it writes, until it stops (Ctrl-C ends); survives Docker daemon and gateway restarts")
    .option("--tail <n>", `only the last N lines (${TAIL.min}-${TAIL.max}), then follow`, intArg("--tail", TAIL))
    .option("--since <time>", "only lines at or after an RFC 3339 time, or a duration back from now (90s, 10m, 2h, 7d)", sinceArg("--since"))
    .option("--timestamps", "start each line with the time Docker read it (RFC 3339, UTC, nanoseconds)")
    .option("--supervisor", "the supervisor's log (JSON lines) instead of the workload's output")
    .option("--previous", "the previous generation's output (kept until the sandbox is deleted)")
    .option("--generation <n>", "this generation's output (the current and the previous one are kept)", intArg("--generation", GENERATION))
    .option("--json", "one JSON object per line as the gateway sends it: t (time), s (out|err), l (text), p (no newline ended it)")
    .addHelpText(
      "after",
      `
Examples:
  sandgate sandbox logs demo --tail 20
  sandgate sandbox logs demo -f --since 10m --timestamps
  sandgate sandbox logs demo --previous 2> errors.txt

Each container keeps at most the gateway's --container-log-size × --container-log-files
(default 10 MiB × 3) of output; older lines go first.`,
    )
    .action(async (name: string, o: Options) => {
      if (o.previous && o.generation !== undefined) throw new CliError("--previous and --generation both name a generation; give one of them", EXIT.usage);
      process.exitCode = await followLogs(global, name, o);
    });
}

/** The read in progress, for the one EPIPE listener of the process. */
let reading: AbortController | null = null;
let pipeWatched = false;

async function followLogs(global: () => Common, name: string, o: Options): Promise<number> {
  const ac = new AbortController();
  const onSigint = (): void => ac.abort();
  process.once("SIGINT", onSigint);
  reading = ac;
  if (!pipeWatched) {
    // A reader that went away (`| head`): stop quietly, as cat does. Installed once, kept:
    // an EPIPE reported after the read ended must not crash the process either.
    pipeWatched = true;
    const onPipe = (err: NodeJS.ErrnoException): void => {
      if (err.code === "EPIPE") reading?.abort();
    };
    process.stdout.on("error", onPipe);
    process.stderr.on("error", onPipe);
  }
  try {
    await readAll(global, name, o, ac.signal);
    return EXIT.ok;
  } catch (err) {
    if (ac.signal.aborted) return EXIT.ok;
    throw err;
  } finally {
    process.off("SIGINT", onSigint);
    reading = null;
  }
}

async function readAll(global: () => Common, name: string, o: Options, signal: AbortSignal): Promise<void> {
  // The stream each of our outputs is in the middle of a line of (a partial record came last).
  const midLine = { out: false, err: false };
  const records = readLogs(() => new GatewayClient(global()).transport, name, {
    signal,
    ...(o.follow ? { follow: true } : {}),
    ...(o.supervisor ? { stream: "supervisor" as const } : {}),
    ...(o.previous ? { generation: "previous" as const } : o.generation === undefined ? {} : { generation: o.generation }),
    ...(o.since === undefined ? {} : { since: o.since }),
    ...(o.tail === undefined ? {} : { tail: o.tail }),
  });
  try {
    for await (const rec of records) {
      const wait = print(rec, o, midLine, signal);
      // A slow reader of our output slows the stream (and the gateway, and Docker), nothing queues.
      if (wait) await wait;
    }
  } catch (err) {
    throw cliErrorOf(err);
  }
}

/** Writes one record; a promise when that output asks us to wait for "drain" (or it fails, or we stop). */
function print(rec: LogRecord, o: Options, midLine: Record<"out" | "err", boolean>, signal: AbortSignal): Promise<void> | undefined {
  let ok: boolean;
  const out = rec.s === "err" ? process.stderr : process.stdout;
  if (o.json) ok = process.stdout.write(JSON.stringify(rec) + "\n");
  else {
    const prefix = o.timestamps && !midLine[rec.s] ? `${rec.t} ` : "";
    midLine[rec.s] = rec.p === true;
    ok = out.write(prefix + rec.l + (rec.p ? "" : "\n"));
  }
  if (ok || signal.aborted) return undefined;
  const target = o.json ? process.stdout : out;
  return new Promise((resolve) => {
    const done = (): void => {
      for (const e of ["drain", "error", "close"]) target.off(e, done);
      signal.removeEventListener("abort", done);
      resolve();
    };
    for (const e of ["drain", "error", "close"]) target.once(e, done);
    signal.addEventListener("abort", done, { once: true });
  });
}
