// TEST DOUBLE: the in-memory driver, with execs run as real processes on this host
// (busybox's applets on PATH) and the workspace /sandbox mapped to a temporary
// directory, for API and CLI tests of `sandbox cp` without Docker. The programs are
// the real ones (src/gateway/files/scripts.ts); the confinement of a real workload
// (its own user and mount namespace) is not here: that is
// test/integration/sandbox-cp.test.ts. A test can also make the "workload" answer a
// download with any bytes it likes (a hostile tar).
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { PassThrough, Readable } from "node:stream";
import type { ExecOptions, ExecSession, RuntimeRecord } from "../../src/driver/contract.js";
import { DOWNLOAD, MARKER } from "../../src/gateway/files/scripts.js";
import { MemoryDriver } from "./memory-driver.js";

const BUSYBOX = ["/bin/busybox", "/usr/bin/busybox"].find((p) => existsSync(p)) ?? "busybox";
const APPLETS = ["sh", "realpath", "stat", "tar", "mktemp", "cat", "chmod", "mv", "rm", "sleep"];

export class LocalExecDriver extends MemoryDriver {
  private readonly bin: string;
  /** Set: a download answers with these bytes (after the marker) instead of running tar. */
  hostileDownload: Buffer | ((argv: string[]) => AsyncIterable<Buffer>) | undefined;
  /** The exit code a hostile download's "tar" reports (default 0). */
  hostileExitCode = 0;
  /** Every exec's argv, mapped. */
  readonly argvs: string[][] = [];
  /**
   * Set: every argument naming /sandbox is mapped (not only the file programs' own), and
   * the exec's working directory (mapped; default /sandbox) and environment are honoured,
   * so a program's own commands run as in a sandbox (the SDK's documented example).
   */
  processOptions = false;

  /** `workspace` stands in for /sandbox; `scratch` holds the applet links. */
  constructor(
    readonly workspace: string,
    scratch: string,
  ) {
    super();
    this.bin = join(scratch, "bin");
    mkdirSync(this.bin, { recursive: true });
    mkdirSync(workspace, { recursive: true });
    for (const a of APPLETS) if (!existsSync(join(this.bin, a))) symlinkSync(BUSYBOX, join(this.bin, a));
  }

  private map(arg: string): string {
    return arg === "/sandbox" || arg.startsWith("/sandbox/") ? this.workspace + arg.slice("/sandbox".length) : arg;
  }

  override async exec(_record: RuntimeRecord, opts: ExecOptions): Promise<ExecSession> {
    this.execs++;
    this.execOptions.push(opts);
    const argv = opts.cmd.map((a, i) => (i >= 4 || this.processOptions ? this.map(a) : a));
    this.argvs.push(argv);
    if (this.hostileDownload && argv[2] === DOWNLOAD) {
      const body = this.hostileDownload;
      const stdout = Readable.from((async function* () {
        yield Buffer.from(MARKER);
        if (Buffer.isBuffer(body)) yield body;
        else yield* body(argv);
      })());
      const stderr = new PassThrough();
      stderr.end(this.hostileExitCode === 0 ? "" : "tar: ./secret: Permission denied\n");
      const code = this.hostileExitCode;
      return { stdin: new PassThrough(), stdout, stderr, resize: async () => {}, exitCode: new Promise((r) => stdout.once("end", () => r(code))), close: () => stdout.destroy() };
    }
    const own = this.processOptions ? { cwd: this.map(opts.cwd ?? "/sandbox"), env: { ...opts.env, PATH: this.bin } } : { env: { PATH: this.bin } };
    const child = spawn(join(this.bin, argv[0]!), argv.slice(1), { ...own, stdio: ["pipe", "pipe", "pipe"] });
    child.stdin.on("error", () => undefined);
    const exitCode = new Promise<number>((resolve) => child.once("close", (code, signal) => resolve(code ?? (signal ? 137 : 1))));
    return {
      stdin: child.stdin,
      stdout: child.stdout,
      stderr: child.stderr,
      resize: async () => {},
      exitCode,
      close: () => {
        this.closedExecs++;
        child.kill("SIGKILL");
      },
    };
  }
}
