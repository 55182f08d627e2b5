// `sandgate sandbox logs NAME`: a sandbox's output, the workload's stdout on our stdout
// and its stderr on our stderr, from GET /v1/sandboxes/:name/logs (NDJSON records).
//
// A stream the gateway cuts without its last record (it restarted, the connection
// broke) is resumed: ask again with since = the time of the last line printed and drop
// the lines of that time already printed (src/util/log-cursor.ts), for up to
// RESUME_WINDOW_MS while the gateway is away. The generation read first is kept for
// the resumes, so a restart into a new generation never mixes two generations.

import { Command, InvalidArgumentError } from "commander";
import { ResumeFilter } from "../util/log-cursor.js";
import { parseSince } from "../util/log-time.js";
import { SettingError } from "../util/settings.js";
import { DEFAULT_BACKOFF, backoffDelay } from "../util/backoff.js";
import { intArg } from "./args.js";
import { GatewayClient } from "./client.js";
import { CliError, EXIT, exitCodeForApi } from "./errors.js";

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

/** One record of the gateway's stream. */
interface LogRecord {
  t: string;
  s: "out" | "err";
  l: string;
  p?: true;
}

/** How long a resume waits for a gateway that went away. */
export const RESUME_WINDOW_MS = 60_000;
/** No byte (not even the gateway's keep-alive line, every 15 s) for this long: the connection is dead; resume. */
const IDLE_MS = 60_000;
/** Waiting for the answer's headers. */
const HEADERS_MS = 30_000;

const TAIL = { min: 0, max: 1_000_000 };
const GENERATION = { min: 1, max: 999_999_999 };

function sinceArg(v: string): string {
  try {
    return parseSince("--since", v, new Date());
  } catch (err) {
    if (err instanceof SettingError) throw new InvalidArgumentError(err.message);
    throw err;
  }
}

class Cut extends Error {}

export function logsCommand(sandbox: Command, global: () => Common): void {
  sandbox
    .command("logs")
    .description("show a sandbox's output: the workload's stdout on stdout, its stderr on stderr")
    .argument("<name>", "sandbox name or id")
    .option("-f, --follow", "keep printing as it writes, until it stops (Ctrl-C ends); survives Docker daemon and gateway restarts")
    .option("--tail <n>", `only the last N lines (${TAIL.min}-${TAIL.max}), then follow`, intArg("--tail", TAIL))
    .option("--since <time>", "only lines at or after an RFC 3339 time, or a duration back from now (90s, 10m, 2h, 7d)", sinceArg)
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
  const filter = new ResumeFilter(null);
  let generation = o.previous ? "previous" : o.generation === undefined ? undefined : String(o.generation);
  // The stream each of our outputs is in the middle of a line of (a partial record came last).
  const midLine = { out: false, err: false };
  let connected = false;
  let awaySince: number | undefined;
  let attempt = 0;
  for (;;) {
    if (signal.aborted) return;
    const q = new URLSearchParams();
    if (o.follow) q.set("follow", "1");
    if (o.supervisor) q.set("stream", "supervisor");
    if (generation !== undefined) q.set("generation", generation);
    const cursor = filter.cursor;
    if (cursor !== null) q.set("since", cursor.t);
    else {
      if (o.since !== undefined) q.set("since", o.since);
      if (o.tail !== undefined) q.set("tail", String(o.tail));
    }
    try {
      const res = await open(global, `/v1/sandboxes/${encodeURIComponent(name)}/logs?${q.toString()}`, signal);
      // Resumes read the generation the first answer was.
      generation = res.headers.get("x-sandgate-generation") ?? generation;
      connected = true;
      awaySince = undefined;
      attempt = 0;
      filter.rewind();
      if (await readStream(res, filter, o, midLine, signal)) return;
    } catch (err) {
      if (signal.aborted) return;
      // Only a gateway that answered before may be waited for; a first failure is reported as it is.
      const away = err instanceof Cut || (err instanceof CliError && err.exitCode === EXIT.unreachable);
      if (!connected || !away) throw err instanceof Cut ? new CliError(err.message, EXIT.unreachable) : err;
      awaySince ??= Date.now();
      if (Date.now() - awaySince > RESUME_WINDOW_MS) {
        throw err instanceof CliError ? err : new CliError(`the log stream broke and the gateway did not come back within ${RESUME_WINDOW_MS / 1000} s: ${err.message}`, EXIT.unreachable);
      }
      await new Promise((r) => setTimeout(r, backoffDelay(attempt++, Math.random(), DEFAULT_BACKOFF)));
    }
  }
}

