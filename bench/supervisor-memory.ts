// supervisor-memory: what one idle supervisor costs in memory. The supervisor's program
// (the bundle every supervisor container runs, dist/supervisor/supervisor.mjs) runs as a
// host process with a launch file (policy, sandbox CA, no control session), idle; read
// from /proc/<pid>/status: VmRSS, and its parts RssAnon (this process's own pages) and
// RssFile (mapped files: the node binary, shared by every supervisor of the same image).
// Reference row in the same run: an empty node process (a timer only), node's floor.
// Then one HTTPS request the policy terminates, to show what the certificate code adds
// once a sandbox first needs a leaf. --node=PATH runs both on another node binary (the
// same bundle), to compare node versions in one run.

import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import tls from "node:tls";
import { PREBUILT_SUPERVISOR_BUNDLE } from "../src/driver/docker/supervisor-bundle.js";
import { issueSandboxCa } from "../src/util/x509.js";
import { freePort } from "../test/support/net.js";
import { machine, parseNumber, printTable, progress, sleep, stats, writeResult, type BenchOptions } from "./lib.js";

interface Memory {
  rssMiB: number;
  anonMiB: number;
  fileMiB: number;
}

function memoryOf(pid: number): Memory {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kib = (field: string): number => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? Number.NaN);
  return { rssMiB: kib("VmRSS") / 1024, anonMiB: kib("RssAnon") / 1024, fileMiB: kib("RssFile") / 1024 };
}

/** Samples a process once a second over `seconds`, after `settleS`; medians of each field. */
async function sample(pid: number, settleS: number, seconds: number): Promise<Memory> {
  await sleep(settleS * 1000);
  const got: Memory[] = [];
  for (let i = 0; i < seconds; i++) {
    got.push(memoryOf(pid));
    await sleep(1000);
  }
  return { rssMiB: stats(got.map((g) => g.rssMiB)).median, anonMiB: stats(got.map((g) => g.anonMiB)).median, fileMiB: stats(got.map((g) => g.fileMiB)).median };
}

function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once("exit", () => resolve());
    child.kill("SIGTERM");
  });
}

async function untilHealthy(socketPath: string, child: ChildProcess): Promise<void> {
  for (let i = 0; i < 300; i++) {
    if (child.exitCode !== null) throw new Error(`the supervisor exited (${String(child.exitCode)})`);
    const ok = await new Promise<boolean>((resolve) => {
      http
        .get({ socketPath, path: "/healthz", agent: false }, (res) => {
          res.resume();
          resolve(res.statusCode === 200);
        })
        .on("error", () => resolve(false));
    });
    if (ok) return;
    await sleep(100);
  }
  throw new Error("the supervisor's health endpoint did not answer");
}

/** One CONNECT to an https endpoint the policy terminates: the proxy issues its first leaf. */
function terminatedRequest(proxyPort: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port: proxyPort, method: "CONNECT", path: "localhost:9" });
    req.once("connect", (res, socket) => {
      if (res.statusCode !== 200) return reject(new Error(`CONNECT answered ${String(res.statusCode)}`));
      // A ClientHello is what makes the proxy present a leaf; any answer will do.
      const t = tls.connect({ socket, servername: "localhost", rejectUnauthorized: false });
      const done = (): void => {
        t.destroy();
        resolve();
      };
      t.once("secureConnect", done);
      t.once("error", done);
    });
    req.once("error", reject);
    req.end();
  });
}

