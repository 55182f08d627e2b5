// Shared pieces of the benchmarks: summary statistics, a table printer, the JSON
// result file, a progress line on stderr, the machine description, a cleanup
// stack that also runs on ^C so no daemon or gateway process outlives a run, and
// the containers the proxy benchmarks share: the direct client and the reference
// proxies (Debian's tinyproxy and squid, built into images from the host's binaries).

import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { readdir } from "node:fs/promises";
import { cpus, freemem, loadavg, totalmem } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { ExecSession } from "../src/driver/contract.js";
import { startExec } from "../src/driver/docker/exec-session.js";
import { DEFAULT_IMAGE_CACHE_DIR, ensurePlannedImage, type ImagePlan } from "../src/driver/docker/images.js";
import { egressNetworkName, SUPERVISOR_RESOURCES } from "../src/driver/docker/objects.js";
import { DEFAULT_IDS, layoutHash, lddLibraries, type RootfsLayout } from "../src/driver/docker/rootfs.js";
import { DEFAULT_RESOURCES } from "../src/lifecycle/spec.js";
import type { DockerFixture } from "../test/support/docker-fixture.js";
import { eventually } from "../test/support/gateway-fixture.js";
import { docker, parseProbe, PROBE_TCP } from "../test/support/sandbox-helpers.js";

export const BENCH_DIR = fileURLToPath(new URL(".", import.meta.url));
/** Where result files go: bench/results, or SANDGATE_BENCH_RESULTS (the test suite's smoke run writes to its own directory). */
export const RESULTS_DIR = process.env.SANDGATE_BENCH_RESULTS || join(BENCH_DIR, "results");
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

let quickRun = false;
/** A --quick run writes <name>.quick.json, so a smoke run never replaces the numbers the docs quote. */
export function markQuickRun(quick: boolean): void {
  quickRun = quick;
}

