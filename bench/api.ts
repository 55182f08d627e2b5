// api: throughput of the sandbox list and of GET /v1/sandboxes/:name (the
// reference) with 1,000 sandboxes in the store. The list as `sandbox list` reads
// it: the first lean page of 100, and the whole walk page by page (its 10 page
// URLs round-robin; walks/s = req/s ÷ pages); and the unpaged full view, as it
// was before paging. The gateway (real store, service and HTTP API on the
// in-memory test driver: no Docker needed to read the store) runs in this
// process; the load comes from a second process (bench/api-load.ts).

import { spawn } from "node:child_process";
import { join } from "node:path";
import { MemoryDriver } from "../test/support/memory-driver.js";
import { startTestGateway, type TestGateway } from "../test/support/gateway-fixture.js";
import { BENCH_DIR, Cleanup, PROJECT_ROOT, machine, mapLimit, parseNumber, printTable, progress, sleep, stats, writeResult, type BenchOptions, type Stats } from "./lib.js";

interface LoadResult {
  requests: number;
  errors: number;
  sec: number;
  reqPerSec: number;
  meanBytes: number;
  latencyMs: Stats;
  loadGenCpuPct: number;
}

/** Runs the load generator; also returns this process's (the gateway's) CPU % of a core during the measured phase. */
export function runLoad(cfg: object): Promise<LoadResult & { gatewayCpuPct: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", join(BENCH_DIR, "api-load.ts"), JSON.stringify(cfg)], { cwd: PROJECT_ROOT, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    let cpu0: NodeJS.CpuUsage | undefined;
    let w0 = 0;
    let gatewayCpuPct = Number.NaN;
    child.stdout.on("data", (b: Buffer) => {
      out += b.toString();
      if (cpu0 === undefined && out.includes("measure-start\n")) {
        cpu0 = process.cpuUsage();
        w0 = performance.now();
      } else if (cpu0 !== undefined && Number.isNaN(gatewayCpuPct) && out.endsWith("}\n")) {
        const cpu = process.cpuUsage(cpu0);
        gatewayCpuPct = ((cpu.user + cpu.system) / 1e3 / (performance.now() - w0)) * 100;
      }
    });
    child.stderr.on("data", (b: Buffer) => (err += b.toString()));
    child.on("error", reject);
    child.on("exit", (code) => {
      if (code !== 0) return reject(new Error(`load generator exited ${code ?? "?"}: ${err.slice(-1000)}`));
      try {
        resolve({ ...(JSON.parse(out.trim().split("\n").at(-1) ?? "") as LoadResult), gatewayCpuPct });
      } catch {
        reject(new Error(`load generator printed no result: ${out.slice(-500)} ${err.slice(-500)}`));
      }
    });
  });
}

/** Create `names` through the API, 8 at a time, until every one is Ready; the milliseconds it took. */
export async function createReady(t: TestGateway, names: string[]): Promise<number> {
  const t0 = performance.now();
  await mapLimit(names, 8, async (name) => {
    const r = await t.api("POST", "/v1/sandboxes", { name });
    if (r.status !== 201) throw new Error(`create ${name}: ${r.status} ${JSON.stringify(r.body)}`);
  });
  await t.gw.idle();
  const ms = performance.now() - t0;
  const notReady = (await t.gw.read.list()).filter((s) => s.phase !== "Ready").length;
  if (notReady > 0) throw new Error(`${notReady} of ${names.length} sandboxes are not Ready`);
  return ms;
}

