// `npm run bench` runs every benchmark; `npm run bench -- create proxy` runs the
// named ones. Flags: --quick (small N, few repetitions: a smoke run, not numbers
// for the docs), --jobs=N (N benches at a time: smoke runs only) and --key=value
// options a bench reads (e.g. --n=50,100).
// Several benches run one after another, each in its own process, so one's
// leftovers (heap, daemon load) do not colour the next one's numbers.

import { spawn } from "node:child_process";
import { once } from "node:events";
import { join } from "node:path";
import { BENCHES } from "./benches.js";
import { BENCH_DIR, mapLimit, markQuickRun, progressDone, type BenchOptions } from "./lib.js";

type Name = keyof typeof BENCHES;

/** Bad arguments: reported in one line, without a stack trace. */
class UsageError extends Error {}
const isName = (s: string): s is Name => Object.hasOwn(BENCHES, s);

/** --jobs=N: benches run N at a time (for smoke runs; figures for the docs come from one at a time). */
const JOBS = { min: 1, max: 9 };

function parseArgs(argv: string[]): { names: Name[]; opts: BenchOptions; passthrough: string[]; jobs: number } {
  const names: Name[] = [];
  const flags: Record<string, string> = {};
  const passthrough: string[] = [];
  let quick = false;
  let jobs = 1;
  for (const a of argv) {
    if (a.startsWith("--jobs=")) {
      const v = a.slice("--jobs=".length);
      jobs = /^[0-9]+$/.test(v) ? Number(v) : Number.NaN;
      if (!(jobs >= JOBS.min && jobs <= JOBS.max)) throw new UsageError(`--jobs must be a whole number from ${JOBS.min} to ${JOBS.max}, got "${v}"`);
    } else if (a === "--quick") {
      quick = true;
      passthrough.push(a);
    } else if (a.startsWith("--")) {
      const eq = a.indexOf("=");
      if (eq < 0) throw new UsageError(`flag ${a} needs a value: --key=value`);
      flags[a.slice(2, eq)] = a.slice(eq + 1);
      passthrough.push(a);
    } else if (isName(a)) {
      names.push(a);
    } else {
      throw new UsageError(`unknown benchmark "${a}"; known: ${Object.keys(BENCHES).join(", ")}`);
    }
  }
  return { names: names.length > 0 ? names : (Object.keys(BENCHES) as Name[]), opts: { quick, flags }, passthrough, jobs };
}

async function main(): Promise<number> {
  const { names, opts, passthrough, jobs } = parseArgs(process.argv.slice(2));
  if (names.length === 1) {
    const mod = await BENCHES[names[0]!]();
    markQuickRun(opts.quick);
    await mod.run(opts);
    progressDone();
    // Everything the bench started is cleaned up by now; an idle keep-alive socket must not hold the process.
    process.exit(0);
  }
  const failed: string[] = [];
  await mapLimit(names, jobs, async (name) => {
    const child = spawn(process.execPath, [...process.execArgv, join(BENCH_DIR, "run.ts"), name, ...passthrough], { stdio: "inherit" });
    const [code, signal] = (await once(child, "close")) as [number | null, NodeJS.Signals | null];
    if (code !== 0) failed.push(`${name} (${signal ?? `exit ${code ?? "?"}`})`);
  });
  if (failed.length > 0) process.stderr.write(`\nfailed: ${failed.join(", ")}\n`);
  return failed.length > 0 ? 1 : 0;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    progressDone();
    if (err instanceof UsageError) {
      process.stderr.write(`bench: ${err.message}\n`);
      process.exitCode = 2;
      return;
    }
    process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exitCode = 1;
  },
);