export async function run(o: BenchOptions): Promise<void> {
  if (!existsSync(PREBUILT_SUPERVISOR_BUNDLE)) throw new Error(`${PREBUILT_SUPERVISOR_BUNDLE} is missing: run npm run build first`);
  const m = machine();
  const reps = parseNumber(o.flags.reps, o.quick ? 1 : 3);
  const settleS = parseNumber(o.flags.settle, o.quick ? 1 : 5);
  const windowS = parseNumber(o.flags.window, o.quick ? 1 : 10);
  const node = o.flags.node ?? process.execPath;
  if (!existsSync(node)) throw new Error(`--node=${node}: no such file (the node binary to run the supervisor and the reference on)`);
  progress(`supervisor-memory: on ${node} (${execFileSync(node, ["--version"], { encoding: "utf8" }).trim()})`);
  const dir = mkdtempSync(join(tmpdir(), "sg-sup-mem-"));
  const ca = await issueSandboxCa("bench-memory");
  const rows: Record<"empty" | "idle" | "leaf", Memory[]> = { empty: [], idle: [], leaf: [] };
  try {
    for (let rep = 1; rep <= reps; rep++) {
      progress(`supervisor-memory: rep ${rep}/${reps}, an empty node process`);
      const empty = spawn(node, ["-e", "setInterval(() => {}, 1 << 30)"], { stdio: "ignore" });
      try {
        rows.empty.push(await sample(empty.pid!, settleS, windowS));
      } finally {
        await stop(empty);
      }

      progress(`supervisor-memory: rep ${rep}/${reps}, the supervisor idle`);
      const proxyPort = await freePort();
      const healthSocket = join(dir, `health-${rep}.sock`);
      const launch = {
        sandboxId: "sbx_bench_memory",
        generation: 1,
        nonce: "bench",
        proxyPort,
        healthSocket,
        policyRevision: 1,
        // localhost from /etc/hosts: no DNS server needed. Nothing listens upstream; the leaf is issued before that matters.
        policy: { version: 1, network: { rules: [{ name: "terminated", endpoints: [{ host: "localhost", port: 9, protocol: "https", allowPrivate: ["127.0.0.0/8"], rules: [{ methods: ["GET"] }] }] }] } },
        tls: { caCertPem: ca.certPem, caKeyPem: ca.keyPem },
      };
      const file = join(dir, `launch-${rep}.json`);
      writeFileSync(file, JSON.stringify(launch), { mode: 0o600 });
      const sup = spawn(node, [PREBUILT_SUPERVISOR_BUNDLE], { stdio: "ignore", env: { ...process.env, SANDGATE_LAUNCH_CONFIG: file } });
      try {
        await untilHealthy(healthSocket, sup);
        rows.idle.push(await sample(sup.pid!, settleS, windowS));
        progress(`supervisor-memory: rep ${rep}/${reps}, after a first terminated connection`);
        await terminatedRequest(proxyPort);
        rows.leaf.push(await sample(sup.pid!, settleS, windowS));
      } finally {
        await stop(sup);
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const med = (k: keyof typeof rows, f: keyof Memory): number => stats(rows[k].map((r) => r[f])).median;
  const base = { rss: med("empty", "rssMiB"), anon: med("empty", "anonMiB") };
  const row = (label: string, k: keyof typeof rows): (string | number)[] => [label, med(k, "rssMiB"), med(k, "anonMiB"), med(k, "fileMiB"), med(k, "rssMiB") - base.rss, med(k, "anonMiB") - base.anon];
  printTable(`supervisor memory, idle (${reps} reps, medians of ${windowS} 1 s samples after ${settleS} s; ${m.cores} cores, load ${m.loadavg.join("/")}; MiB)`, ["process", "VmRSS", "RssAnon (own)", "RssFile (shared)", "RSS over node", "own over node"], [
    row("empty node (reference)", "empty"),
    row("supervisor, idle", "idle"),
    row("supervisor, after a first leaf", "leaf"),
  ]);
  const rss = med("idle", "rssMiB");
  process.stdout.write(`target: supervisor VmRSS idle ≤ 40 MiB: ${rss <= 40 ? "met" : "MISSED"} (${rss.toFixed(1)} MiB; node's own floor here ${base.rss.toFixed(1)} MiB)\n`);
  const out = writeResult("supervisor-memory", m, { reps, settleS, windowS, samples: rows });
  progress(`supervisor-memory: wrote ${out}`);
}
