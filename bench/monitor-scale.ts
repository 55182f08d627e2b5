// monitor-scale: the cost of watching N idle Ready sandboxes, read from /proc of
// a gateway running as its own process: RSS, CPU over an idle window, its
// connections to the Docker socket, and its sessions with supervisors; and at each
// N, how fast the list answers and how long recovery takes after a Docker daemon
// restart (live-restore), so the curve from 50 upward shows how each cost grows.

import { freemem } from "node:os";
import { PrivateDockerd, pingSocket } from "../test/support/dockerd.js";
import { cpuSeconds, remoteTcpConnections, rssBytes, startGatewayProcess, tail, unixConnectionsTo, type GatewayProcess } from "./gateway-process.js";
import { Cleanup, machine, mapLimit, parseList, parseNumber, printTable, progress, sleep, stats, writeResult, type BenchOptions, type Stats } from "./lib.js";

const CREATE_CONCURRENCY = 4;
const MiB = 2 ** 20;
/** Stop adding sandboxes when the machine gets this close to running out of memory. */
const MIN_FREE_BYTES = 2 * 2 ** 30;

interface Level {
  n: number;
  idleWindowS: number;
  rssMiB: Stats;
  cpuPctOfCore: number;
  dockerConnections: Stats;
  remoteTcp: number;
  /** Established connections on the control endpoint: one per supervisor session. */
  sessions: number | null;
  /** Sessions the endpoint has accepted since it started (from /v1/status). */
  sessionsAccepted: number | null;
  /** `GET /v1/sandboxes?limit=100` (one page, full rows) and the whole list read page by page, ms. */
  listPageMs: Stats | null;
  listAllMs: Stats | null;
  /** After a daemon restart: from its API answering again to every sandbox Ready (first one, last one), ms. */
  recovery: { apiDownMs: number; firstBackMs: number; allBackMs: number; lost: number; failure: string | null } | null;
}

const LIST_PAGE_REPS = 30;
const LIST_ALL_REPS = 5;

async function timed(f: () => Promise<void>): Promise<number> {
  const t0 = performance.now();
  await f();
  return performance.now() - t0;
}

/** The list as a client sees it: one page, then every page in name order. */
async function measureList(gw: GatewayProcess, n: number): Promise<{ page: Stats; all: Stats }> {
  const page: number[] = [];
  for (let i = 0; i < LIST_PAGE_REPS; i++) {
    page.push(
      await timed(async () => {
        const r = await gw.api("GET", "/v1/sandboxes?limit=100");
        if (r.status !== 200) throw new Error(`list: ${r.status}`);
      }),
    );
  }
  const all: number[] = [];
  for (let i = 0; i < LIST_ALL_REPS; i++) {
    let seen = 0;
    all.push(
      await timed(async () => {
        let after: string | null = "";
        while (after !== null) {
          const r = await gw.api("GET", `/v1/sandboxes?limit=100${after ? `&after=${after}` : ""}`);
          if (r.status !== 200) throw new Error(`list: ${r.status}`);
          seen += (r.body.sandboxes as unknown[]).length;
          after = r.body.next as string | null;
        }
      }),
    );
    if (seen !== n) throw new Error(`the paged list had ${seen} sandboxes, expected ${n}`);
  }
  return { page: stats(page), all: stats(all) };
}

/** Phase counts from /v1/status (one cheap call: no list while the gateway recovers). */
async function phaseCounts(gw: GatewayProcess): Promise<Record<string, number>> {
  return ((await gw.api("GET", "/v1/status")).body?.sandboxes ?? {}) as Record<string, number>;
}

/**
 * Restarts the daemon (SIGTERM, live-restore: the containers keep running) and waits
 * for every sandbox to be Ready again; the times come from the gateway's own events.
 */
