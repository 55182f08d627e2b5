// A private Docker daemon for integration tests and the demo.
//
// Each daemon owns everything under one short temp dir (Unix socket paths are
// limited to 107 bytes): data-root, exec-root (where dockerd's managed containerd
// puts its socket and state), pidfile, API socket, --config-file and log. It has
// no default bridge, no iptables rules, and a /16 address pool for user networks
// that is reserved across processes (lock files), so several private daemons can
// coexist with each other and with a system daemon.
//
// Cleanup is one bash script (dockerd-cleanup.sh) used three ways: by destroy(), by a
// process 'exit' hook, and by a detached reaper that runs it when the owning process
// dies without either (a killed vitest worker), so no daemon outlives the test run.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, unlinkSync, writeFileSync, writeSync } from "node:fs";
import { request } from "node:http";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { setTimeout as delay } from "node:timers/promises";

export type StorageDriver = "overlay2" | "vfs";

export interface DockerdOptions {
  liveRestore: boolean;
  /** Short name, used in the dir, the containerd namespace and log lines. */
  name?: string;
  /** Default: overlay2, falling back to vfs when overlay2 cannot start here. */
  storageDriver?: StorageDriver;
  /** Bound for the daemon to answer /_ping after a start. Default 30 s. */
  startTimeoutMs?: number;
  /** More dockerd flags (e.g. "--debug"). */
  extraArgs?: string[];
  /**
   * A file the daemon sees as the host's /etc/resolv.conf (it runs in a mount
   * namespace of its own with this file bound over it); default: the host's.
   */
  resolvConf?: string;
}

const SYSTEM_CONTAINERD_SOCKET = "/run/containerd/containerd.sock";
const POOL_LOCK_DIR = "/tmp/sg-dd-pools";
// Second octets of 10.X.0.0/16 pools handed to private daemons.
const POOL_OCTETS = Array.from({ length: 55 }, (_, i) => 200 + i);
const EXTRA_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

const CLEANUP_SCRIPT = fileURLToPath(new URL("./dockerd-cleanup.sh", import.meta.url));

function findExecutable(name: string): string {
  for (const dir of EXTRA_PATH.split(":")) {
    const p = join(dir, name);
    if (existsSync(p)) return p;
  }
  return name;
}

/** GET /_ping on a Unix socket. true only for a 200 "OK" within timeoutMs. */
export function pingSocket(socketPath: string, timeoutMs = 1000): Promise<boolean> {
  return new Promise((resolve) => {
    let done = false;
    const finish = (ok: boolean): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      req.destroy();
      resolve(ok);
    };
    const req = request({ socketPath, path: "/_ping", method: "GET" }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => (body += chunk));
      res.on("end", () => finish(res.statusCode === 200 && body === "OK"));
      res.on("error", () => finish(false));
    });
    const timer = setTimeout(() => finish(false), timeoutMs);
    req.on("error", () => finish(false));
    req.end();
  });
}

function isAlive(pid: number): boolean {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    return !/^State:\s*Z/m.test(status);
  } catch {
    return false;
  }
}

