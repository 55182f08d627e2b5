// Load generator for the api bench, run as its own process: `concurrency`
// keep-alive connections, each issuing GETs back to back for `durationS`
// seconds after a short warm-up. Prints one JSON line with the counts and latency stats.

import { Pool } from "undici";
import { stats } from "./lib.js";

interface LoadConfig {
  url: string;
  token: string;
  /** Paths to request, taken round-robin. */
  paths: string[];
  concurrency: number;
  durationS: number;
  warmupS: number;
}

async function main(): Promise<void> {
  const cfg = JSON.parse(process.argv[2] ?? "{}") as LoadConfig;
  // The gateway's unix:// URL: its API socket.
  const pool = new Pool("http://sandgate", { socketPath: cfg.url.replace(/^unix:\/\//, ""), connections: cfg.concurrency, pipelining: 1 });
  const headers = { authorization: `Bearer ${cfg.token}` };
  let next = 0;
  let errors = 0;
  let bytes = 0;
  const lat: number[] = [];

  const phase = async (seconds: number, record: boolean): Promise<number> => {
    const end = performance.now() + seconds * 1000;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: cfg.concurrency }, async () => {
        while (performance.now() < end) {
          const path = cfg.paths[next++ % cfg.paths.length]!;
          const s = performance.now();
          const res = await pool.request({ path, method: "GET", headers });
          const body = Buffer.from(await res.body.arrayBuffer());
          if (!record) continue;
          lat.push(performance.now() - s);
          bytes += body.length;
          if (res.statusCode !== 200) errors++;
        }
      }),
    );
    return (performance.now() - t0) / 1000;
  };

  await phase(cfg.warmupS, false);
  // Tells the parent to start reading the gateway's CPU time.
  process.stdout.write("measure-start\n");
  const cpu0 = process.cpuUsage();
  const sec = await phase(cfg.durationS, true);
  const cpu = process.cpuUsage(cpu0);
  await pool.close();
  process.stdout.write(
    JSON.stringify({
      requests: lat.length,
      errors,
      sec,
      reqPerSec: lat.length / sec,
      meanBytes: lat.length > 0 ? bytes / lat.length : 0,
      latencyMs: stats(lat),
      loadGenCpuPct: ((cpu.user + cpu.system) / 1e6 / sec) * 100,
    }) + "\n",
  );
}

main().catch((err: unknown) => {
  process.stderr.write(`${String(err)}\n`);
  process.exitCode = 1;
});