async function measureRecovery(gw: GatewayProcess, dockerd: PrivateDockerd, n: number): Promise<NonNullable<Level["recovery"]>> {
  const tStop = Date.now();
  await dockerd.stop("SIGTERM");
  const poll = (async () => {
    for (;;) {
      if (await pingSocket(dockerd.socketPath, 500)) return Date.now();
      await sleep(10);
    }
  })();
  await dockerd.startAgain();
  const tApi = await poll;
  const apiDownMs = tApi - tStop;
  // A failed recovery is a result (the tables still print), and it ends the climb.
  const failedWith = (failure: string) => ({ apiDownMs, firstBackMs: Number.NaN, allBackMs: Number.NaN, lost: n, failure });
  const deadline = Date.now() + 300_000;
  for (;;) {
    const c = await phaseCounts(gw);
    if ((c.Ready ?? 0) === n) break;
    if ((c.Error ?? 0) + (c.Completed ?? 0) > 0) {
      const failed = (await gw.api("GET", "/v1/sandboxes?phase=Error&limit=3")).body?.sandboxes as { name: string; reason: unknown }[] | undefined;
      progress(`monitor-scale: recovery failed at N=${n}\n--- gateway log (tail) ---\n${tail(gw.logFile, 40)}`);
      return failedWith(`a sandbox failed during recovery: ${JSON.stringify(c)}; ${JSON.stringify(failed?.map((s) => [s.name, s.reason]))}`);
    }
    if (Date.now() > deadline) return failedWith(`not all ${n} Ready 300 s after the restart: ${JSON.stringify(c)}`);
    progress(`monitor-scale: N=${n}, recovering: ${c.Ready ?? 0}/${n} Ready`);
    await sleep(200);
  }
  const back: number[] = [];
  let lost = 0;
  await mapLimit(Array.from({ length: n }, (_, i) => `s${i}`), 8, async (name) => {
    const r = await gw.api("GET", `/v1/sandboxes/${name}/events?limit=1000`);
    const evs = (r.body.events as { kind: string; oldPhase: string | null; newPhase: string | null; time: string }[]).filter((e) => e.kind === "phase" && Date.parse(e.time) >= tStop);
    if (evs.some((e) => e.newPhase === "Recovering")) lost++;
    const b = evs.filter((e) => e.oldPhase === "Recovering" && e.newPhase === "Ready").at(-1);
    if (b) back.push(Date.parse(b.time));
  });
  if (back.length !== lost) throw new Error(`${lost} sandboxes went Recovering but ${back.length} came back`);
  return { apiDownMs, firstBackMs: back.length ? Math.min(...back) - tApi : 0, allBackMs: back.length ? Math.max(...back) - tApi : 0, lost, failure: null };
}

/**
 * Creates sandboxes up to `to`. The first one that fails (refused, Error, or not Ready in
 * 120 s) stops the climb: what the host holds is the result, and the levels measured so far
 * are still written.
 */
async function createUpTo(gw: GatewayProcess, from: number, to: number, deadline: number): Promise<{ made: number; failed: string | null }> {
  const names = Array.from({ length: to - from }, (_, i) => `s${from + i}`);
  let made = from;
  let failed: string | null = null;
  await mapLimit(names, CREATE_CONCURRENCY, async (name) => {
    if (failed !== null || Date.now() > deadline || freemem() < MIN_FREE_BYTES) return;
    const r = await gw.api("POST", "/v1/sandboxes", { name });
    if (r.status !== 201) {
      failed ??= `create ${name}: ${r.status} ${JSON.stringify(r.body)}`;
      return;
    }
    const until = Date.now() + 120_000;
    for (;;) {
      const g = await gw.api("GET", `/v1/sandboxes/${name}`);
      if (g.body?.phase === "Ready") break;
      if (g.body?.phase === "Error" || Date.now() > until) {
        failed ??= g.body?.phase === "Error" ? `sandbox ${name} failed: ${JSON.stringify(g.body.reason)}` : `sandbox ${name} not Ready after 120 s`;
        await gw.api("DELETE", `/v1/sandboxes/${name}`); // the levels count Ready sandboxes only
        return;
      }
      await sleep(100);
    }
    progress(`monitor-scale: ${++made}/${to} sandboxes Ready (free memory ${(freemem() / 2 ** 30).toFixed(1)} GiB)`);
  });
  return { made, failed };
}