/** Every thread of `pid` is in a stopped state (or gone): nothing of it runs. */
function allThreadsStopped(pid: number): boolean {
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return true; // the process is gone
  }
  return tids.every((tid) => {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8");
      // "tid (comm) S ...": the state follows the last ')' (comm may contain one).
      const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
      return state === "T" || state === "t" || state === "Z" || state === "X";
    } catch {
      return true; // this thread is gone
    }
  });
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Reserve a 10.X.0.0/16 not routed on this host and not held by a live process. */
function reservePool(preferred: number): { octet: number; lock: string } {
  mkdirSync(POOL_LOCK_DIR, { recursive: true });
  const routes = spawnSync("ip", ["-4", "-o", "route", "show"], { encoding: "utf8" }).stdout;
  const start = preferred % POOL_OCTETS.length;
  for (let i = 0; i < POOL_OCTETS.length; i++) {
    const octet = POOL_OCTETS[(start + i) % POOL_OCTETS.length]!;
    if (new RegExp(`(^|\\s)10\\.${octet}\\.`, "m").test(routes)) continue;
    const lock = join(POOL_LOCK_DIR, `10.${octet}.lock`);
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        const fd = openSync(lock, "wx");
        writeSync(fd, String(process.pid));
        closeSync(fd);
        return { octet, lock };
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
        const holder = Number.parseInt(readFileSync(lock, "utf8"), 10);
        if (Number.isFinite(holder) && holder > 0 && pidAlive(holder)) break;
        try {
          unlinkSync(lock); // stale: its owner is gone
        } catch {
          /* raced with another process; try again */
        }
      }
    }
  }
  throw new Error(`no free 10.X.0.0/16 address pool among 10.${POOL_OCTETS[0]!}-10.${POOL_OCTETS.at(-1)!}`);
}

function hashName(name: string): number {
  let h = 0;
  for (const ch of name) h = (h * 31 + ch.charCodeAt(0)) >>> 0;
  return h;
}

function tailFile(path: string, lines = 40): string {
  try {
    return readFileSync(path, "utf8").split("\n").slice(-lines).join("\n");
  } catch {
    return "(no log)";
  }
}

const live = new Set<PrivateDockerd>();
let exitHookInstalled = false;
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on("exit", () => {
    for (const d of live) d.destroySync();
  });
}

export class PrivateDockerd {
  readonly name: string;
  readonly dir: string;
  readonly socketPath: string;
  readonly dockerHost: string;
  readonly logPath: string;
  readonly configPath: string;
  readonly pidfilePath: string;
  readonly dataRoot: string;
  readonly execRoot: string;
  /** Containerd namespace (and plugins namespace prefix): unique per daemon. */
  readonly containerdNamespace: string;
  /** The /16 given to --default-address-pool, e.g. "10.213.0.0/16". */
  readonly addressPool: string;
  /**
   * Where a gateway on this daemon keeps its workspace mounts. With resolvConf (the
   * daemon in a mount namespace of its own) it is a shared mount that the daemon's
   * namespace follows as a slave, so workspaces mounted later reach the daemon.
   */
  readonly workspaceRoot: string;

  #storageDriver: StorageDriver;
  #storageDriverChosen: boolean;
  #liveRestore: boolean;
  #startTimeoutMs: number;
  #extraArgs: string[];
  #resolvConf: string | undefined;
  #child: ChildProcess | undefined;
  #exited: Promise<void> = Promise.resolve();
  #reaper: ChildProcess | undefined;
  #poolLock: string;
  #poolPrefix: string;
  #destroyed = false;
  #starts = 0;

  private constructor(opts: DockerdOptions) {
    this.name = (opts.name ?? "t").replace(/[^a-z0-9]/gi, "").slice(0, 12) || "t";
    const rand = randomBytes(3).toString("hex");
    this.dir = mkdtempSync(`/tmp/sg-dd-${this.name}-${rand}-`).replace(/\/$/, "");
    this.socketPath = join(this.dir, "docker.sock");
    this.dockerHost = `unix://${this.socketPath}`;
    this.logPath = join(this.dir, "dockerd.log");
    this.configPath = join(this.dir, "daemon.json");
    this.pidfilePath = join(this.dir, "docker.pid");
    this.dataRoot = join(this.dir, "data");
    this.execRoot = join(this.dir, "exec");
    this.containerdNamespace = `sgdd-${this.name}-${rand}`;
    const { octet, lock } = reservePool(hashName(this.name));
    this.#poolLock = lock;
    this.#poolPrefix = `10.${octet}.`;
    this.addressPool = `10.${octet}.0.0/16`;
    this.#storageDriver = opts.storageDriver ?? "overlay2";
    this.#storageDriverChosen = opts.storageDriver !== undefined;
    this.#liveRestore = opts.liveRestore;
    this.#startTimeoutMs = opts.startTimeoutMs ?? 30_000;
    this.#extraArgs = opts.extraArgs ?? [];
    this.#resolvConf = opts.resolvConf;
    if (this.socketPath.length > 100) throw new Error(`socket path too long: ${this.socketPath}`);
    this.workspaceRoot = join(this.dir, "ws");
    mkdirSync(this.workspaceRoot, { mode: 0o700 });
    if (this.#resolvConf !== undefined) {
      for (const args of [["--bind", this.workspaceRoot, this.workspaceRoot], ["--make-shared", this.workspaceRoot]]) {
        const r = spawnSync(findExecutable("mount"), args, { encoding: "utf8" });
        if (r.status !== 0) throw new Error(`mount ${args.join(" ")}: ${r.stderr}`);
      }
    }
  }

