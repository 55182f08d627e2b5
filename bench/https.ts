// https: terminated HTTPS through the supervisor against direct HTTPS, in the same run.
// The same node client (keep-alive https.Agent) runs in three places:
//   direct  - a container on the egress network, the workload's image, user and limits,
//             TLS straight to the origin (trusting the origin CA);
//   sandbox - the sandbox's workload: a CONNECT tunnel per connection to $HTTPS_PROXY,
//             which the supervisor terminates (an endpoint with L7 rules), trusting the
//             sandbox CA by NODE_EXTRA_CA_CERTS;
//   squid   - reference (optional): the direct container through Debian's squid in CONNECT
//             passthrough (TLS end to end, no inspection: squid's ssl-bump is not in
//             Debian's package), squid in a container with the supervisor's CPU and memory
//             limits. Present when a squid binary is (--squid=PATH, default /usr/sbin/squid).
// Kept-alive latency (2-byte body) and 1 MiB throughput, plus new connections to hosts the
// supervisor has not seen (leaf generation) against ones it has.
import { startExec } from "../src/driver/docker/exec-session.js";
import { egressNetworkName } from "../src/driver/docker/objects.js";
import { LeafCertificates } from "../src/supervisor/tls/leaf-certs.js";
import { issueSandboxCa } from "../src/util/x509.js";
import { startDockerFixture } from "../test/support/docker-fixture.js";
import { createReady, execIn } from "../test/support/recovery-helpers.js";
import { NODE_TUNNEL_AGENT } from "../test/support/tunnel-agent.js";
import { CpuBreakdown, containerCpuReader } from "./cpu-breakdown.js";
import { Cleanup, collect, machine, parseNumber, parseRun, printTable, progress, REFERENCE_PROXY_BINARIES, startContainer, startDirectClient, startReferenceProxy, stats, writeResult, type BenchOptions, type Stats } from "./lib.js";

const ORIGIN = "bench-tls-origin";
/** The TLS origin's port: the squid reference allows CONNECT to it (bench/lib.ts). */
const PORT = 8443;
/** Names of the same origin the supervisor has not seen before the leaf measurement. */
const FRESH = Array.from({ length: 8 }, (_, i) => `fresh-${i}`);

/** CERTS: {host: {certPem, keyPem}}; the leaf is chosen by SNI. */
const ORIGIN_PROGRAM = `const tls=require("tls"),big=Buffer.alloc(1<<20,97),certs=JSON.parse(process.env.CERTS);
const ctx=Object.fromEntries(Object.entries(certs).map(([h,c])=>[h,tls.createSecureContext({cert:c.certPem,key:c.keyPem})]));
const first=Object.values(certs)[0];
require("https").createServer({cert:first.certPem,key:first.keyPem,SNICallback:(n,cb)=>cb(null,ctx[n])},(q,s)=>{
  if(q.url==="/big"){s.writeHead(200,{"content-length":big.length});s.end(big)}else{s.writeHead(200,{"content-length":2});s.end("ok")}}).listen(${PORT})`;

/** The client: argv[1] is its JSON config; prints one JSON line. */
const CLIENT = `const net=require("net"),tls=require("tls"),https=require("https");
${NODE_TUNNEL_AGENT}
const cfg=JSON.parse(process.argv[1]);
const proxy=cfg.mode==="sandbox"?process.env.HTTPS_PROXY:cfg.mode==="squid"?cfg.proxy:null;
const tlsOpts=cfg.ca?{ca:cfg.ca}:{};
const mkAgent=(keepAlive)=>{const o={keepAlive,maxSockets:cfg.concurrency,...tlsOpts};return proxy?new TunnelAgent(proxy,o):new https.Agent(o)};
function once(agent,host,path){return new Promise((resolve,reject)=>{const s=process.hrtime.bigint();
  https.get({host,port:${PORT},path,agent},(r)=>{let n=0;r.on("data",(d)=>n+=d.length);r.on("error",reject);
    let body="";r.on("data",(d)=>{if(r.statusCode!==200&&body.length<500)body+=d});
    r.on("end",()=>r.statusCode===200?resolve({ms:Number(process.hrtime.bigint()-s)/1e6,bytes:n}):reject(new Error("HTTP "+r.statusCode+" "+(r.headers["x-proxy-error"]||"")+" "+body)));
  }).on("error",reject);});}
async function run(agent,n){const lat=[];let next=0,bytes=0;const t0=process.hrtime.bigint(),c0=process.cpuUsage();
  await Promise.all(Array.from({length:cfg.concurrency},async()=>{while(next<n){next++;const r=await once(agent,cfg.host,cfg.path);lat.push(r.ms);bytes+=r.bytes;}}));
  const c=process.cpuUsage(c0);return {lat,bytes,sec:Number(process.hrtime.bigint()-t0)/1e9,cpuMs:(c.user+c.system)/1000};}
async function fresh(){const out=[];for(const h of cfg.fresh){const a=await once(mkAgent(false),h,"/small");const b=await once(mkAgent(false),h,"/small");out.push({host:h,first:a.ms,second:b.ms});}return {fresh:out};}
const main=cfg.fresh?fresh():(async()=>{const agent=mkAgent(true);await run(agent,cfg.warmup);return run(agent,cfg.requests);})();
main.then((r)=>console.log(JSON.stringify(r)),(e)=>{console.log(JSON.stringify({error:String(e)}));process.exitCode=1;});`;

