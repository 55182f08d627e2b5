// liveness: what hearing N sandboxes' liveness beats costs the receiving process, for the
// wire the gateway uses today and the alternatives an owner could pick — the floor under
// monitor-scale's idle CPU (docs/performance.md, section 3). Each receiver runs alone in a
// child process (bench/liveness/receiver-child.ts) and its CPU is read from /proc, so the
// figure holds on a loaded machine. The baseline row is N TLS WebSocket sessions with no
// beats; a row's µs per sandbox per period is all of its receiver's CPU spread over them.
//   ws-ping-pong: today's wire (a WebSocket ping every period, `ws` answers the pong)
//   ws-ping:      the same pings unanswered (what the pong's TLS write costs)
//   udp-hmac:     one UDP socket for all, a datagram with an HMAC-SHA256 per beat
//   file-sweep:   each sandbox touches a file; one timer stats every file per period
import { spawn, type ChildProcess } from "node:child_process";
import { createHmac, randomBytes } from "node:crypto";
import dgram from "node:dgram";
import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import WebSocket from "ws";
import { LeafCertificates } from "../src/supervisor/tls/leaf-certs.js";
import { issueSandboxCa } from "../src/util/x509.js";
import { cpuSeconds } from "./gateway-process.js";
import { BENCH_DIR, machine, parseNumber, printTable, progress, sleep, writeResult, type BenchOptions } from "./lib.js";

const MODES = ["ws-idle", "ws-ping-pong", "ws-ping", "udp-hmac", "file-sweep"] as const;
type Mode = (typeof MODES)[number];

interface Senders {
  start(): void;
  stop(): void;
}

/** N senders of `mode`'s beats, each every periodMs, spread evenly over the period. */
async function senders(mode: Mode, n: number, periodMs: number, port: number, cfg: { key: Buffer; dir: string }): Promise<Senders> {
  const timers: NodeJS.Timeout[] = [];
  let beat: (i: number) => void = () => undefined;
  const closers: (() => void)[] = [];
  if (mode.startsWith("ws-")) {
    const sockets: WebSocket[] = [];
    for (let i = 0; i < n; i++) {
      const ws = new WebSocket(`wss://127.0.0.1:${port}/`, { rejectUnauthorized: false });
      await new Promise((resolve, reject) => ws.once("open", resolve).once("error", reject));
      sockets.push(ws);
    }
    if (mode !== "ws-idle") beat = (i) => sockets[i]!.ping();
    closers.push(() => sockets.forEach((s) => s.terminate()));
  } else if (mode === "udp-hmac") {
    const socket = dgram.createSocket("udp4");
    beat = (i) => {
      const body = Buffer.from(`${i} ${Date.now()}`);
      socket.send(Buffer.concat([body, createHmac("sha256", cfg.key).update(body).digest()]), port, "127.0.0.1");
    };
    closers.push(() => socket.close());
  } else {
    beat = (i) => {
      const now = new Date();
      utimesSync(join(cfg.dir, String(i)), now, now);
    };
  }
  return {
    start() {
      for (let i = 0; i < n; i++) timers.push(setTimeout(() => timers.push(setInterval(() => beat(i), periodMs)), (periodMs * i) / n));
    },
    stop() {
      timers.forEach((t) => clearTimeout(t));
      closers.forEach((c) => c());
    },
  };
}

export async function run(o: BenchOptions): Promise<void> {
  const m = machine();
  const n = parseNumber(o.flags.n, o.quick ? 10 : 200);
  const periodMs = parseNumber(o.flags["period-ms"], o.quick ? 500 : 2000);
  const windowS = parseNumber(o.flags.window, o.quick ? 2 : 30);
  const dir = mkdtempSync(join(tmpdir(), "sg-liveness-"));
  const beats = join(dir, "beats");
  const ca = await issueSandboxCa("bench-liveness");
  const leaf = await new LeafCertificates(ca).issuePem("127.0.0.1");
  const key = randomBytes(32);
  mkdirSync(beats);
  for (let i = 0; i < n; i++) writeFileSync(join(beats, String(i)), "");
  writeFileSync(join(dir, "cfg.json"), JSON.stringify({ certPem: leaf.certPem, keyPem: leaf.keyPem, key: key.toString("hex"), dir: beats, sweepMs: periodMs }));
  const results: { mode: Mode; cpuPctOfCore: number; beats: number; usPerSandboxPeriod: number }[] = [];
  try {
    for (const mode of MODES) {
      progress(`liveness: ${mode}, ${n} senders every ${periodMs} ms, ${windowS} s window`);
      const child: ChildProcess = spawn(process.execPath, [...process.execArgv, join(BENCH_DIR, "liveness", "receiver-child.ts"), mode, join(dir, "cfg.json")], { stdio: ["ignore", "pipe", "inherit", "ipc"] });
      try {
        const port = await new Promise<number>((resolve, reject) => {
          child.stdout!.once("data", (d: Buffer) => resolve(Number(d.toString())));
          child.once("exit", (code) => reject(new Error(`the ${mode} receiver exited (${String(code)})`)));
        });
        const s = await senders(mode, n, periodMs, port, { key, dir: beats });
        s.start();
        await sleep(periodMs + 1000); // every sender has started; connection set-up is over
        const heard = (): Promise<number> =>
          new Promise((resolve) => {
            child.once("message", (msg: { heard: number }) => resolve(msg.heard));
            child.send("heard?");
          });
        const h0 = await heard();
        const c0 = cpuSeconds(child.pid!);
        const t0 = performance.now();
        await sleep(windowS * 1000);
        const cpu = cpuSeconds(child.pid!) - c0;
        const sec = (performance.now() - t0) / 1000;
        const got = (await heard()) - h0;
        s.stop();
        results.push({ mode, cpuPctOfCore: (cpu / sec) * 100, beats: got, usPerSandboxPeriod: (cpu * 1e6) / ((n * sec * 1000) / periodMs) });
      } finally {
        child.kill("SIGTERM");
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const expected = Math.round((n * windowS * 1000) / periodMs);
  printTable(
    `liveness: the receiver's CPU for ${n} sandboxes beating every ${periodMs} ms (${windowS} s window, ~${expected} beats expected; ${m.cores} cores, load ${m.loadavg.join("/")}; CPU from /proc; /proc counts 10 ms ticks, so short windows are coarse)`,
    ["receiver", "CPU % of a core", "beats heard (file-sweep: changes seen)", "µs per sandbox per period"],
    results.map((r) => [r.mode, r.cpuPctOfCore.toFixed(2), r.beats, r.usPerSandboxPeriod.toFixed(0)]),
  );
  writeResult("liveness", m, { n, periodMs, windowS, results });
}