export async function run(o: BenchOptions): Promise<void> {
  const count = parseNumber(o.flags.sandboxes, o.quick ? 50 : 1000);
  const reps = parseNumber(o.flags.reps, o.quick ? 1 : 3);
  const durationS = parseNumber(o.flags.duration, o.quick ? 1 : 5);
  const m = machine();
  const cleanup = new Cleanup();
  try {
    progress("api: starting a gateway on the in-memory driver");
    const t = await startTestGateway(new MemoryDriver());
    cleanup.add("gateway", () => t.close());
    const names = Array.from({ length: count }, (_, i) => `api-${i}`);
    await createReady(t, names);
    progress(`api: ${count} sandboxes Ready`);

    // The walk's page URLs, as the CLI follows them (`next` of each page).
    const walk: string[] = [];
    for (let after: string | null = ""; after !== null; ) {
      const path: string = `/v1/sandboxes?view=lean&limit=100${after ? `&after=${after}` : ""}`;
      const r = await t.api("GET", path);
      if (r.status !== 200) throw new Error(`${path}: ${r.status} ${JSON.stringify(r.body)}`);
      walk.push(path);
      after = (r.body as { next: string | null }).next;
    }
    const gets = names.map((n) => `/v1/sandboxes/${n}`);
    const scenarios = [
      { name: "page", label: "GET /v1/sandboxes?view=lean&limit=100", paths: [walk[0]!], concurrency: 16 },
      { name: "walk", label: `walk: ${walk.length} lean pages of 100`, paths: walk, concurrency: 16 },
      { name: "get", label: "GET /v1/sandboxes/:name", paths: gets, concurrency: 16 },
      { name: "full", label: "GET /v1/sandboxes (full view, unpaged)", paths: ["/v1/sandboxes"], concurrency: 16 },
      { name: "page", label: "GET /v1/sandboxes?view=lean&limit=100", paths: [walk[0]!], concurrency: 1 },
      { name: "walk", label: `walk: ${walk.length} lean pages of 100`, paths: walk, concurrency: 1 },
      { name: "get", label: "GET /v1/sandboxes/:name", paths: gets, concurrency: 1 },
    ].filter((s) => !o.quick || s.concurrency > 1); // a smoke run: each request kind once
    const rows: (string | number)[][] = [];
    const out: Record<string, unknown>[] = [];
    for (const s of scenarios) {
      const runs: LoadResult[] = [];
      const gwCpu: number[] = [];
      for (let rep = 0; rep < reps; rep++) {
        progress(`api: ${s.name} c=${s.concurrency}, run ${rep + 1}/${reps} (${durationS} s)`);
        const r = await runLoad({ url: t.url, token: t.token, paths: s.paths, concurrency: s.concurrency, durationS, warmupS: 1 });
        gwCpu.push(r.gatewayCpuPct);
        if (r.errors > 0) throw new Error(`${r.errors} non-200 answers for ${s.name}`);
        runs.push(r);
        await sleep(500);
      }
      const rps = stats(runs.map((r) => r.reqPerSec));
      const p50 = stats(runs.map((r) => r.latencyMs.median));
      const p95 = stats(runs.map((r) => r.latencyMs.p95));
      const walksPerSec = s.name === "walk" ? rps.median / walk.length : null;
      rows.push([s.label, s.concurrency, rps.median, rps.min, walksPerSec ?? "-", p50.median, p95.median, runs[0]!.meanBytes / 1024, stats(gwCpu).median, stats(runs.map((r) => r.loadGenCpuPct)).median]);
      out.push({ scenario: s.name, concurrency: s.concurrency, reqPerSec: rps, walksPerSec, latencyP50Ms: p50, latencyP95Ms: p95, gatewayCpuPct: stats(gwCpu), runs });
    }
    printTable(`api with ${count} sandboxes (${reps} runs of ${durationS} s each, load generator in a second process, ${m.cores} cores, load ${m.loadavg.join("/")})`, [
      "request",
      "conc.",
      "req/s (median run)",
      "(worst run)",
      "walks/s",
      "p50 ms",
      "p95 ms",
      "body KiB",
      "gateway CPU %",
      "loadgen CPU %",
    ], rows);
    const file = writeResult("api", m, { sandboxes: count, reps, durationS, driver: "memory (test double): the API reads only the store", scenarios: out });
    progress(`api: wrote ${file}`);
  } finally {
    await cleanup.run();
  }
}