type Mode = "direct" | "sandbox" | "squid";

interface ClientRun {
  lat: number[];
  bytes: number;
  sec: number;
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

export async function run(o: BenchOptions): Promise<void> {
  const reps = parseNumber(o.flags.reps, o.quick ? 1 : 3);
  const scale = o.quick ? 0.05 : 1;
  const scenarios: Scenario[] = [
    { name: "latency small, kept-alive, c=1", path: "/small", concurrency: 1, requests: Math.round(2000 * scale), warmup: 100 },
    { name: "throughput 1 MiB, c=1", path: "/big", concurrency: 1, requests: Math.round(200 * scale), warmup: 10 },
    { name: "throughput 1 MiB, c=4", path: "/big", concurrency: 4, requests: Math.round(200 * scale), warmup: 10 },
  ];
  const m = machine();
  const cleanup = new Cleanup();
  try {
    const originCa = await issueSandboxCa("bench origins");
    progress("https: starting a private dockerd and a gateway");
    const fx = await startDockerFixture({ liveRestore: true, name: "bhttps", originCaPem: originCa.certPem });
    cleanup.add("fixture", () => fx.close());
    const leaves = new LeafCertificates(originCa);
    const certs = Object.fromEntries(await Promise.all([ORIGIN, ...FRESH].map(async (h) => [h, await leaves.issuePem(h)] as const)));
    const net = egressNetworkName(fx.driver.gatewayId);
    const originId = await startContainer(fx, ORIGIN, {
      Image: fx.driver.imageRefs!.workload.id,
      Cmd: ["node", "-e", ORIGIN_PROGRAM],
      Env: [`CERTS=${JSON.stringify(certs)}`],
      HostConfig: { NetworkMode: net },
      NetworkingConfig: { EndpointsConfig: { [net]: { Aliases: FRESH } } },
    });
    const directId = await startDirectClient(fx, "bench-https-direct");
    const squidUrl = await startReferenceProxy(fx, "squid", directId, o.flags.squid);
    const withSquid = squidUrl !== null;
    const rules = [ORIGIN, ...FRESH].map((h) => `        - host: ${h}\n          port: ${PORT}\n          protocol: https\n          allowPrivate: ["10.0.0.0/8"]\n          rules:\n            - methods: [GET]\n`).join("");
    progress("https: creating the sandbox");
    const sandbox = await createReady(fx, "https", { policy: `version: 1\nnetwork:\n  rules:\n    - name: origin\n      endpoints:\n${rules}` });
    // Diagnostic only (never the default): lift the supervisor's CPU limit to see how much of the cost it explains.
    const supervisorCpus = o.flags["supervisor-cpus"] === undefined ? null : parseNumber(o.flags["supervisor-cpus"], 1);
    if (supervisorCpus !== null) {
      const upd = await fx.engine.request("POST", `/containers/${sandbox.runtime.supervisor.id as string}/update`, { body: { NanoCpus: Math.round(supervisorCpus * 1e9) } });
      if (upd.kind !== "ok") throw new Error("supervisor update failed");
    }

    const runClient = async <T extends object>(mode: Mode, cfg: Record<string, unknown>): Promise<T> => {
      const full = { mode, host: ORIGIN, ...(mode === "sandbox" ? {} : { ca: originCa.certPem }), ...(mode === "squid" ? { proxy: squidUrl } : {}), ...cfg };
      const cmd = ["node", "-e", CLIENT, JSON.stringify(full)];
      const r = mode === "sandbox" ? await execIn(fx, "https", cmd) : await collect(await startExec(fx.engine, directId, { cmd, tty: false }));
      return parseRun(`${mode} ${JSON.stringify(cfg).slice(0, 80)}`, r) as T;
    };

    // New connections first, while every FRESH name is new to the supervisor. Each name: one
    // connection (the supervisor issues its leaf), then a second (the leaf is cached).
    progress("https: first connection to new hosts vs later ones");
    const freshSandbox = (await runClient<{ fresh: { host: string; first: number; second: number }[] }>("sandbox", { fresh: FRESH, concurrency: 1 })).fresh;
    const freshDirect = (await runClient<{ fresh: { host: string; first: number; second: number }[] }>("direct", { fresh: FRESH, concurrency: 1 })).fresh;

    const modes: Mode[] = withSquid ? ["direct", "sandbox", "squid"] : ["direct", "sandbox"];
    const results: Record<string, Partial<Record<Mode, { latencyMs: Stats; mibPerSec: Stats; reqPerSec: Stats }>>> = {};
    const proxyCpu: Partial<Record<Mode, () => number>> = { sandbox: await containerCpuReader(fx, sandbox.runtime.supervisor.id as string) };
    if (withSquid) proxyCpu.squid = await containerCpuReader(fx, "bench-squid");
    const cpu = new CpuBreakdown<Mode>(await containerCpuReader(fx, originId), proxyCpu);
    for (const s of scenarios) {
      const lat: Partial<Record<Mode, number[]>> = {};
      const mib: Partial<Record<Mode, number[]>> = {};
      const rps: Partial<Record<Mode, number[]>> = {};
      for (let rep = 0; rep < reps; rep++) {
        // Rotate which goes first so drift on a busy machine hits every mode alike.
        const order = modes.map((_, i) => modes[(i + rep) % modes.length]!);
        for (const mode of order) {
          progress(`https: ${s.name}, ${mode}, rep ${rep + 1}/${reps}`);
          const r = await cpu.measure(s, mode, () =>
            runClient<ClientRun>(mode, { path: s.path, concurrency: s.concurrency, requests: s.requests, warmup: s.warmup }),
          );
          (lat[mode] ??= []).push(...r.lat);
          (mib[mode] ??= []).push(r.bytes / 2 ** 20 / r.sec);
          (rps[mode] ??= []).push(r.lat.length / r.sec);
        }
      }
      results[s.name] = Object.fromEntries(modes.map((mode) => [mode, { latencyMs: stats(lat[mode]!), mibPerSec: stats(mib[mode]!), reqPerSec: stats(rps[mode]!) }]));
    }

    const rows: (string | number)[][] = [];
    for (const s of scenarios) {
      const r = results[s.name]!;
      const d = r.direct!;
      const rate = (x: typeof d): number => (s.path === "/big" ? x.mibPerSec.median : x.reqPerSec.median);
      for (const mode of modes) {
        const x = r[mode]!;
        rows.push([`${s.name}: ${mode}${mode === "squid" ? " (CONNECT passthrough, reference)" : mode === "sandbox" ? " (terminated)" : ""}`, x.latencyMs.median, x.latencyMs.p95, x.latencyMs.median - d.latencyMs.median, x.latencyMs.p95 - d.latencyMs.p95, rate(x), rate(x) / rate(d)]);
      }
    }
    printTable(`terminated HTTPS vs direct${supervisorCpus === null ? "" : ` (DIAGNOSTIC: supervisor CPU limit changed to ${supervisorCpus})`} (${reps} reps each, ${m.cores} cores, load ${m.loadavg.join("/")}; rate = MiB/s for 1 MiB, req/s for small)`, ["scenario: path", "p50 ms", "p95 ms", "added p50 ms", "added p95 ms", "rate", "× direct"], rows);
    const cpuShares = cpu.print(m.cores, scenarios, modes, "direct");
    const med = (xs: number[]): number => stats(xs).median;
    const leafRows = [
      ["sandbox: first connection to the first new host (leaf key pair + leaf)", freshSandbox[0]!.first, "", ""],
      ["sandbox: first connection to each other new host (leaf signed)", med(freshSandbox.slice(1).map((f) => f.first)), Math.min(...freshSandbox.slice(1).map((f) => f.first)), Math.max(...freshSandbox.slice(1).map((f) => f.first))],
      ["sandbox: second connection to the same host (leaf cached)", med(freshSandbox.map((f) => f.second)), Math.min(...freshSandbox.map((f) => f.second)), Math.max(...freshSandbox.map((f) => f.second))],
      ["direct: new connection (TLS handshake, no proxy)", med(freshDirect.map((f) => f.second)), Math.min(...freshDirect.map((f) => f.second)), Math.max(...freshDirect.map((f) => f.second))],
    ];
    printTable(`new connections: one GET each on a new connection (${FRESH.length} hosts)`, ["connection", "median ms", "min", "max"], leafRows);
    const small = results[scenarios[0]!.name]!;
    const addedP50 = small.sandbox!.latencyMs.median - small.direct!.latencyMs.median;
    const thr = Math.min(...scenarios.filter((s) => s.path === "/big").map((s) => results[s.name]!.sandbox!.mibPerSec.median / results[s.name]!.direct!.mibPerSec.median));
    process.stdout.write(
      `targets: added p50 (kept-alive) ≤ 2 ms: ${addedP50 <= 2 ? "met" : "MISSED"} (${addedP50.toFixed(2)} ms); 1 MiB throughput ≥ 0.6× direct: ${thr >= 0.6 ? "met" : "MISSED"} (worst ${thr.toFixed(2)}×)${withSquid ? "" : "; no squid: reference row skipped"}\n`,
    );
    const file = writeResult(supervisorCpus === null ? "https" : "https-diagnostic", m, { supervisorCpus, reps, scenarios, results, fresh: { sandbox: freshSandbox, direct: freshDirect }, cpu: cpuShares, addedP50Ms: addedP50, worstThroughputRatio: thr, squid: withSquid ? (o.flags.squid ?? REFERENCE_PROXY_BINARIES.squid) : null });
    progress(`https: wrote ${file}`);
  } finally {
    await cleanup.run();
  }
}
