// recovery: N Ready sandboxes, the daemon restarted with live-restore (containers
// keep running). Measured: from the daemon's API answering again (a 10 ms /_ping
// poller) to every sandbox being back in Ready, read from the gateway's own
// event log. Baseline: the least any recovery must do, one GET /_ping plus one
// list of the gateway's containers, once right after the restart (while the
// gateway's recovery competes for the daemon) and again at rest.

import { performance } from "node:perf_hooks";
import { LABEL, labelFilter } from "../src/driver/docker/objects.js";
import { pingSocket } from "../test/support/dockerd.js";
import { startDockerFixture, type DockerFixture } from "../test/support/docker-fixture.js";
import { waitPhase } from "../test/support/recovery-helpers.js";
import { Cleanup, machine, mapLimit, parseList, parseNumber, printTable, progress, sleep, stats, writeResult, type BenchOptions, type Stats } from "./lib.js";

const CREATE_CONCURRENCY = 4;
/** How long one create may take to reach Ready: generous, the machine may be loaded. */
const CREATE_TIMEOUT_MS = 180_000;

/** Resolves with the wall-clock time (epoch ms) of the first successful /_ping. */
async function firstPing(socketPath: string, stop: { done: boolean }): Promise<number> {
  while (!stop.done) {
    if (await pingSocket(socketPath, 500)) return Date.now();
    await sleep(10);
  }
  throw new Error("ping poller stopped before the daemon answered");
}

async function pingAndList(fx: DockerFixture): Promise<number> {
  const t0 = performance.now();
  const ping = await fx.engine.ping();
  if (ping.kind !== "ok") throw new Error("baseline ping failed");
  const list = await fx.engine.listContainers({ all: true, filters: labelFilter({ [LABEL.gateway]: fx.driver.gatewayId }) });
  if (list.kind !== "ok") throw new Error("baseline list failed");
  return performance.now() - t0;
}

async function phases(fx: DockerFixture): Promise<Map<string, string>> {
  return new Map((await fx.t.gw.store.list()).map((s) => [s.id, s.phase]));
}

async function waitAllReady(fx: DockerFixture, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    const ps = [...(await phases(fx)).values()];
    if (ps.every((p) => p === "Ready")) return;
    if (ps.some((p) => p === "Error" || p === "Completed")) throw new Error(`a sandbox failed during recovery: ${JSON.stringify(ps)}`);
    if (Date.now() > deadline) throw new Error(`not all Ready after ${ms} ms: ${JSON.stringify(countPhases(ps))}`);
    await sleep(20);
  }
}

const countPhases = (ps: string[]): Record<string, number> => ps.reduce<Record<string, number>>((a, p) => ({ ...a, [p]: (a[p] ?? 0) + 1 }), {});

/** Per sandbox: when it went Recovering and came back Ready after `since` (epoch ms). */
async function recoveryTimes(fx: DockerFixture, since: number): Promise<{ lost: number; backAt: number[]; withoutProbe: number }> {
  let lost = 0;
  let withoutProbe = 0;
  const backAt: number[] = [];
  for (const s of await fx.t.gw.store.list()) {
    const evs = (await fx.t.gw.store.events(s.id, { limit: 100_000 })).filter((e) => e.kind === "phase" && Date.parse(e.time) >= since);
    if (evs.some((e) => e.newPhase === "Recovering")) lost++;
    const back = evs.filter((e) => e.oldPhase === "Recovering" && e.newPhase === "Ready").at(-1);
    if (back) backAt.push(Date.parse(back.time));
    if (back?.message?.includes("unbroken control session")) withoutProbe++;
  }
  return { lost, backAt, withoutProbe };
}

interface RestartResult {
  apiDownMs: number;
  allBackMs: number;
  firstBackMs: number;
  lost: number;
  backCount: number;
  /** Sandboxes re-verified by their unbroken control session, without an exec probe. */
  withoutProbe: number;
  coldBaselineMs: number;
}

async function restartOnce(fx: DockerFixture, n: number): Promise<RestartResult> {
  const tStop = Date.now();
  await fx.dockerd.stop("SIGTERM");
  const poller = { done: false };
  const apiBack = firstPing(fx.dockerd.socketPath, poller);
  try {
    await fx.dockerd.startAgain();
  } catch (err) {
    // The daemon did not come back: that error is the one to report, not the poller's.
    poller.done = true;
    await apiBack.catch(() => undefined);
    throw err;
  }
  // The poller resolves as soon as /_ping answers: by now, at the latest on its next ping.
  const tApi = await apiBack;
  const coldBaselineMs = await pingAndList(fx);
  await waitAllReady(fx, 120_000);
  const { lost, backAt, withoutProbe } = await recoveryTimes(fx, tStop);
  if (lost !== n || backAt.length !== n) {
    throw new Error(`expected all ${n} sandboxes to go Recovering and come back; saw ${lost} lost, ${backAt.length} back`);
  }
  return {
    apiDownMs: tApi - tStop,
    allBackMs: Math.max(...backAt) - tApi,
    firstBackMs: Math.min(...backAt) - tApi,
    lost,
    backCount: backAt.length,
    withoutProbe,
    coldBaselineMs,
  };
}

