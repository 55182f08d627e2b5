// proxy: the same node client, once in a sandbox's workload going through the
// supervisor's egress proxy ($HTTP_PROXY, absolute-form requests), once in a
// container on the egress network going straight to the origin. Both use a
// keep-alive agent and the same CPU and memory limits. Throughput with 1 MiB
// bodies; latency of small requests at concurrency 1 and 16.

import type { ExecSession } from "../src/driver/contract.js";
import { startExec } from "../src/driver/docker/exec-session.js";
import { egressNetworkName } from "../src/driver/docker/objects.js";
import { DEFAULT_IDS } from "../src/driver/docker/rootfs.js";

const WORKLOAD_UID = DEFAULT_IDS.workload;
import { DEFAULT_RESOURCES } from "../src/lifecycle/spec.js";
import { startDockerFixture, type DockerFixture } from "../test/support/docker-fixture.js";
import { ORIGIN_POLICY, createReady, execIn } from "../test/support/recovery-helpers.js";
import { Cleanup, machine, parseNumber, printTable, progress, stats, writeResult, type BenchOptions, type Stats } from "./lib.js";

const ORIGIN = "bench-origin";
const ORIGIN_PROGRAM = `const big=Buffer.alloc(1<<20,97);
require("http").createServer((q,s)=>{if(q.url==="/big"){s.writeHead(200,{"content-length":big.length});s.end(big)}else{s.writeHead(200,{"content-length":2});s.end("ok")}}).listen(8080)`;

/** The client, run inside a container: argv[1] is its JSON config; prints one JSON line. */
const CLIENT = `const http=require("http");
const cfg=JSON.parse(process.argv[1]);
const agent=new http.Agent({keepAlive:true,maxSockets:cfg.concurrency});
const proxy=cfg.mode==="proxy"?new URL(process.env.HTTP_PROXY):null;
const base=new URL(cfg.target);
function once(path){return new Promise((resolve,reject)=>{
  const u=new URL(path,base);
  const o=proxy?{host:proxy.hostname,port:proxy.port,path:u.href,headers:{host:u.host},agent}:{host:u.hostname,port:u.port,path:u.pathname,agent};
  const s=process.hrtime.bigint();
  http.get(o,(r)=>{let n=0;r.on("data",(d)=>n+=d.length);r.on("error",reject);
    r.on("end",()=>r.statusCode===200?resolve({ms:Number(process.hrtime.bigint()-s)/1e6,bytes:n}):reject(new Error("HTTP "+r.statusCode)));
  }).on("error",reject);
});}
async function run(n){const lat=[];let next=0,bytes=0;const t0=process.hrtime.bigint();
  await Promise.all(Array.from({length:cfg.concurrency},async()=>{while(next<n){next++;const r=await once(cfg.path);lat.push(r.ms);bytes+=r.bytes;}}));
  return {lat,bytes,sec:Number(process.hrtime.bigint()-t0)/1e9};}
run(cfg.warmup).then(()=>run(cfg.requests)).then((r)=>console.log(JSON.stringify(r)),(e)=>{console.log(JSON.stringify({error:String(e)}));process.exitCode=1;});`;

interface ClientConfig {
  mode: "direct" | "proxy";
  target: string;
  path: string;
  concurrency: number;
  requests: number;
  warmup: number;
}

