// audit-flood: a workload sends denied requests as fast as it can up to a target
// rate (default 1000/s) for a while (default 60 s) at one sandbox. Reported, in
// the same run: state.db growth, the p99 of `GET /v1/sandboxes/:name` during the
// flood against the p99 with no flood, the longest event-loop stall of the gateway
// (it runs in this process), and the rate the workload reached.
// Targets (issue "bad input"): ≤ 5 MB growth, p99 ≤ 2× quiet, no stall over 100 ms.

import { statSync } from "node:fs";
import { monitorEventLoopDelay, performance } from "node:perf_hooks";
import { startDockerFixture } from "../test/support/docker-fixture.js";
import { Cleanup, machine, parseNumber, printTable, progress, sleep, stats, writeResult, type BenchOptions, type Stats } from "./lib.js";
import { apiFetch } from "../test/support/api-client.js";

/** In the workload: denied requests through the proxy at up to RATE/s; prints the count every second. */
const FLOOD = (rate: number, seconds: number): string => `
const http = require("http");
const proxy = new URL(process.env.HTTP_PROXY);
const agent = new http.Agent({ keepAlive: true, maxSockets: 16 });
let sent = 0, done = 0, denied = 0;
const end = Date.now() + ${seconds * 1000};
function one() {
  sent++;
  const q = http.get({ host: proxy.hostname, port: proxy.port, path: "http://denied.example/x", agent }, (r) => {
    r.resume();
    r.on("end", () => { done++; if (r.statusCode === 403) denied++; });
  });
  q.on("error", () => done++);
}
const tick = setInterval(() => {
  if (Date.now() > end) { clearInterval(tick); setTimeout(() => { console.log(JSON.stringify({ sent, done, denied })); process.exit(0); }, 2000); return; }
  const inFlight = sent - done;
  for (let i = 0; i < ${Math.ceil(rate / 100)} && inFlight + i < 64; i++) one();
}, 10);
`;

async function probeLatency(url: string, path: string, token: string, ms: number): Promise<Stats> {
  const samples: number[] = [];
  const until = Date.now() + ms;
  while (Date.now() < until) {
    const t0 = performance.now();
    const r = await apiFetch(url, path, { headers: { authorization: `Bearer ${token}` } });
    await r.arrayBuffer();
    samples.push(performance.now() - t0);
    await sleep(20);
  }
  return stats(samples);
}

const dbBytes = (db: string): number => ["", "-wal"].reduce((n, s) => n + (() => { try { return statSync(db + s).size; } catch { return 0; } })(), 0);

export async function run(o: BenchOptions): Promise<void> {
  const rate = parseNumber(o.flags.rate, 1000);
  const seconds = parseNumber(o.flags.duration, o.quick ? 2 : 60);
  const quietMs = o.quick ? 1000 : 10_000;
  const m = machine();
  const cleanup = new Cleanup();
  try {
    progress("audit-flood: starting a private dockerd and a gateway");
    const fx = await startDockerFixture({ liveRestore: true, name: "flood" });
    cleanup.add("fixture", () => fx.close());
    const created = await fx.t.api("POST", "/v1/sandboxes", { name: "flood" });
    if (created.status !== 201) throw new Error(`create: ${JSON.stringify(created.body)}`);
    for (;;) {
      const s = await fx.t.api("GET", "/v1/sandboxes/flood");
      if (s.body.phase === "Ready") break;
      if (s.body.phase === "Error") throw new Error(`sandbox failed: ${s.body.reasonText}`);
      await sleep(200);
    }
    const url = fx.t.url;
    const path = "/v1/sandboxes/flood";
    progress(`audit-flood: quiet p99 of GET /v1/sandboxes/flood (${quietMs / 1000} s)`);
    const quiet = await probeLatency(url, path, fx.t.token, quietMs);

    const dbBefore = dbBytes(fx.t.home.db);
    const auditBefore = (await fx.t.api("GET", "/v1/status")).body.audit;
    const h = monitorEventLoopDelay({ resolution: 10 });
    h.enable();
    progress(`audit-flood: the workload floods denied requests at up to ${rate}/s for ${seconds} s`);
    const session = await fx.t.gw.service.exec("flood", { cmd: ["node", "-e", FLOOD(rate, seconds)], tty: false });
    session.stdin.end();
    let out = "";
    session.stdout.on("data", (b: Buffer) => (out += b.toString()));
    session.stderr.resume();
    const during = await probeLatency(url, path, fx.t.token, seconds * 1000);
    await session.exitCode;
    h.disable();
    // Let the last aggregated records land (flushes every 1 s in the supervisor, 250 ms here).
    await sleep(2500);
    const counts = JSON.parse(out.trim().split("\n").at(-1) ?? "{}") as { sent?: number; done?: number; denied?: number };
    const dbAfter = dbBytes(fx.t.home.db);
    const auditAfter = (await fx.t.api("GET", "/v1/status")).body.audit;
    const rows = (await fx.t.api("GET", "/v1/sandboxes/flood/audit?tail=10000")).body.audit.length as number;

    const result = {
      targetRate: rate,
      seconds,
      achievedRate: (counts.denied ?? 0) / seconds,
      denied: counts.denied ?? 0,
      auditRowsWritten: auditAfter.written - auditBefore.written,
      auditRowsKept: rows,
      dbGrowthMb: (dbAfter - dbBefore) / 2 ** 20,
      quiet,
      during,
      p99Ratio: during.p99 / quiet.p99,
      maxStallMs: h.max / 1e6,
    };
    printTable(
      `audit-flood: ${result.denied} denied requests in ${seconds} s (${result.achievedRate.toFixed(0)}/s of ${rate}/s target); load ${m.loadavg.join(" ")}`,
      ["figure", "value", "target"],
      [
        ["state.db growth (MB)", result.dbGrowthMb, "≤ 5"],
        ["audit rows written", result.auditRowsWritten, ""],
        ["GET p99 quiet (ms)", quiet.p99, ""],
        ["GET p99 during flood (ms)", during.p99, ""],
        ["p99 ratio", result.p99Ratio, "≤ 2"],
        ["longest event-loop stall (ms)", result.maxStallMs, "≤ 100"],
      ],
    );
    progress(`audit-flood: results in ${writeResult("audit-flood", m, result)}`);
  } finally {
    await cleanup.run();
  }
}
