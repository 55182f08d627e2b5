// Shared pieces of the benchmarks: summary statistics, a table printer, the JSON
// result file, a progress line on stderr, the machine description, and a cleanup
// stack that also runs on ^C so no daemon or gateway process outlives a run.

import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { cpus, freemem, loadavg, totalmem } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

export const BENCH_DIR = fileURLToPath(new URL(".", import.meta.url));
export const RESULTS_DIR = join(BENCH_DIR, "results");
export const PROJECT_ROOT = join(BENCH_DIR, "..");

export interface BenchOptions {
  /** Fewer repetitions and smaller N: checks the script end to end, numbers are not for the docs. */
  quick: boolean;
  /** `--key=value` flags after the bench names, e.g. `--n=50,100`. */
  flags: Record<string, string>;
}

export interface Stats {
  n: number;
  median: number;
  p95: number;
  p99: number;
  min: number;
  max: number;
  mean: number;
}

/** Nearest-rank percentile of sorted values (p in 0..100). */
function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1]!;
}

export function stats(samples: number[]): Stats {
  const s = [...samples].sort((a, b) => a - b);
  const n = s.length;
  const median = n === 0 ? Number.NaN : n % 2 === 1 ? s[(n - 1) / 2]! : (s[n / 2 - 1]! + s[n / 2]!) / 2;
  return {
    n,
    median,
    p95: percentile(s, 95),
    p99: percentile(s, 99),
    min: s[0] ?? Number.NaN,
    max: s[n - 1] ?? Number.NaN,
    mean: n === 0 ? Number.NaN : s.reduce((a, b) => a + b, 0) / n,
  };
}

export function fmt(v: number | string | null | undefined, digits = 1): string {
  if (v === null || v === undefined) return "n/a";
  if (typeof v === "string") return v;
  if (!Number.isFinite(v)) return "n/a";
  return v.toFixed(digits);
}

export function table(title: string, headers: string[], rows: (string | number | null | undefined)[][]): string {
  const cells = rows.map((r) => r.map((c) => (typeof c === "number" ? fmt(c, Number.isInteger(c) ? 0 : Math.abs(c) < 10 ? 2 : 1) : fmt(c))));
  const widths = headers.map((h, i) => Math.max(h.length, ...cells.map((r) => (r[i] ?? "").length)));
  const line = (r: string[]): string => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ");
  return [`\n## ${title}`, line(headers), line(widths.map((w) => "-".repeat(w))), ...cells.map(line)].join("\n");
}

export function printTable(title: string, headers: string[], rows: (string | number | null | undefined)[][]): void {
  process.stdout.write(table(title, headers, rows) + "\n");
}

export interface Machine {
  cores: number;
  cpuModel: string;
  memGiB: number;
  freeMemGiB: number;
  node: string;
  kernel: string;
  /** 1/5/15-minute load averages: a loaded machine makes every number noisy. */
  loadavg: number[];
}

export function machine(): Machine {
  let kernel = "unknown";
  try {
    kernel = readFileSync("/proc/sys/kernel/osrelease", "utf8").trim();
  } catch {
    /* not Linux */
  }
  return {
    cores: cpus().length,
    cpuModel: cpus()[0]?.model ?? "unknown",
    memGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    freeMemGiB: Math.round((freemem() / 2 ** 30) * 10) / 10,
    node: process.version,
    kernel,
    loadavg: loadavg().map((l) => Math.round(l * 100) / 100),
  };
}

/** Writes bench/results/<name>.json: the results plus the machine before and after. */
export function writeResult(name: string, startMachine: Machine, data: unknown): string {
  mkdirSync(RESULTS_DIR, { recursive: true });
  const file = join(RESULTS_DIR, `${name}.json`);
  const body = { bench: name, time: new Date().toISOString(), machine: startMachine, loadavgAtEnd: machine().loadavg, results: data };
  writeFileSync(file, JSON.stringify(body, null, 2) + "\n");
  return file;
}

let lastProgressLen = 0;
const t0 = Date.now();
/** One status line on stderr, rewritten in place on a terminal. */
export function progress(msg: string): void {
  const line = `[bench ${((Date.now() - t0) / 1000).toFixed(0).padStart(4)} s] ${msg}`;
  if (process.stderr.isTTY) {
    process.stderr.write(`\r${line.padEnd(lastProgressLen)}`);
    lastProgressLen = line.length;
  } else {
    process.stderr.write(line + "\n");
  }
}

export function progressDone(): void {
  if (process.stderr.isTTY && lastProgressLen > 0) process.stderr.write("\n");
  lastProgressLen = 0;
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Run `fn` over `items` with at most `limit` in flight; results keep the order. */
export async function mapLimit<T, R>(items: T[], limit: number, fn: (item: T, i: number) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

/**
 * Cleanup actions, last registered first. They run when the bench finishes or
 * fails, and on SIGINT/SIGTERM (then the process exits 130).
 */
export class Cleanup {
  private readonly actions: { what: string; fn: () => Promise<void> | void }[] = [];
  private running: Promise<void> | undefined;
  private readonly onSignal = (): void => {
    progress("interrupted: cleaning up");
    void this.run().finally(() => process.exit(130));
  };

  constructor() {
    process.once("SIGINT", this.onSignal);
    process.once("SIGTERM", this.onSignal);
  }

  add(what: string, fn: () => Promise<void> | void): void {
    this.actions.push({ what, fn });
  }

  run(): Promise<void> {
    return (this.running ??= (async () => {
      process.off("SIGINT", this.onSignal);
      process.off("SIGTERM", this.onSignal);
      while (this.actions.length > 0) {
        const a = this.actions.pop()!;
        try {
          await a.fn();
        } catch (err) {
          process.stderr.write(`\ncleanup "${a.what}" failed: ${(err as Error).message}\n`);
        }
      }
    })());
  }
}

export function parseList(v: string | undefined, fallback: number[]): number[] {
  if (v === undefined) return fallback;
  const ns = v.split(",").map((x) => Number(x.trim()));
  if (ns.some((n) => !Number.isInteger(n) || n <= 0)) throw new Error(`expected a list of positive integers, got "${v}"`);
  return ns;
}

export function parseNumber(v: string | undefined, fallback: number): number {
  if (v === undefined) return fallback;
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`expected a positive number, got "${v}"`);
  return n;
}