export async function run(o: BenchOptions): Promise<void> {
  const ns = parseList(o.flags.n, o.quick ? [1, 3] : [1, 20, 100]).sort((a, b) => a - b);
  const restarts = parseNumber(o.flags.restarts, o.quick ? 1 : 5);
  const m = machine();
  const cleanup = new Cleanup();
  const rows: Record<string, unknown>[] = [];
  try {
    progress("recovery: starting a private dockerd (live-restore) and a gateway");
    // A daemon restoring a few hundred containers can take more than the harness's default 30 s to answer.
    const fx = await startDockerFixture({ liveRestore: true, name: "brecov", startTimeoutMs: 180_000 });
    cleanup.add("fixture", () => fx.close());
    let have = 0;
    for (const n of ns) {
      const names = Array.from({ length: n - have }, (_, i) => `r${have + i}`);
      let made = 0;
      await mapLimit(names, CREATE_CONCURRENCY, async (name) => {
        const r = await fx.t.api("POST", "/v1/sandboxes", { name });
        if (r.status !== 201) throw new Error(`create ${name}: ${r.status} ${JSON.stringify(r.body)}`);
        await waitPhase(fx, name, "Ready", CREATE_TIMEOUT_MS).catch(async (err: unknown) => {
          const s = await fx.t.gw.store.get(name);
          const log = s ? (await fx.t.gw.store.events(s.id, { limit: 100 })).map((e) => `${e.oldPhase ?? "-"}→${e.newPhase ?? ""} ${e.message ?? ""}`) : [];
          throw new Error(`${(err as Error).message}; its events: ${JSON.stringify(log)}`);
        });
        progress(`recovery: creating sandboxes ${have + ++made}/${n}`);
      });
      have = n;
      await sleep(1000);
      const results: RestartResult[] = [];
      for (let r = 0; r < restarts; r++) {
        progress(`recovery: N=${n}, daemon restart ${r + 1}/${restarts}`);
        results.push(await restartOnce(fx, n));
        await sleep(1000);
      }
      const warm: number[] = [];
      for (let i = 0; i < 20; i++) warm.push(await pingAndList(fx));
      const allBack: Stats = stats(results.map((x) => x.allBackMs));
      progress(`recovery: N=${n}: ${JSON.stringify(results)}`);
      rows.push({
        n,
        restarts,
        allBackMs: allBack,
        firstBackMs: stats(results.map((x) => x.firstBackMs)),
        apiDownMs: stats(results.map((x) => x.apiDownMs)),
        baselineAfterRestartMs: stats(results.map((x) => x.coldBaselineMs)),
        baselineAtRestMs: stats(warm),
        targetMet: n !== 100 || (allBack.median <= 1500 && allBack.p95 <= 2000),
        samples: results,
      });
    }
    const S = (r: Record<string, unknown>, k: string): Stats => r[k] as Stats;
    printTable(
      `recovery after a live-restore daemon restart (${restarts} restarts per N, ${m.cores} cores, load ${m.loadavg.join("/")})`,
      ["N", "all Ready: median ms", "p95 ms", "max ms", "first Ready: median ms", "without exec probe", "ping+list after restart: median ms", "ping+list at rest: median ms", "p95 ms", "daemon down ms"],
      rows.map((r) => [
        r.n as number,
        S(r, "allBackMs").median,
        S(r, "allBackMs").p95,
        S(r, "allBackMs").max,
        S(r, "firstBackMs").median,
        `${(r.samples as RestartResult[]).reduce((a, x) => a + x.withoutProbe, 0)}/${(r.samples as RestartResult[]).reduce((a, x) => a + x.backCount, 0)}`,
        S(r, "baselineAfterRestartMs").median,
        S(r, "baselineAtRestMs").median,
        S(r, "baselineAtRestMs").p95,
        S(r, "apiDownMs").median,
      ]),
    );
    const at100 = rows.find((r) => r.n === 100);
    if (at100) process.stdout.write(`target (all 100 back within 1500 ms median, 2000 ms p95 of the API): ${at100.targetMet === true ? "met" : "MISSED"}\n`);
    const file = writeResult("recovery", m, { restarts, createConcurrency: CREATE_CONCURRENCY, perN: rows });
    progress(`recovery: wrote ${file}`);
  } finally {
    await cleanup.run();
  }
}