/** One request; its answer once the headers are in (an error answer becomes a CliError). */
async function open(global: () => Common, path: string, signal: AbortSignal): Promise<Response> {
  // A new client each time: a restarted gateway may have written a new address.
  const client = new GatewayClient(global());
  const attempt = new AbortController();
  const stop = (): void => attempt.abort();
  signal.addEventListener("abort", stop, { once: true });
  const timer = setTimeout(stop, HEADERS_MS);
  let res: Response;
  try {
    res = await client.raw("GET", path, undefined, attempt.signal);
  } catch (err) {
    if (!signal.aborted && attempt.signal.aborted) throw new CliError(`the gateway at ${client.url} did not answer in time`, EXIT.timeout);
    throw err;
  } finally {
    clearTimeout(timer);
    signal.removeEventListener("abort", stop);
  }
  if (res.ok && res.body) return res;
  const body = (await res.json().catch(() => null)) as { error?: { code?: string; message?: string } } | null;
  throw new CliError(body?.error?.message ?? `the gateway answered HTTP ${res.status}`, exitCodeForApi(body?.error?.code ?? "internal"));
}

/**
 * Prints the records of one answer. True at its last record (the log ended); throws
 * Cut when the stream stops without one, a CliError for an error record.
 */
async function readStream(res: Response, filter: ResumeFilter, o: Options, midLine: Record<"out" | "err", boolean>, signal: AbortSignal): Promise<boolean> {
  const reader = res.body!.getReader();
  const stop = (): void => void reader.cancel().catch(() => undefined);
  signal.addEventListener("abort", stop, { once: true });
  let idle: NodeJS.Timeout | undefined;
  let idled = false;
  const arm = (): void => {
    clearTimeout(idle);
    idle = setTimeout(() => {
      idled = true;
      stop();
    }, IDLE_MS);
  };
  const decoder = new TextDecoder();
  let buf = "";
  try {
    arm();
    for (;;) {
      let chunk: Awaited<ReturnType<typeof reader.read>>;
      try {
        chunk = await reader.read();
      } catch (err) {
        throw new Cut(`the log stream broke: ${(err as Error).message}`);
      }
      if (chunk.done) break;
      arm();
      buf += decoder.decode(chunk.value as Uint8Array, { stream: true });
      let i: number;
      while ((i = buf.indexOf("\n")) >= 0) {
        const text = buf.slice(0, i);
        buf = buf.slice(i + 1);
        if (text === "") continue; // keep-alive
        const rec = JSON.parse(text) as LogRecord | { end: string } | { error: { code: string; message: string } };
        if ("end" in rec) return true;
        if ("error" in rec) throw new CliError(rec.error.message, exitCodeForApi(rec.error.code));
        if (!filter.accept(rec.t)) continue;
        const wait = print(rec, o, midLine, signal);
        // A slow reader of our output slows the stream (and the gateway, and Docker), nothing queues.
        if (wait) await wait;
      }
    }
    if (signal.aborted) return true;
    throw new Cut(idled ? `nothing from the gateway for ${IDLE_MS / 1000} s` : "the gateway ended the log stream without its last record");
  } finally {
    clearTimeout(idle);
    signal.removeEventListener("abort", stop);
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
