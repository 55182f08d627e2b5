// tls-cpu: the supervisor's CPU per MiB of terminated HTTPS, read from /proc rather than
// timed, so it holds on a loaded machine. The proxy runs alone in a child process (no
// Docker); the origin (node https, 1 MiB bodies) and the client (one CONNECT tunnel, TLS to
// the sandbox CA's leaf, keep-alive GETs) run here. A supervisor capped at `cpus` carries at
// most cpus / (CPU s per MiB) MiB/s: what the --supervisor-cpus limit costs.
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import https from "node:https";
import type { Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import tls from "node:tls";
import { LeafCertificates } from "../src/supervisor/tls/leaf-certs.js";
import { issueSandboxCa } from "../src/util/x509.js";
import { BENCH_DIR, machine, parseNumber, printTable, progress, stats, writeResult, type BenchOptions } from "./lib.js";

const MIB = 1 << 20;

/** CPU seconds (user + system) a process has used. */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

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
  const child = spawn(process.execPath, [...process.execArgv, join(BENCH_DIR, "tls-cpu", "proxy-child.ts"), join(dir, "cfg.json")], { stdio: ["ignore", "pipe", "inherit"] });
  try {
    const proxyPort = Number(await new Promise<string>((resolve, reject) => {
      child.stdout.once("data", (d: Buffer) => resolve(d.toString()));
      child.once("exit", (code) => reject(new Error(`the proxy exited (${String(code)})`)));
    }));
    const rows: (string | number)[][] = [];
    const results: { rep: number; mib: number; cpuMsPerMiB: number; cipher: string; wallMiBps: number }[] = [];
    for (let rep = 1; rep <= reps; rep++) {
      progress(`tls-cpu: rep ${rep}/${reps}, ${mib} MiB through one terminated tunnel`);
      const raw = await new Promise<Socket>((resolve, reject) => {
        const req = http.request({ host: "127.0.0.1", port: proxyPort, method: "CONNECT", path: `origin.test:${originPort}` });
        req.once("connect", (res, s) => (res.statusCode === 200 ? resolve(s) : reject(new Error(`CONNECT answered ${String(res.statusCode)}`))));
        req.once("error", reject);
        req.end();
      });
      const socket = tls.connect({ socket: raw, servername: "origin.test", ca: sandboxCa.certPem, ALPNProtocols: ["http/1.1"] });
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
      const cpu0 = cpuSeconds(child.pid!);
      const t0 = process.hrtime.bigint();
      let bytes = 0;
      for (let i = 0; i < mib; i++) bytes += await get();
      const sec = Number(process.hrtime.bigint() - t0) / 1e9;
      const cpuMsPerMiB = ((cpuSeconds(child.pid!) - cpu0) * 1000) / (bytes / MIB);
      socket.destroy();
      agent.destroy();
      results.push({ rep, mib: bytes / MIB, cpuMsPerMiB, cipher, wallMiBps: bytes / MIB / sec });
      rows.push([rep, cipher, (bytes / MIB).toFixed(0), cpuMsPerMiB.toFixed(2), (500 / cpuMsPerMiB).toFixed(0), (1000 / cpuMsPerMiB).toFixed(0), (bytes / MIB / sec).toFixed(1)]);
    }
    const s = stats(results.map((r) => r.cpuMsPerMiB));
    printTable(`supervisor CPU per MiB of terminated HTTPS (${m.cores} cores, load ${m.loadavg.join("/")}; CPU from /proc, robust to load; wall rate is not)`, ["rep", "cipher", "MiB", "CPU ms/MiB", "ceiling at 0.5 CPU MiB/s", "ceiling at 1 CPU MiB/s", "wall MiB/s"], rows);
    process.stdout.write(`median ${s.median.toFixed(2)} ms of supervisor CPU per MiB\n`);
    writeResult("tls-cpu", m, { mib, reps, results, medianCpuMsPerMiB: s.median });
  } finally {
    child.kill("SIGTERM");
    origin.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
