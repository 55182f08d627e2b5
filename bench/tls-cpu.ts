// tls-cpu: the supervisor's CPU per MiB of terminated HTTPS, read from /proc rather than
// timed, so it holds on a loaded machine. The proxy runs alone in a child process (no
// Docker); the origin (node https, 1 MiB bodies) and the client (one CONNECT tunnel, TLS to
// the sandbox CA's leaf, keep-alive GETs) run here. A supervisor capped at `cpus` carries at
// most cpus / (CPU s per MiB) MiB/s: what the --supervisor-cpus limit costs. The reference row
// is a bare node TLS-to-TLS pipe (bench/tls-cpu/pipe-child.ts): the floor of any terminator
// written in node, so what the HTTP layer, the policy and the audit add is the difference.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import https from "node:https";
import type { Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import tls from "node:tls";
import { LeafCertificates } from "../src/supervisor/tls/leaf-certs.js";
import { issueSandboxCa } from "../src/util/x509.js";
import { cpuSeconds } from "./gateway-process.js";
import { BENCH_DIR, machine, parseNumber, printTable, progress, stats, writeResult, type BenchOptions } from "./lib.js";

const MIB = 1 << 20;

export async function run(o: BenchOptions): Promise<void> {
  const m = machine();
  const mib = parseNumber(o.flags.mib, o.quick ? 10 : 300);
  const reps = parseNumber(o.flags.reps, o.quick ? 1 : 3);
  const dir = mkdtempSync(join(tmpdir(), "sg-tls-cpu-"));
  const sandboxCa = await issueSandboxCa("bench");
  const originCa = await issueSandboxCa("bench-origin");
  const leaf = await new LeafCertificates(originCa).issuePem("origin.test");
  const body = Buffer.alloc(MIB, 97);
  const origin = https.createServer({ cert: leaf.certPem, key: leaf.keyPem }, (_req, res) => {
    res.writeHead(200, { "content-length": body.length });
    res.end(body);
  });
  await new Promise<void>((r) => origin.listen(0, "127.0.0.1", r));
  const originPort = (origin.address() as { port: number }).port;
  writeFileSync(join(dir, "cfg.json"), JSON.stringify({ originPort, sandboxCa, originCaPem: originCa.certPem }));
  const kinds = [
    { name: "sandgate", file: "proxy-child.ts" },
    { name: "tls pipe (reference: no HTTP)", file: "pipe-child.ts" },
  ];
  const children = kinds.map((k) => spawn(process.execPath, [...process.execArgv, join(BENCH_DIR, "tls-cpu", k.file), join(dir, "cfg.json")], { stdio: ["ignore", "pipe", "inherit"] }));
  try {
    const ports = await Promise.all(
      children.map(
        (child, i) =>
          new Promise<number>((resolve, reject) => {
            child.stdout.once("data", (d: Buffer) => resolve(Number(d.toString())));
            child.once("exit", (code) => reject(new Error(`the ${kinds[i]!.name} child exited (${String(code)})`)));
          }),
      ),
    );
    const rows: (string | number)[][] = [];
    const results: { rep: number; proxy: string; mib: number; cpuMsPerMiB: number; cipher: string; wallMiBps: number }[] = [];
    for (let rep = 1; rep <= reps; rep++) {
      // Alternate which goes first, so drift hits both alike.
      for (const i of rep % 2 === 1 ? [0, 1] : [1, 0]) {
        progress(`tls-cpu: rep ${rep}/${reps}, ${kinds[i]!.name}: ${mib} MiB through one terminated tunnel`);
        const r = await measure(ports[i]!, children[i]!.pid!, originPort, sandboxCa.certPem, mib);
        results.push({ rep, proxy: kinds[i]!.name, ...r });
        rows.push([rep, kinds[i]!.name, r.cipher, r.mib.toFixed(0), r.cpuMsPerMiB.toFixed(2), (500 / r.cpuMsPerMiB).toFixed(0), (1000 / r.cpuMsPerMiB).toFixed(0), r.wallMiBps.toFixed(1)]);
      }
    }
    printTable(`CPU per MiB of terminated HTTPS (${m.cores} cores, load ${m.loadavg.join("/")}; CPU from /proc, robust to load; wall rate is not)`, ["rep", "proxy", "cipher", "MiB", "CPU ms/MiB", "ceiling at 0.5 CPU MiB/s", "ceiling at 1 CPU MiB/s", "wall MiB/s"], rows);
    const median = (name: string): number => stats(results.filter((r) => r.proxy === name).map((r) => r.cpuMsPerMiB)).median;
    const [ours, floor] = kinds.map((k) => median(k.name)) as [number, number];
    process.stdout.write(`median ${ours.toFixed(2)} ms of supervisor CPU per MiB; a bare node TLS pipe ${floor.toFixed(2)} ms (HTTP, policy and audit: ${(ours - floor).toFixed(2)} ms)\n`);
    writeResult("tls-cpu", m, { mib, reps, results, medianCpuMsPerMiB: ours, pipeMedianCpuMsPerMiB: floor });
  } finally {
    for (const child of children) child.kill("SIGTERM");
    origin.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** `mib` keep-alive GETs of 1 MiB over one CONNECT tunnel to the proxy at `port`; its CPU (process `pid`) per MiB. */
async function measure(port: number, pid: number, originPort: number, caPem: string, mib: number): Promise<{ mib: number; cpuMsPerMiB: number; cipher: string; wallMiBps: number }> {
  const raw = await new Promise<Socket>((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port, method: "CONNECT", path: `origin.test:${originPort}` });
    req.once("connect", (res, s) => (res.statusCode === 200 ? resolve(s) : reject(new Error(`CONNECT answered ${String(res.statusCode)}`))));
    req.once("error", reject);
    req.end();
  });
  const socket = tls.connect({ socket: raw, servername: "origin.test", ca: caPem, ALPNProtocols: ["http/1.1"] });
  await new Promise((r) => socket.once("secureConnect", r));
  const cipher = socket.getCipher().name;
  const agent = new https.Agent({ keepAlive: true, maxSockets: 1 });
  // Every request of this agent goes over the one terminated tunnel.
  (agent as unknown as { createConnection: () => tls.TLSSocket }).createConnection = () => socket;
  const get = (): Promise<number> =>
    new Promise((resolve, reject) => {
      https
        .get({ host: "origin.test", port: originPort, path: "/big", agent }, (res) => {
          let n = 0;
          res.on("data", (d: Buffer) => (n += d.length));
          res.on("end", () => (res.statusCode === 200 ? resolve(n) : reject(new Error(`HTTP ${String(res.statusCode)}`))));
        })
        .on("error", reject);
    });
  await get(); // the leaf is issued and the upstream connection opened outside the measurement
  const cpu0 = cpuSeconds(pid);
  const t0 = process.hrtime.bigint();
  let bytes = 0;
  for (let i = 0; i < mib; i++) bytes += await get();
  const sec = Number(process.hrtime.bigint() - t0) / 1e9;
  const cpuMsPerMiB = ((cpuSeconds(pid) - cpu0) * 1000) / (bytes / MIB);
  socket.destroy();
  agent.destroy();
  return { mib: bytes / MIB, cpuMsPerMiB, cipher, wallMiBps: bytes / MIB / sec };
}
