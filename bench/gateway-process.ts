// A gateway run as its own process (the real CLI), so its RSS, CPU time and
// sockets can be read from /proc without the benchmark's own heap or event loop
// in the numbers.

import { isLoopbackHex, tcpSockets } from "../src/util/proc-net.js";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, openSync, closeSync, readFileSync, readdirSync, readlinkSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { mountPoints } from "../src/driver/docker/workspace-disk.js";
import { PROJECT_ROOT, sleep } from "./lib.js";
import { apiFetch } from "../test/support/api-client.js";

export interface GatewayProcess {
  pid: number;
  url: string;
  token: string;
  home: string;
  logFile: string;
  api(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }>;
  stop(): Promise<void>;
}

/** `sandgate --home H gateway start` (the API on the home's socket) against the daemon at dockerHost; resolves once the runtime is ready. */
export async function startGatewayProcess(dockerHost: string, opts: { readyTimeoutMs?: number } = {}): Promise<GatewayProcess> {
  const home = mkdtempSync(join(tmpdir(), "sg-bench-home-"));
  const logFile = join(home, "gateway.out");
  const out = openSync(logFile, "a");
  // SANDGATE_BENCH_GATEWAY_PROFILE=DIR: the gateway writes a V8 CPU profile there when it stops.
  const profileDir = process.env.SANDGATE_BENCH_GATEWAY_PROFILE;
  const prof = profileDir ? ["--cpu-prof", `--cpu-prof-dir=${profileDir}`] : [];
  const child: ChildProcess = spawn(process.execPath, [...prof, "--import", "tsx", join(PROJECT_ROOT, "src", "cli", "main.ts"), "--home", home, "gateway", "start"], {
    cwd: PROJECT_ROOT,
    env: { ...process.env, DOCKER_HOST: dockerHost, SANDGATE_HOME: home },
    stdio: ["ignore", out, out],
  });
  closeSync(out);
  let exited: string | undefined;
  const exitP = new Promise<void>((resolve) => {
    child.on("exit", (code, sig) => {
      exited = sig ?? `code ${code ?? "?"}`;
      resolve();
    });
    child.on("error", (err) => {
      exited = err.message;
      resolve();
    });
  });
  const stop = async (): Promise<void> => {
    if (exited === undefined) {
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 15_000);
      await exitP;
      clearTimeout(timer);
    }
    // Workspaces stay mounted when a gateway stops (their sandboxes live on): a bench's do not.
    for (const m of mountPoints(readFileSync("/proc/self/mountinfo", "utf8"))) {
      if (m.startsWith(`${home}/`)) spawnSync("umount", ["-l", m]);
    }
    rmSync(home, { recursive: true, force: true });
  };

  try {
    const deadline = Date.now() + (opts.readyTimeoutMs ?? 180_000);
    let addr: { url: string; pid: number } | undefined;
    for (;;) {
      if (exited !== undefined) throw new Error(`gateway exited (${exited}) before it was ready:\n${tail(logFile)}`);
      if (Date.now() > deadline) throw new Error(`gateway not ready in time:\n${tail(logFile)}`);
      try {
        addr = JSON.parse(readFileSync(join(home, "gateway.json"), "utf8")) as { url: string; pid: number };
      } catch {
        addr = undefined;
      }
      const pid = child.pid;
      if (addr !== undefined && pid !== undefined && addr.pid === pid) {
        const token = readFileSync(join(home, "token"), "utf8").trim();
        const api = makeApi(addr.url, token);
        const st = await api("GET", "/v1/status").catch(() => undefined);
        if (st?.status === 200 && st.body?.runtime?.ready === true) {
          return { pid, url: addr.url, token, home, logFile, api, stop };
        }
      }
      await sleep(200);
    }
  } catch (err) {
    await stop();
    throw err;
  }
}

function makeApi(url: string, token: string): GatewayProcess["api"] {
  return async (method, path, body) => {
    const res = await apiFetch(url, path, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  };
}

export function tail(file: string, lines = 30): string {
  try {
    return readFileSync(file, "utf8").split("\n").slice(-lines).join("\n");
  } catch {
    return "(no log)";
  }
}

// ---- /proc readings ------------------------------------------------------------------

export function rssBytes(pid: number): number {
  const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  if (!m) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(m[1]) * 1024;
}

const CLK_TCK = ((): number => {
  const r = spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" });
  const n = Number(r.stdout.trim());
  return Number.isFinite(n) && n > 0 ? n : 100;
})();

/** utime + stime of the process, in seconds. */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  // Fields after the parenthesised command name, which may itself contain spaces.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / CLK_TCK;
}

/** Inodes of the sockets the process holds open. */
export function socketInodes(pid: number): Set<string> {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) inodes.add(m[1]!);
    } catch {
      /* fd closed meanwhile */
    }
  }
  return inodes;
}

/**
 * Connections from the process to a Unix socket path: the daemon's accepted end
 * is listed under the path, with the client's inode as its peer (ss -x).
 */
export function unixConnectionsTo(pid: number, socketPath: string): number {
  const mine = socketInodes(pid);
  const out = spawnSync("ss", ["-x", "-a", "-n"], { encoding: "utf8", maxBuffer: 64 * 1024 * 1024 }).stdout;
  let n = 0;
  for (const line of out.split("\n")) {
    const f = line.trim().split(/\s+/);
    // Netid State Recv-Q Send-Q Local Port Peer Port ...
    if (f.length < 8 || f[4] !== socketPath) continue;
    if (mine.has(f[7]!)) n++;
  }
  return n;
}

/**
 * ESTABLISHED TCP connections of the process with a non-loopback peer; with
 * localPort, only those accepted on that port (the supervisors' control endpoint).
 */
export function remoteTcpConnections(pid: number, localPort?: number): number {
  const mine = socketInodes(pid);
  return tcpSockets().filter((t) => t.state === "01" && mine.has(t.inode) && (localPort === undefined || t.localPort === localPort) && !isLoopbackHex(t.remoteHex)).length;
}
