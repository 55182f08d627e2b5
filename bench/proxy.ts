// proxy: plain HTTP through the supervisor's egress proxy against a direct connection and
// against ordinary forward proxies, in the same run. The same node client (keep-alive
// http.Agent, absolute-form requests to a proxy) runs in four places:
//   direct    - a container on the egress network with the workload's image, user and
//               CPU and memory limits, straight to the origin;
//   sandgate  - the sandbox's workload, through its supervisor ($HTTP_PROXY);
//   transparent - the same workload with no proxy at all (no proxy variable): origin-form
//               requests straight to the origin's name, taken by the transparent path;
//   tinyproxy - reference: the direct container through Debian's tinyproxy,
//   squid     - reference: the direct container through Debian's squid; each reference
//               proxy runs in a container on the egress network with the supervisor's
//               default CPU and memory limits (bench/lib.ts). A reference whose binary is
//               absent is skipped with a note (--tinyproxy=PATH, --squid=PATH).
// The client keeps connections alive, except through tinyproxy, which closes each after one
// response (without saying so): there it asks for a connection per request.
// Throughput with 1 MiB bodies at concurrency 1 and 4; latency of a 2-byte body at
// concurrency 1 and 16. Errors are counted, not fatal (a run with no success is).

import { startExec } from "../src/driver/docker/exec-session.js";
import { egressNetworkName } from "../src/driver/docker/objects.js";
import { startDockerFixture, type DockerFixture } from "../test/support/docker-fixture.js";
import { ORIGIN_POLICY, createReady, execIn } from "../test/support/recovery-helpers.js";
import { NO_PROXY_ENV } from "../test/support/sandbox-helpers.js";
import { CpuBreakdown, containerCpuReader } from "./cpu-breakdown.js";
import { Cleanup, collect, machine, parseNumber, parseRun, printTable, progress, startContainer, startDirectClient, startReferenceProxy, stats, writeResult, type BenchOptions, type ReferenceProxy, type Stats } from "./lib.js";

const ORIGIN = "bench-origin";
const ORIGIN_PROGRAM = `const big=Buffer.alloc(1<<20,97);
require("http").createServer((q,s)=>{if(q.url==="/big"){s.writeHead(200,{"content-length":big.length});s.end(big)}else{s.writeHead(200,{"content-length":2});s.end("ok")}}).listen(8080)`;

/** The client, run inside a container: argv[1] is its JSON config; prints one JSON line. */
const CLIENT = `const http=require("http");
const cfg=JSON.parse(process.argv[1]);
const agent=new http.Agent({keepAlive:cfg.keepAlive,maxSockets:cfg.concurrency});
const proxyUrl=cfg.proxy==="$HTTP_PROXY"?process.env.HTTP_PROXY:cfg.proxy;
const proxy=proxyUrl?new URL(proxyUrl):null;
const base=new URL(cfg.target);
function once(path){return new Promise((resolve,reject)=>{
  const u=new URL(path,base);
  const o=proxy?{host:proxy.hostname,port:proxy.port,path:u.href,headers:{host:u.host},agent}:{host:u.hostname,port:u.port,path:u.pathname,agent};
  const s=process.hrtime.bigint();
  http.get(o,(r)=>{let n=0,body="";r.on("data",(d)=>{n+=d.length;if(r.statusCode!==200&&body.length<300)body+=d});r.on("error",reject);
    r.on("end",()=>r.statusCode===200?resolve({ms:Number(process.hrtime.bigint()-s)/1e6,bytes:n}):reject(new Error("HTTP "+r.statusCode+" "+body)));
  }).on("error",reject);
});}
async function run(n){const lat=[];let next=0,bytes=0,errors=0,firstError=null;const t0=process.hrtime.bigint(),c0=process.cpuUsage();
  await Promise.all(Array.from({length:cfg.concurrency},async()=>{while(next<n){next++;
    try{const r=await once(cfg.path);lat.push(r.ms);bytes+=r.bytes;}catch(e){errors++;firstError??=String(e);}}}));
  if(lat.length===0)throw new Error("no request succeeded: "+firstError);
  const c=process.cpuUsage(c0);return {lat,bytes,sec:Number(process.hrtime.bigint()-t0)/1e9,errors,firstError,cpuMs:(c.user+c.system)/1000};}
run(cfg.warmup).then(()=>run(cfg.requests)).then((r)=>console.log(JSON.stringify(r)),(e)=>{console.log(JSON.stringify({error:String(e)}));process.exitCode=1;});`;

type Mode = "direct" | "sandgate" | "transparent" | ReferenceProxy;


interface ClientRun {
  lat: number[];
  bytes: number;
  sec: number;
  errors: number;
  firstError: string | null;
  /** The client process's own CPU over the measured requests (not its start or warm-up). */
  cpuMs: number;
}

interface Scenario {
  name: string;
  path: string;
  concurrency: number;
  requests: number;
  warmup: number;
}

interface Measured {
  latencyMs: Stats;
  mibPerSec: Stats;
  reqPerSec: Stats;
  errors: number;
  firstError: string | null;
}

