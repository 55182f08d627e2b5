// store: the gateway on PostgreSQL (`--store postgres://…`, a throwaway cluster on this
// machine, over its Unix socket) against the same gateway on the embedded SQLite file,
// in one run: create → Ready of N sandboxes (the API, the lifecycle and the store; the
// in-memory test driver, so no Docker time is in it), and the list as `sandbox list`
// reads it at N sandboxes (a lean page of 100, 16 connections; the load generator in a
// second process, bench/api-load.ts). Ratios are PostgreSQL ÷ SQLite. The reference row
// is PostgreSQL itself: the page's SELECT sent straight to the server (no gateway), the
// floor under what the gateway can answer on it.

import pg from "pg";
import { MemoryDriver } from "../test/support/memory-driver.js";
import { startTestGateway } from "../test/support/gateway-fixture.js";
import { startPostgres } from "../test/support/postgres.js";
import type { StoreLocation } from "../src/util/store-url.js";
import { createReady, runLoad } from "./api.js";
import { Cleanup, machine, parseNumber, printTable, progress, stats, writeResult, type BenchOptions } from "./lib.js";

/** The page query straight to PostgreSQL, 16 clients back to back: requests per second. */
async function rawPages(url: string, durationS: number): Promise<number> {
  const pool = new pg.Pool({ connectionString: url, max: 16 });
  try {
    let n = 0;
    const end = performance.now() + durationS * 1000;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (performance.now() < end) {
          await pool.query(`SELECT id, name, phase, reason, generation, created_at, updated_at, runtime FROM sandboxes WHERE name > '' ORDER BY name LIMIT 100`);
          n++;
        }
      }),
    );
    return n / ((performance.now() - t0) / 1000);
  } finally {
    await pool.end();
  }
}

export async function run(o: BenchOptions): Promise<void> {
  const count = parseNumber(o.flags.sandboxes, o.quick ? 50 : 1000);
  const reps = parseNumber(o.flags.reps, o.quick ? 1 : 3);
  const durationS = parseNumber(o.flags.duration, o.quick ? 1 : 5);
  const m = machine();
  const cleanup = new Cleanup();
  try {
    progress("store: starting a throwaway PostgreSQL cluster");
    const cluster = startPostgres();
    cleanup.add("postgres", () => cluster.stop());
    const names = Array.from({ length: count }, (_, i) => `st-${i}`);
    const results: Record<string, { createMsPerSandbox: number[]; pageReqPerSec: number[] }> = {};
    let pgUrl = "";
    for (const [label, store] of [["sqlite", { kind: "sqlite" }], ["postgres", null]] as [string, StoreLocation | null][]) {
      const r = (results[label] = { createMsPerSandbox: [] as number[], pageReqPerSec: [] as number[] });
      for (let rep = 0; rep < reps; rep++) {
        const loc: StoreLocation = store ?? { kind: "postgres", url: (pgUrl = cluster.createDatabase(`bench_${rep}`)) };
        progress(`store: ${label}, run ${rep + 1}/${reps}: creating ${count} sandboxes`);
        const t = await startTestGateway(new MemoryDriver(), { store: loc });
        try {
          r.createMsPerSandbox.push((await createReady(t, names)) / count);
          progress(`store: ${label}, run ${rep + 1}/${reps}: list pages (${durationS} s)`);
          const load = await runLoad({ url: t.url, token: t.token, paths: ["/v1/sandboxes?view=lean&limit=100"], concurrency: 16, durationS, warmupS: 1 });
          if (load.errors > 0) throw new Error(`${load.errors} non-200 answers`);
          r.pageReqPerSec.push(load.reqPerSec);
        } finally {
          await t.close();
        }
      }
    }
    progress("store: the reference (the page's SELECT straight to PostgreSQL)");
    const raw = stats(await Promise.all([rawPages(pgUrl, durationS)]));
    const sq = { create: stats(results.sqlite!.createMsPerSandbox), page: stats(results.sqlite!.pageReqPerSec) };
    const pq = { create: stats(results.postgres!.createMsPerSandbox), page: stats(results.postgres!.pageReqPerSec) };
    printTable(`store: the gateway on PostgreSQL against SQLite, ${count} sandboxes (${reps} runs; ${m.cores} cores, load ${m.loadavg.join("/")})`, ["", "create → Ready ms/sandbox (median)", "list page req/s (median)", "create time ×", "page time ×"], [
      ["SQLite (baseline)", sq.create.median, sq.page.median, 1, 1],
      ["PostgreSQL", pq.create.median, pq.page.median, pq.create.median / sq.create.median, sq.page.median / pq.page.median],
      ["reference: the page's SELECT straight to PostgreSQL", "-", raw.median, "-", "-"],
    ]);
    const file = writeResult("store", m, { sandboxes: count, reps, durationS, driver: "memory (test double)", sqlite: results.sqlite, postgres: results.postgres, rawSelectReqPerSec: raw, ratios: { create: pq.create.median / sq.create.median, page: sq.page.median / pq.page.median } });
    progress(`store: wrote ${file}`);
  } finally {
    await cleanup.run();
  }
}