/** The supervisors' control endpoint port, from /v1/status; null when the gateway has none. */
function endpointPort(status: any): number | null {
  const url = status?.supervisorEndpoint?.url;
  if (typeof url !== "string") return null;
  const port = Number(new URL(url).port);
  return Number.isInteger(port) && port > 0 ? port : null;
}

async function measure(gw: GatewayProcess, socketPath: string, n: number, windowS: number): Promise<Level> {
  // Let launch-time work (verifies, GC of the create burst) settle first.
  await sleep(5000);
  const rss: number[] = [];
  const conns: number[] = [];
  const cpu0 = cpuSeconds(gw.pid);
  const t0 = performance.now();
  const end = t0 + windowS * 1000;
  while (performance.now() < end) {
    rss.push(rssBytes(gw.pid) / MiB);
    conns.push(unixConnectionsTo(gw.pid, socketPath));
    progress(`monitor-scale: N=${n}, idle window ${((performance.now() - t0) / 1000).toFixed(0)}/${windowS} s`);
    await sleep(Math.min(2000, Math.max(0, end - performance.now())));
  }
  const cpuPct = ((cpuSeconds(gw.pid) - cpu0) / ((performance.now() - t0) / 1000)) * 100;
  const status = await gw.api("GET", "/v1/status");
  const port = endpointPort(status.body);
  return {
    n,
    idleWindowS: windowS,
    rssMiB: stats(rss),
    cpuPctOfCore: cpuPct,
    dockerConnections: stats(conns),
    remoteTcp: remoteTcpConnections(gw.pid),
    sessions: port === null ? null : remoteTcpConnections(gw.pid, port),
    sessionsAccepted: typeof status.body?.supervisorEndpoint?.accepted === "number" ? (status.body.supervisorEndpoint.accepted as number) : null,
    listPageMs: null,
    listAllMs: null,
    recovery: null,
  };
}