async function startOrigin(fx: DockerFixture): Promise<string> {
  return startContainer(fx, ORIGIN, { Image: fx.driver.imageRefs!.workload.id, Cmd: ["node", "-e", ORIGIN_PROGRAM], HostConfig: { NetworkMode: egressNetworkName(fx.driver.gatewayId) } });
}

export async function run(o: BenchOptions): Promise<void> {
  const reps = parseNumber(o.flags.reps, o.quick ? 1 : 3);
  const scale = o.quick ? 0.05 : 1;
  const scenarios: Scenario[] = [
    { name: "1 MiB, c=1", path: "/big", concurrency: 1, requests: Math.round(200 * scale), warmup: 10 },
    { name: "1 MiB, c=4", path: "/big", concurrency: 4, requests: Math.round(200 * scale), warmup: 10 },
    { name: "small, c=1", path: "/small", concurrency: 1, requests: Math.round(2000 * scale), warmup: 100 },
    { name: "small, c=16", path: "/small", concurrency: 16, requests: Math.round(4000 * scale), warmup: 200 },
  ];
  const m = machine();
  const cleanup = new Cleanup();
  try {
    progress("proxy: starting a private dockerd and a gateway");
    const fx = await startDockerFixture({ liveRestore: true, name: "bproxy" });
    cleanup.add("fixture", () => fx.close());
    const originId = await startOrigin(fx);
    const directId = await startDirectClient(fx);
    const proxies: Partial<Record<Mode, string>> = { sandgate: "$HTTP_PROXY" };
    for (const ref of ["tinyproxy", "squid"] as const) {
      const url = await startReferenceProxy(fx, ref, directId, o.flags[ref]);
      if (url !== null) proxies[ref] = url;
    }
    const modes = (["direct", "sandgate", "transparent", "tinyproxy", "squid"] as const).filter((x) => x === "direct" || x === "transparent" || proxies[x] !== undefined);
    progress("proxy: creating the sandbox");
    const sandbox = await createReady(fx, "proxied", { policy: ORIGIN_POLICY(ORIGIN) });
    // Diagnostic only (never the default): change the supervisor's CPU limit to see how much of the cost it explains.
    const supervisorCpus = o.flags["supervisor-cpus"] === undefined ? null : parseNumber(o.flags["supervisor-cpus"], 1);
    if (supervisorCpus !== null) {
      const upd = await fx.engine.request("POST", `/containers/${sandbox.runtime.supervisor.id as string}/update`, { body: { NanoCpus: Math.round(supervisorCpus * 1e9) } });
      if (upd.kind !== "ok") throw new Error("supervisor update failed");
    }

    const target = `http://${ORIGIN}:8080`;
    const runClient = async (mode: Mode, s: Scenario): Promise<ClientRun> => {
      // tinyproxy closes the client connection after every response without saying so (no
      // "Connection: close"): a kept-alive client would fail every other request on it.
      const cfg = { proxy: proxies[mode] ?? null, keepAlive: mode !== "tinyproxy", target, path: s.path, concurrency: s.concurrency, requests: s.requests, warmup: s.warmup };
      const cmd = ["node", "-e", CLIENT, JSON.stringify(cfg)];
      const r =
        mode === "sandgate" ? await execIn(fx, "proxied", cmd) : mode === "transparent" ? await execIn(fx, "proxied", [...NO_PROXY_ENV, ...cmd]) : await collect(await startExec(fx.engine, directId, { cmd, tty: false }));
      return parseRun(`${mode} ${s.name}`, r) as ClientRun;
    };

    const results: Record<string, Partial<Record<Mode, Measured>>> = {};
    const supervisorCpu = await containerCpuReader(fx, sandbox.runtime.supervisor.id as string);
    const proxyCpu: Partial<Record<Mode, () => number>> = { sandgate: supervisorCpu, transparent: supervisorCpu };
    for (const ref of ["tinyproxy", "squid"] as const) if (proxies[ref] !== undefined) proxyCpu[ref] = await containerCpuReader(fx, `bench-${ref}`);
    const cpu = new CpuBreakdown<Mode>(await containerCpuReader(fx, originId), proxyCpu);
    for (const s of scenarios) {
      const runs: Partial<Record<Mode, ClientRun[]>> = {};
      for (let rep = 0; rep < reps; rep++) {
        // Rotate which goes first so drift on a busy machine hits every mode alike.
        for (const mode of modes.map((_, i) => modes[(i + rep) % modes.length]!)) {
          progress(`proxy: ${s.name}, ${mode}, rep ${rep + 1}/${reps}`);
          (runs[mode] ??= []).push(await cpu.measure(s, mode, () => runClient(mode, s)));
        }
      }
      results[s.name] = Object.fromEntries(
        modes.map((mode) => {
          const rs = runs[mode]!;
          return [
            mode,
            {
              latencyMs: stats(rs.flatMap((r) => r.lat)),
              mibPerSec: stats(rs.map((r) => r.bytes / 2 ** 20 / r.sec)),
              reqPerSec: stats(rs.map((r) => r.lat.length / r.sec)),
              errors: rs.reduce((n, r) => n + r.errors, 0),
              firstError: rs.find((r) => r.firstError !== null)?.firstError ?? null,
            },
          ];
        }),
      );
    }

    const big = (s: Scenario): boolean => s.path === "/big";
    const rate = (s: Scenario, x: Measured): number => (big(s) ? x.mibPerSec.median : x.reqPerSec.median);
    const rows: (string | number)[][] = [];
    for (const s of scenarios) {
      const r = results[s.name]!;
      const d = r.direct!;
      for (const mode of modes) {
        const x = r[mode]!;
        rows.push([`${s.name}: ${mode}${mode === "tinyproxy" ? " (reference, a connection per request)" : mode === "squid" ? " (reference)" : mode === "transparent" ? " (no proxy variables)" : ""}`, x.latencyMs.median, x.latencyMs.p95, x.latencyMs.median - d.latencyMs.median, rate(s, x), rate(s, x) / rate(s, d), x.errors]);
      }
    }
    printTable(`plain HTTP proxy vs direct${supervisorCpus === null ? "" : ` (DIAGNOSTIC: supervisor CPU limit changed to ${supervisorCpus})`} (${reps} reps each, ${m.cores} cores, load ${m.loadavg.join("/")}; rate = MiB/s for 1 MiB, req/s for small)`, ["scenario: path", "p50 ms", "p95 ms", "added p50 ms", "rate", "× direct", "errors"], rows);
    const cpuShares = cpu.print(m.cores, scenarios, modes, "direct");
    for (const s of scenarios) for (const mode of modes) if (results[s.name]![mode]!.errors > 0) process.stdout.write(`${s.name}, ${mode}: ${results[s.name]![mode]!.errors} errors, the first: ${results[s.name]![mode]!.firstError}\n`);

    const sg = (s: Scenario): Measured => results[s.name]!.sandgate!;
    const dr = (s: Scenario): Measured => results[s.name]!.direct!;
    const added = (s: Scenario, x: Measured): number => x.latencyMs.median - dr(s).latencyMs.median;
    const byName = (n: string): Scenario => scenarios.find((s) => s.name === n)!;
    const thrRatio = Math.min(...scenarios.filter(big).map((s) => sg(s).mibPerSec.median / dr(s).mibPerSec.median));
    const addedC1 = added(byName("small, c=1"), sg(byName("small, c=1")));
    const c16 = byName("small, c=16");
    const addedC16 = added(c16, sg(c16));
    const refs = modes.filter((x): x is ReferenceProxy => x === "tinyproxy" || x === "squid");
    // Not slower than a reference: in every scenario, at least its rate and at most its added p50.
    const slowerThan = refs.map((ref) => {
      const lost = scenarios.filter((s) => rate(s, sg(s)) < rate(s, results[s.name]![ref]!) || added(s, sg(s)) > added(s, results[s.name]![ref]!)).map((s) => s.name);
      return `${ref}: ${lost.length === 0 ? "met" : `MISSED (${lost.join(", ")})`}`;
    });
    const verdict = (ok: boolean): string => (ok ? "met" : "MISSED");
    // The transparent path against the explicit proxy, scenario by scenario: added p50 within 0.1 ms, the same throughput (within 10%).
    const tp = (s: Scenario): Measured => results[s.name]!.transparent!;
    const tpLatency = Math.max(...scenarios.map((s) => tp(s).latencyMs.median - sg(s).latencyMs.median));
    const tpRate = Math.min(...scenarios.map((s) => rate(s, tp(s)) / rate(s, sg(s))));
    process.stdout.write(
      `targets: throughput ≥ 0.8× direct: ${verdict(thrRatio >= 0.8)} (worst ${thrRatio.toFixed(2)}×); added p50 small c=1 ≤ 0.5 ms: ${verdict(addedC1 <= 0.5)} (${addedC1.toFixed(2)} ms); ` +
        `c=16 ≤ 2 ms with no errors: ${verdict(addedC16 <= 2 && sg(c16).errors === 0)} (${addedC16.toFixed(2)} ms, ${sg(c16).errors} errors); ` +
        `not slower than the reference proxy: ${refs.length === 0 ? "no reference proxy present" : slowerThan.join("; ")}; ` +
        `transparent path: added p50 within 0.1 ms of the proxy's: ${verdict(tpLatency <= 0.1)} (worst ${tpLatency.toFixed(3)} ms), same rate: ${verdict(tpRate >= 0.9)} (worst ${tpRate.toFixed(2)}× the proxy's)\n`,
    );
    const file = writeResult(supervisorCpus === null ? "proxy" : "proxy-diagnostic", m, { supervisorCpus, reps, modes, scenarios, results, cpu: cpuShares, worstThroughputRatio: thrRatio, addedP50SmallC1Ms: addedC1, addedP50SmallC16Ms: addedC16, transparentWorstAddedVsProxyMs: tpLatency, transparentWorstRateVsProxy: tpRate });
    progress(`proxy: wrote ${file}`);
  } finally {
    await cleanup.run();
  }
}