/** Writes bench/results/<name>.json (<name>.quick.json for --quick): the results plus the machine before and after. */
export function writeResult(name: string, startMachine: Machine, data: unknown): string {
  mkdirSync(RESULTS_DIR, { recursive: true });
  const file = join(RESULTS_DIR, `${name}${quickRun ? ".quick" : ""}.json`);
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

export function parseNumber(v: string | undefined, fallback: number, opts: { zero?: boolean } = {}): number {
  if (v === undefined) return fallback;
  const n = Number(v);
  if (!Number.isFinite(n) || n < 0 || (n === 0 && !opts.zero)) throw new Error(`expected a ${opts.zero ? "non-negative" : "positive"} number, got "${v}"`);
  return n;
}

/** Output and exit status of an exec session (stdin closed at once). */
export async function collect(session: ExecSession): Promise<{ code: number; stdout: string; stderr: string }> {
  session.stdin.end();
  let stdout = "";
  let stderr = "";
  session.stdout.on("data", (b: Buffer) => (stdout += b.toString()));
  session.stderr.on("data", (b: Buffer) => (stderr += b.toString()));
  return { code: await session.exitCode, stdout, stderr };
}

/** The last stdout line of a bench client as JSON; a failed client (exit status or an `error` field) throws, naming it. */
export function parseRun(what: string, r: { code: number; stdout: string; stderr: string }): object {
  const line = r.stdout.trim().split("\n").at(-1) ?? "";
  let parsed: { error?: string } | undefined;
  try {
    parsed = JSON.parse(line) as { error?: string };
  } catch {
    parsed = undefined;
  }
  if (r.code !== 0 || !parsed || parsed.error) throw new Error(`${what} client failed (exit ${r.code}): ${parsed?.error ?? r.stdout.slice(-500)} ${r.stderr.slice(-500)}`);
  return parsed;
}

type ContainerConfig = Parameters<DockerFixture["engine"]["createContainer"]>[1];

/** Create and start a container; returns its id. */
export async function startContainer(fx: DockerFixture, name: string, config: ContainerConfig): Promise<string> {
  const created = await fx.engine.createContainer(name, config);
  if (created.kind !== "ok") throw new Error(`${name} create failed: ${JSON.stringify(created)}`);
  if ((await fx.engine.startContainer(created.body.Id)).kind !== "ok") throw new Error(`${name} start failed`);
  return created.body.Id;
}

/** A container with the workload's image, user and limits, but on the egress network: it has a route to the origin. */
export async function startDirectClient(fx: DockerFixture, name = "bench-direct-client"): Promise<string> {
  const r = DEFAULT_RESOURCES;
  const uid = DEFAULT_IDS.workload;
  return startContainer(fx, name, {
    Image: fx.driver.imageRefs!.workload.id,
    Cmd: ["sleep", "2147483647"],
    User: `${uid}:${uid}`,
    HostConfig: {
      NetworkMode: egressNetworkName(fx.driver.gatewayId),
      Init: true,
      Memory: r.memoryMb * 2 ** 20,
      NanoCpus: Math.round(r.cpus * 1e9),
      PidsLimit: r.pids,
    },
  });
}

/** An ordinary forward proxy the benchmarks compare the supervisor with. */
export type ReferenceProxy = "tinyproxy" | "squid";

/** The port every reference proxy listens on in its container. */
export const REFERENCE_PROXY_PORT = 3128;

/** Where the reference proxies' binaries are by default (Debian's packages; scripts/ensure-docker.sh installs them). */
export const REFERENCE_PROXY_BINARIES: Record<ReferenceProxy, string> = { tinyproxy: "/usr/bin/tinyproxy", squid: "/usr/sbin/squid" };

/** Plain HTTP origins (port 8080) and CONNECT to the TLS origins (port 8443); nothing is cached or logged per request. */
const SQUID_CONF = `http_port ${REFERENCE_PROXY_PORT}
acl http_origin port 8080
acl tls_origin port 8443
acl CONNECT method CONNECT
http_access allow CONNECT tls_origin
http_access allow !CONNECT http_origin
http_access deny all
cache deny all
access_log none
cache_log stdio:/dev/stderr
pid_filename none
logfile_rotate 0
coredump_dir /tmp
# No directory listings are served: no MIME table, no icons.
mime_table /dev/null
icon_directory /tmp
error_directory /usr/share/squid-langpack/templates
shutdown_lifetime 0 seconds
`;

/** No log file (errors go to stderr), no pid file; every client allowed (the egress network is the bench's own). */
const TINYPROXY_CONF = `Port ${REFERENCE_PROXY_PORT}
Listen 0.0.0.0
Timeout 600
MaxClients 100
LogLevel Error
`;

/**
 * Squid's other files beside its binary: an installed squid's, or those of the squid and
 * squid-langpack packages unpacked with dpkg -x into one directory (bin = DIR/usr/sbin/squid).
 */
function squidPaths(bin: string): { templates: string; unlinkd: string } {
  const root = bin.endsWith("/usr/sbin/squid") ? bin.slice(0, -"/usr/sbin/squid".length) || "/" : "/";
  // Squid starts its unlinkd helper even with no disk cache.
  return { templates: join(root, "usr/share/squid-langpack/templates"), unlinkd: join(root, "usr/lib/squid/unlinkd") };
}

/** Files of one reference proxy: its binaries (with their libraries), data files and configuration. */
async function referenceProxyFiles(kind: ReferenceProxy, bin: string): Promise<{ binaries: { src: string; dest: string }[]; data: RootfsLayout["files"]; conf: RootfsLayout["texts"][number]; cmd: string[] }> {
  if (kind === "tinyproxy") {
    return { binaries: [{ src: bin, dest: "/usr/bin/tinyproxy" }], data: [], conf: { dest: "/etc/tinyproxy/tinyproxy.conf", mode: 0o644, content: TINYPROXY_CONF }, cmd: ["/usr/bin/tinyproxy", "-d", "-c", "/etc/tinyproxy/tinyproxy.conf"] };
  }
  const { templates, unlinkd } = squidPaths(bin);
  return {
    binaries: [
      { src: bin, dest: "/usr/sbin/squid" },
      { src: unlinkd, dest: "/usr/lib/squid/unlinkd" },
    ],
    data: (await readdir(templates)).map((f) => ({ src: join(templates, f), dest: `/usr/share/squid-langpack/templates/${f}`, mode: 0o644 })),
    conf: { dest: "/etc/squid/squid.conf", mode: 0o644, content: SQUID_CONF },
    cmd: ["/usr/sbin/squid", "-N", "-f", "/etc/squid/squid.conf"],
  };
}

/** An image of a reference proxy from the host's binary: the binary, its libraries, its data files, as the supervisor's uid. */
async function referenceProxyPlan(kind: ReferenceProxy, bin: string): Promise<ImagePlan> {
  const f = await referenceProxyFiles(kind, bin);
  const libs = [...new Set((await Promise.all(f.binaries.map((b) => lddLibraries(b.src)))).flat())];
  const uid = DEFAULT_IDS.supervisor;
  const layout: RootfsLayout = {
    kind,
    files: [...f.binaries.map((b) => ({ ...b, mode: 0o755 })), ...libs.map((l) => ({ src: l, dest: l, mode: 0o755 })), ...f.data],
    texts: [
      f.conf,
      { dest: "/etc/passwd", mode: 0o644, content: `root:x:0:0:root:/root:/usr/sbin/nologin\nproxy:x:${uid}:${uid}:proxy:/tmp:/usr/sbin/nologin\n` },
      { dest: "/etc/group", mode: 0o644, content: `root:x:0:\nproxy:x:${uid}:\n` },
      { dest: "/etc/nsswitch.conf", mode: 0o644, content: "hosts: files dns\npasswd: files\ngroup: files\n" },
    ],
    dirs: [
      { dest: "/tmp", mode: 0o1777, uid: 0, gid: 0 },
      { dest: "/dev", mode: 0o755, uid: 0, gid: 0 },
      { dest: "/proc", mode: 0o555, uid: 0, gid: 0 },
      { dest: "/sys", mode: 0o555, uid: 0, gid: 0 },
    ],
    symlinks: [],
  };
  const changes = [`USER ${uid}:${uid}`, `CMD ${JSON.stringify(f.cmd)}`];
  const hash = await layoutHash(layout, changes);
  const tag = hash.slice(0, 12);
  const repo = `sandgate-bench-${kind}`;
  return { kind, repo, hash, ref: `${repo}:${tag}`, changes, layout, tarPath: join(DEFAULT_IMAGE_CACHE_DIR, `${kind}-${tag}.tar`) };
}

/**
 * Start a reference proxy in a container on the egress network with the supervisor's default
 * CPU and memory limits, and wait until the direct client (`clientId`) can connect to it.
 * Returns its URL, or null (with a note on stderr) when its binary is absent: the reference
 * row is then skipped, never a failure.
 */
export async function startReferenceProxy(fx: DockerFixture, kind: ReferenceProxy, clientId: string, bin = REFERENCE_PROXY_BINARIES[kind]): Promise<string | null> {
  const needed = kind === "squid" ? [bin, ...Object.values(squidPaths(bin))] : [bin];
  const missing = needed.find((p) => !existsSync(p));
  if (missing !== undefined) {
    process.stderr.write(`\nnote: no ${missing} (bash scripts/ensure-docker.sh installs ${kind}): the ${kind} reference rows are skipped\n`);
    return null;
  }
  progress(`${kind} reference from ${bin}`);
  const img = (await ensurePlannedImage(fx.engine, await referenceProxyPlan(kind, bin), progress)).image;
  const name = `bench-${kind}`;
  const r = SUPERVISOR_RESOURCES;
  await startContainer(fx, name, {
    Image: img.id,
    HostConfig: { NetworkMode: egressNetworkName(fx.driver.gatewayId), Memory: r.memoryMb * 2 ** 20, NanoCpus: Math.round(r.cpus * 1e9), PidsLimit: r.pids, Init: true },
  });
  const probe = ["node", "-e", PROBE_TCP, JSON.stringify([{ host: name, port: REFERENCE_PROXY_PORT }])];
  try {
    await eventually(async () => (parseProbe(await collect(await startExec(fx.engine, clientId, { cmd: probe, tty: false })))[`${name}:${REFERENCE_PROXY_PORT}`] === "connected" ? true : undefined), 30_000, `${kind} to listen`);
  } catch (err) {
    const logs = await docker(fx, "logs", "--tail", "30", name);
    throw new Error(`${(err as Error).message}; ${kind} log: ${logs.stdout} ${logs.stderr}`, { cause: err });
  }
  return `http://${name}:${REFERENCE_PROXY_PORT}`;
}