interface ClientRun {
  lat: number[];
  bytes: number;
  sec: number;
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

async function startOriginContainer(fx: DockerFixture): Promise<void> {
  const created = await fx.engine.createContainer(ORIGIN, {
    Image: fx.driver.imageRefs!.workload.id,
    Cmd: ["node", "-e", ORIGIN_PROGRAM],
    HostConfig: { NetworkMode: egressNetworkName(fx.driver.gatewayId) },
  });
  if (created.kind !== "ok") throw new Error("origin create failed");
  if ((await fx.engine.startContainer(created.body.Id)).kind !== "ok") throw new Error("origin start failed");
}

/** A container with the workload's image, user and limits, but on the egress network: it has a route to the origin. */
export async function startDirectClient(fx: DockerFixture, name = "bench-direct-client"): Promise<string> {
  const r = DEFAULT_RESOURCES;
  const created = await fx.engine.createContainer(name, {
    Image: fx.driver.imageRefs!.workload.id,
    Cmd: ["sleep", "2147483647"],
    User: `${WORKLOAD_UID}:${WORKLOAD_UID}`,
    HostConfig: {
      NetworkMode: egressNetworkName(fx.driver.gatewayId),
      Init: true,
      Memory: r.memoryMb * 2 ** 20,
      NanoCpus: Math.round(r.cpus * 1e9),
      PidsLimit: r.pids,
    },
  });
  if (created.kind !== "ok") throw new Error("direct client create failed");
  if ((await fx.engine.startContainer(created.body.Id)).kind !== "ok") throw new Error("direct client start failed");
  return created.body.Id;
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
}

export async function run(o: BenchOptions): Promise<void> {
  const reps = parseNumber(o.flags.reps, o.quick ? 1 : 3);
  const scale = o.quick ? 0.2 : 1;
  const scenarios: Scenario[] = [
    { name: "throughput 1 MiB, c=1", path: "/big", concurrency: 1, requests: Math.round(200 * scale), warmup: 10 },
    { name: "throughput 1 MiB, c=4", path: "/big", concurrency: 4, requests: Math.round(200 * scale), warmup: 10 },
    { name: "latency small, c=1", path: "/small", concurrency: 1, requests: Math.round(2000 * scale), warmup: 100 },
    { name: "latency small, c=16", path: "/small", concurrency: 16, requests: Math.round(4000 * scale), warmup: 200 },
  ];
  const m = machine();
  const cleanup = new Cleanup();
  try {
    progress("proxy: starting a private dockerd and a gateway");
    const fx = await startDockerFixture({ liveRestore: true, name: "bproxy" });
    cleanup.add("fixture", () => fx.close());
    await startOriginContainer(fx);
    const directId = await startDirectClient(fx);
    progress("proxy: creating the sandbox");
    const sandbox = await createReady(fx, "proxied", { policy: ORIGIN_POLICY(ORIGIN) });
    // Diagnostic only (never the default): lift the supervisor's CPU limit to see how much of the cost it explains.
    const supervisorCpus = o.flags["supervisor-cpus"] === undefined ? null : parseNumber(o.flags["supervisor-cpus"], 1);
    if (supervisorCpus !== null) {
      const upd = await fx.engine.request("POST", `/containers/${sandbox.runtime.supervisor.id as string}/update`, { body: { NanoCpus: Math.round(supervisorCpus * 1e9) } });
      if (upd.kind !== "ok") throw new Error("supervisor update failed");
    }

    const target = `http://${ORIGIN}:8080`;
    const runClient = async (mode: ClientConfig["mode"], s: Scenario): Promise<ClientRun> => {
      const cfg: ClientConfig = { mode, target, path: s.path, concurrency: s.concurrency, requests: s.requests, warmup: s.warmup };
      const cmd = ["node", "-e", CLIENT, JSON.stringify(cfg)];
      const r = mode === "proxy" ? await execIn(fx, "proxied", cmd) : await collect(await startExec(fx.engine, directId, { cmd, tty: false }));
      return parseRun(`${mode} ${s.name}`, r) as ClientRun;
    };

    const results: Record<string, Record<ClientConfig["mode"], Measured>> = {};
    for (const s of scenarios) {
      const lat: Record<ClientConfig["mode"], number[]> = { direct: [], proxy: [] };
      const mib: Record<ClientConfig["mode"], number[]> = { direct: [], proxy: [] };
      const rps: Record<ClientConfig["mode"], number[]> = { direct: [], proxy: [] };
      for (let rep = 0; rep < reps; rep++) {
        // Alternate which goes first so drift on a busy machine hits both alike.
        const order: ClientConfig["mode"][] = rep % 2 === 0 ? ["direct", "proxy"] : ["proxy", "direct"];
        for (const mode of order) {
          progress(`proxy: ${s.name}, ${mode}, rep ${rep + 1}/${reps}`);
          const r = await runClient(mode, s);
          lat[mode].push(...r.lat);
          mib[mode].push(r.bytes / 2 ** 20 / r.sec);
          rps[mode].push(r.lat.length / r.sec);
        }
      }
      results[s.name] = {
        direct: { latencyMs: stats(lat.direct), mibPerSec: stats(mib.direct), reqPerSec: stats(rps.direct) },
        proxy: { latencyMs: stats(lat.proxy), mibPerSec: stats(mib.proxy), reqPerSec: stats(rps.proxy) },
      };
    }

    const rows = scenarios.map((s) => {
      const r = results[s.name]!;
      const thr = s.path === "/big";
      return [
        s.name,
        r.direct.latencyMs.median,
        r.proxy.latencyMs.median,
        r.proxy.latencyMs.median - r.direct.latencyMs.median,
        r.direct.latencyMs.p95,
        r.proxy.latencyMs.p95,
        thr ? r.direct.mibPerSec.median : r.direct.reqPerSec.median,
        thr ? r.proxy.mibPerSec.median : r.proxy.reqPerSec.median,
        thr ? r.proxy.mibPerSec.median / r.direct.mibPerSec.median : r.proxy.reqPerSec.median / r.direct.reqPerSec.median,
      ];
    });
    printTable(`proxy vs direct${supervisorCpus === null ? "" : ` (DIAGNOSTIC: supervisor CPU limit changed to ${supervisorCpus})`} (${reps} reps each, ${m.cores} cores, load ${m.loadavg.join("/")}; rate = MiB/s for 1 MiB, req/s for small)`, [
      "scenario",
      "direct p50 ms",
      "proxy p50 ms",
      "added p50 ms",
      "direct p95 ms",
      "proxy p95 ms",
      "direct rate",
      "proxy rate",
      "proxy/direct",
    ], rows);
    const thrRatio = Math.min(...scenarios.filter((s) => s.path === "/big").map((s) => results[s.name]!.proxy.mibPerSec.median / results[s.name]!.direct.mibPerSec.median));
    const addedP50 = Math.max(...scenarios.filter((s) => s.path === "/small").map((s) => results[s.name]!.proxy.latencyMs.median - results[s.name]!.direct.latencyMs.median));
    process.stdout.write(
      `targets: throughput ≥ 0.8× direct: ${thrRatio >= 0.8 ? "met" : "MISSED"} (worst ${thrRatio.toFixed(2)}×); added p50 ≤ 1 ms: ${addedP50 <= 1 ? "met" : "MISSED"} (worst ${addedP50.toFixed(2)} ms)\n`,
    );
    const file = writeResult(supervisorCpus === null ? "proxy" : "proxy-diagnostic", m, { supervisorCpus, reps, scenarios, results, worstThroughputRatio: thrRatio, worstAddedP50Ms: addedP50 });
    progress(`proxy: wrote ${file}`);
  } finally {
    await cleanup.run();
  }
}