  static async start(opts: DockerdOptions): Promise<PrivateDockerd> {
    const d = new PrivateDockerd(opts);
    live.add(d);
    installExitHook();
    d.#startReaper();
    try {
      await d.#firstStart();
    } catch (err) {
      await d.destroy();
      throw err;
    }
    return d;
  }

  get pid(): number | undefined {
    return this.#child?.exitCode === null && this.#child.signalCode === null ? this.#child.pid : undefined;
  }

  get storageDriver(): StorageDriver {
    return this.#storageDriver;
  }

  get liveRestore(): boolean {
    return this.#liveRestore;
  }

  /** Writes --config-file; dockerd reads it at its next start. */
  setLiveRestore(on: boolean): Promise<void> {
    this.#liveRestore = on;
    this.#writeConfig();
    return Promise.resolve();
  }

  /** Signal the daemon and (by default) wait until it and its managed containerd are gone. */
  async stop(signal: "SIGTERM" | "SIGKILL" = "SIGTERM", opts: { waitExit?: boolean } = {}): Promise<void> {
    const child = this.#child;
    if (!child || this.pid === undefined) return;
    const containerdPid = this.#containerdPid();
    if (signal === "SIGTERM") child.kill("SIGCONT"); // a frozen daemon cannot act on SIGTERM
    child.kill(signal);
    if (opts.waitExit === false) return;
    // A graceful stop without live-restore stops every container first (up to their
    // stop timeouts); past a minute something is wrong: kill it.
    const timer = new AbortController();
    const exitedInTime = await Promise.race([
      this.#exited.then(() => true),
      delay(60_000, false, { signal: timer.signal }).catch(() => true),
    ]);
    timer.abort(); // do not keep the event loop alive for the rest of the minute
    if (!exitedInTime) {
      child.kill("SIGKILL");
      await this.#exited;
    }
    // The managed containerd dies with dockerd (graceful stop or PDEATHSIG); a new
    // dockerd must not find the old one still alive and try to reuse it.
    if (containerdPid !== undefined) {
      const deadline = Date.now() + 10_000;
      while (isAlive(containerdPid) && Date.now() < deadline) await delay(50);
    }
  }

