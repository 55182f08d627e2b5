// `npm run bench -- --quick` in the suite, so the benchmarks never rot: every bench runs
// end to end (its own private dockerd, gateway, sandboxes and clients, torn down at the
// end) with the smallest N, and writes its result file; two at a time (--jobs=2), since
// most of a smoke run is daemons starting and stopping. The numbers are not looked at:
// a smoke run on a loaded machine says nothing about speed (docs/performance.md does).

import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { BENCHES } from "../../bench/benches.js";
import { PROJECT_ROOT } from "../../bench/lib.js";

const results = mkdtempSync(join(tmpdir(), "sg-bench-smoke-"));
afterAll(() => rmSync(results, { recursive: true, force: true }));

function runBench(args: string[]): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", join(PROJECT_ROOT, "bench/run.ts"), ...args], {
      cwd: PROJECT_ROOT,
      env: { ...process.env, SANDGATE_BENCH_RESULTS: results },
      stdio: ["ignore", "ignore", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (b: Buffer) => {
      // The progress lines; the last 64 KiB are enough to say where a run failed.
      stderr = (stderr + b.toString("utf8")).slice(-65_536);
    });
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stderr }));
  });
}

describe("bench --quick (smoke)", () => {
  it("runs every benchmark end to end and each writes its quick result, never the documented one", async () => {
    const r = await runBench(["--quick", "--jobs=2"]);
    expect(r.code, r.stderr).toBe(0);
    const names = Object.keys(BENCHES);
    expect(readdirSync(results).sort()).toEqual(names.map((n) => `${n}.quick.json`).sort());
    for (const n of names) {
      const body = JSON.parse(readFileSync(join(results, `${n}.quick.json`), "utf8")) as { bench: string; machine: { cores: number }; results: unknown };
      expect(body.bench).toBe(n);
      expect(body.machine.cores).toBeGreaterThan(0);
      expect(body.results).toBeTruthy();
    }
  }, 45 * 60_000);

  it("refuses an unknown benchmark in one line, exit 2, running nothing", async () => {
    const r = await runBench(["no-such-bench", "--quick"]);
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split("\n")).toEqual([expect.stringMatching(/^bench: unknown benchmark "no-such-bench"; known: create, /)]);
  });
});