export async function run(o: BenchOptions): Promise<void> {
  const ns = parseList(o.flags.n, o.quick ? [2, 4] : [50, 100, 200, 300, 400, 500]).sort((a, b) => a - b);
  const windowS = parseNumber(o.flags.window, o.quick ? 3 : 60);
  const setupMinutes = parseNumber(o.flags["setup-minutes"], 60);
  // --restart=0: no daemon restart per level (the idle figures only); --restart-at=N,…:
  // only at those levels (a restart at 500 takes minutes).
  const restart = parseNumber(o.flags.restart, 1, { zero: true }) !== 0;
  const restartAt = o.flags["restart-at"] === undefined ? null : parseList(o.flags["restart-at"], []);
  const m = machine();
  const cleanup = new Cleanup();
  const levels: Level[] = [];
  let stoppedEarly: string | null = null;
  try {
    progress("monitor-scale: starting a private dockerd");
    // A live-restore start reloads every container before /_ping answers: 46 s at N = 100 on
    // this machine (bench recovery), so the default 30 s would end the run at its first restart.
    const dockerd = await PrivateDockerd.start({ liveRestore: true, name: "bscale", startTimeoutMs: 600_000 });
    cleanup.add("dockerd", () => dockerd.destroy());
    progress("monitor-scale: starting the gateway process (imports images)");
    const gw = await startGatewayProcess(dockerd.dockerHost);
    cleanup.add("gateway process", () => gw.stop());

    levels.push(await measure(gw, dockerd.socketPath, 0, windowS));
    const deadline = Date.now() + setupMinutes * 60_000;
    const setupStart = Date.now();
    let have = 0;
    for (const n of ns) {
      const { made, failed } = await createUpTo(gw, have, n, deadline);
      if (made < n) {
        stoppedEarly = `stopped at ${made} of ${n} sandboxes: ${failed ?? (Date.now() > deadline ? `setup budget of ${setupMinutes} min spent` : "free memory below 2 GiB")}`;
        progress(`monitor-scale: ${stoppedEarly}`);
      }
      have = made;
      if (made > (levels.at(-1)?.n ?? 0)) {
        const level = await measure(gw, dockerd.socketPath, made, windowS);
        const list = await measureList(gw, made);
        level.listPageMs = list.page;
        level.listAllMs = list.all;
        // A smoke run restarts the daemon once, at its largest N.
        if (restart && (restartAt ? restartAt.includes(n) : !o.quick || n === ns.at(-1))) {
          level.recovery = await measureRecovery(gw, dockerd, made);
          if (level.recovery.failure) stoppedEarly = `recovery at N=${made}: ${level.recovery.failure}`;
        }
        levels.push(level);
      }
      if (stoppedEarly) break;
    }
    const setupS = (Date.now() - setupStart) / 1000;

    const base = levels[0]!;
    const rows = levels.map((l, i) => [
      l.n,
      l.rssMiB.median,
      l.n === 0 ? null : ((l.rssMiB.median - base.rssMiB.median) * 1024) / l.n,
      i < 2 ? null : ((l.rssMiB.median - levels[i - 1]!.rssMiB.median) * 1024) / (l.n - levels[i - 1]!.n),
      l.cpuPctOfCore,
      l.dockerConnections.median,
      l.dockerConnections.max,
      l.sessions ?? "n/a",
      l.sessionsAccepted ?? "n/a",
      l.remoteTcp,
    ]);
    printTable(`monitor-scale: idle gateway process (${windowS} s windows, ${m.cores} cores, load ${m.loadavg.join("/")})`, [
      "N",
      "RSS MiB (median)",
      "KiB/sandbox vs N=0",
      "KiB/sandbox vs previous N",
      "CPU % of a core",
      "docker conns (median)",
      "(max)",
      "open sessions",
      "accepted",
      "all non-loopback TCP",
    ], rows);
    printTable(`monitor-scale: list and recovery at each N (list: ${LIST_PAGE_REPS} single pages and ${LIST_ALL_REPS} whole lists; recovery: daemon SIGTERM and start, live-restore)`, [
      "N",
      "list page p50 ms",
      "p95",
      "whole list p50 ms",
      "recovery: API down ms",
      "first Ready ms",
      "all Ready ms",
      "recovered",
    ], levels.filter((l) => l.n > 0).map((l) => [l.n, l.listPageMs?.median ?? null, l.listPageMs?.p95 ?? null, l.listAllMs?.median ?? null, l.recovery?.apiDownMs ?? "n/a", l.recovery?.firstBackMs ?? "n/a", l.recovery?.allBackMs ?? "n/a", l.recovery ? (l.recovery.failure ? "FAILED" : l.recovery.lost) : "n/a"]));
    const top = levels.at(-1)!;
    // The N=0 reading still holds the startup image import's heap, which GC returns
    // later: the slope between the smallest and largest N measured is the honest figure.
    const low = levels.length > 2 ? levels[1]! : base;
    const perSandboxMiB = top.n > low.n ? (top.rssMiB.median - low.rssMiB.median) / (top.n - low.n) : Number.NaN;
    const connsConstant = levels.every((l) => l.dockerConnections.max <= base.dockerConnections.max + 1) && levels.length > 1;
    process.stdout.write(
      `targets: docker connections constant in N: ${connsConstant ? "met" : "MISSED"}; RSS/sandbox ≤ 1 MiB: ${perSandboxMiB <= 1 ? "met" : "MISSED"} (${perSandboxMiB.toFixed(3)} MiB, slope from N=${low.n} to N=${top.n}); ` +
        `idle CPU ≤ 1% at N=200: ${top.n >= 200 ? (top.cpuPctOfCore <= 1 ? "met" : "MISSED") : `not measured (largest N ${top.n})`}\n`,
    );
    if (stoppedEarly) process.stdout.write(`note: ${stoppedEarly}\n`);
    const file = writeResult("monitor-scale", m, { windowS, createConcurrency: CREATE_CONCURRENCY, setupSeconds: setupS, stoppedEarly, perSandboxMiB, connsConstant, levels });
    progress(`monitor-scale: wrote ${file}`);
  } finally {
    await cleanup.run();
  }
}