  /** Start again on the same data-root and socket; resolves when /_ping answers. */
  async startAgain(opts: { liveRestore?: boolean } = {}): Promise<void> {
    if (this.#destroyed) throw new Error("PrivateDockerd destroyed");
    if (this.pid !== undefined) throw new Error(`dockerd ${this.name} is still running (pid ${this.pid})`);
    if (opts.liveRestore !== undefined) await this.setLiveRestore(opts.liveRestore);
    await this.#spawnAndWait();
  }

  async restart(opts: { downMs?: number; signal?: "SIGTERM" | "SIGKILL" } = {}): Promise<void> {
    await this.stop(opts.signal ?? "SIGTERM");
    if (opts.downMs) await delay(opts.downMs);
    await this.startAgain();
  }

  /**
   * SIGSTOP: the socket still accepts connections but nothing answers. kill()
   * returns before every thread of the daemon has taken the stop, and a running
   * thread can still answer a request meanwhile: resolves once all are stopped.
   */
  async freeze(): Promise<void> {
    const pid = this.pid;
    if (pid === undefined) return;
    this.#child!.kill("SIGSTOP");
    const deadline = Date.now() + 30_000;
    while (!allThreadsStopped(pid)) {
      if (Date.now() > deadline) throw new Error(`dockerd ${this.name} (pid ${pid}) still running 30 s after SIGSTOP`);
      await delay(10);
    }
  }

  thaw(): void {
    if (this.pid !== undefined) this.#child!.kill("SIGCONT");
  }

  ping(timeoutMs = 1000): Promise<boolean> {
    return pingSocket(this.socketPath, timeoutMs);
  }

  /** Last lines of dockerd.log (for failure messages). */
  logTail(lines = 40): string {
    return tailFile(this.logPath, lines);
  }

  /** Kill daemon, containerd, shims and containers; delete bridges; unmount; remove the dir. Idempotent. */
  async destroy(): Promise<void> {
    if (this.#destroyed) return;
    this.#destroyed = true;
    live.delete(this);
    this.#reaper?.kill("SIGKILL");
    this.#reaper = undefined;
    await new Promise<void>((resolve) => {
      const p = spawn("bash", [CLEANUP_SCRIPT, "now", ...this.#cleanupArgs()], { stdio: "ignore" });
      p.on("error", () => resolve());
      p.on("exit", () => resolve());
    });
    await this.#exited;
  }

  /** Synchronous destroy for the process 'exit' hook. */
  destroySync(): void {
    if (this.#destroyed) return;
    this.#destroyed = true;
    live.delete(this);
    this.#reaper?.kill("SIGKILL");
    spawnSync("bash", [CLEANUP_SCRIPT, "now", ...this.#cleanupArgs()], { stdio: "ignore" });
  }

  #cleanupArgs(): string[] {
    return [this.dir, this.containerdNamespace, this.#poolPrefix, this.#poolLock];
  }

  #startReaper(): void {
    const reaper = spawn("bash", [CLEANUP_SCRIPT, "reap", ...this.#cleanupArgs(), String(process.pid)], {
      detached: true,
      stdio: "ignore",
    });
    reaper.on("error", () => undefined);
    reaper.unref();
    this.#reaper = reaper;
  }

  #writeConfig(): void {
    writeFileSync(this.configPath, `${JSON.stringify({ "live-restore": this.#liveRestore }, null, 2)}\n`);
  }

  #containerdPid(): number | undefined {
    try {
      const n = Number.parseInt(readFileSync(join(this.execRoot, "containerd", "containerd.pid"), "utf8"), 10);
      return Number.isFinite(n) && n > 0 ? n : undefined;
    } catch {
      return undefined;
    }
  }

  // After a SIGKILL the managed containerd dies too (PDEATHSIG) but can linger as a
  // zombie until PID 1 reaps it; dockerd's kill(pid, 0) check would take the zombie
  // for a live containerd, "reuse" it and time out. Without the pidfile it starts a new one.
  #dropStaleContainerdPidfile(): void {
    const pid = this.#containerdPid();
    if (pid !== undefined && !isAlive(pid)) {
      try {
        unlinkSync(join(this.execRoot, "containerd", "containerd.pid"));
      } catch {
        /* already gone */
      }
    }
  }

  async #firstStart(): Promise<void> {
    this.#writeConfig();
    try {
      await this.#spawnAndWait();
    } catch (err) {
      if (this.#storageDriverChosen || this.#storageDriver === "vfs") throw err;
      // overlay2 is not usable on every filesystem (e.g. overlay on overlay): fall back to vfs on a fresh data-root.
      const daemonLines = this.logTail(60).split("\n").filter((l) => !l.startsWith("--- sandgate harness"));
      if (!/driver not supported|error initializing graphdriver|overlay2?.*(not supported|failed|error)/i.test(daemonLines.join("\n"))) throw err;
      await this.stop("SIGKILL");
      spawnSync("bash", [CLEANUP_SCRIPT, "now", this.dataRoot, "-", "-", "-"], { stdio: "ignore" });
      this.#storageDriver = "vfs";
      this.#appendLog(`overlay2 failed; retrying with vfs`);
      await this.#spawnAndWait();
    }
  }

  #appendLog(line: string): void {
    const fd = openSync(this.logPath, "a");
    writeSync(fd, `--- sandgate harness ${new Date().toISOString()}: ${line}\n`);
    closeSync(fd);
  }

  #args(): string[] {
    return [
      `--data-root=${this.dataRoot}`,
      `--exec-root=${this.execRoot}`,
      `--pidfile=${this.pidfilePath}`,
      `-H`,
      this.dockerHost,
      `--config-file=${this.configPath}`,
      `--storage-driver=${this.#storageDriver}`,
      `--containerd-namespace=${this.containerdNamespace}`,
      `--containerd-plugins-namespace=${this.containerdNamespace}-plugins`,
      `--bridge=none`,
      `--iptables=false`,
      `--ip-masq=false`,
      `--ip6tables=false`,
      `--userland-proxy=false`,
      // /22s: the egress network (the one big network a gateway takes from the pool; sandbox
      // networks come from --sandbox-subnets) holds ~1,000 supervisors, 64 networks in all.
      `--default-address-pool=base=${this.addressPool},size=22`,
      ...this.#extraArgs,
    ];
  }

  async #spawnAndWait(): Promise<void> {
    this.#starts++;
    if (existsSync(SYSTEM_CONTAINERD_SOCKET)) {
      // dockerd uses a system containerd whenever its socket exists; our unique
      // namespaces then keep the daemons apart (and cleanup finds shims by namespace).
      this.#appendLog(`note: ${SYSTEM_CONTAINERD_SOCKET} exists, dockerd will use the system containerd`);
    }
    this.#dropStaleContainerdPidfile();
    this.#appendLog(`start #${this.#starts} live-restore=${this.#liveRestore} storage-driver=${this.#storageDriver}`);
    const logFd = openSync(this.logPath, "a");
    // With resolvConf: dockerd (and its containerd and shims) in a mount namespace of
    // their own where /etc/resolv.conf is that file; the host's is untouched (a slave
    // receives the host's mount events, never sends its own).
    const [cmd, args] = this.#resolvConf === undefined
      ? [findExecutable("dockerd"), this.#args()]
      : [findExecutable("unshare"), ["--mount", "--propagation", "slave", "--", "sh", "-c", 'mount --bind "$0" /etc/resolv.conf && exec "$@"', this.#resolvConf, findExecutable("dockerd"), ...this.#args()]];
    const child = spawn(cmd, args, {
      detached: true, // own process group: a terminal ^C must not reach the daemon
      stdio: ["ignore", logFd, logFd],
      env: { ...process.env, PATH: `${process.env.PATH ?? ""}:${EXTRA_PATH}` },
    });
    closeSync(logFd);
    child.unref();
    this.#child = child;
    let exitInfo: string | undefined;
    this.#exited = new Promise<void>((resolve) => {
      child.on("exit", (code, sig) => {
        exitInfo = `exited with ${sig ?? `code ${code ?? "?"}`}`;
        resolve();
      });
      child.on("error", (err) => {
        exitInfo = `failed to spawn: ${err.message}`;
        resolve();
      });
    });
    const deadline = Date.now() + this.#startTimeoutMs;
    while (Date.now() < deadline) {
      if (exitInfo !== undefined) break;
      if (await pingSocket(this.socketPath, 1000)) return;
      await delay(100);
    }
    const why = exitInfo ?? `did not answer /_ping within ${this.#startTimeoutMs} ms`;
    if (exitInfo === undefined) {
      child.kill("SIGKILL");
      await this.#exited;
    }
    throw new Error(`private dockerd ${this.name} ${why}\n--- ${this.logPath} (tail) ---\n${this.logTail()}`);
  }
}
