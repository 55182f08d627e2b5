// TEST DOUBLE: the memory driver whose exec runs the command as a real child process on
// this host (no Docker): port-forward's relay (`node -e SCRIPT`) then really connects to
// 127.0.0.1:PORT, here the host's loopback standing in for the workload's. Other commands
// keep the memory driver's behaviour. `missingRelay` makes the relay binary "not found"
// the way Docker reports it (exit 127 and its message on stdout).

import { spawn } from "node:child_process";
import { PassThrough } from "node:stream";
import type { ExecOptions, ExecSession, RuntimeRecord } from "../../src/driver/contract.js";
import { MemoryDriver } from "./memory-driver.js";

export class LocalRelayDriver extends MemoryDriver {
  missingRelay = false;
  /** Relay processes started and still running (leak checks). */
  readonly relays = new Set<number>();
  readonly #children = new Set<ReturnType<typeof spawn>>();

  /** As Docker removing the container: its exec processes die with it. */
  override async stop(sandboxId: string, generation: number): Promise<void> {
    for (const c of this.#children) c.kill("SIGKILL");
    return super.stop(sandboxId, generation);
  }

  override async exec(record: RuntimeRecord, opts: ExecOptions): Promise<ExecSession> {
    if (opts.cmd[0] !== "node") return super.exec(record, opts);
    if (this.missingRelay) {
      const stdout = new PassThrough();
      const stderr = new PassThrough();
      stdout.end('OCI runtime exec failed: exec failed: unable to start container process: exec: "node": executable file not found in $PATH: unknown\r\n');
      stderr.end();
      return { stdin: new PassThrough(), stdout, stderr, resize: async () => {}, exitCode: Promise.resolve(127), close: () => undefined };
    }
    const child = spawn(process.execPath, opts.cmd.slice(1), { stdio: ["pipe", "pipe", "pipe"] });
    const pid = child.pid ?? -1;
    this.relays.add(pid);
    this.#children.add(child);
    const exitCode = new Promise<number>((resolve) => child.once("close", (code) => {
      this.relays.delete(pid);
      this.#children.delete(child);
      resolve(code ?? 137);
    }));
    return {
      stdin: child.stdin,
      stdout: child.stdout,
      stderr: child.stderr,
      resize: async () => {},
      exitCode,
      // As Docker's: the streams go, the process sees its stdin end and stdout break.
      close: () => {
        child.stdin.destroy();
        child.stdout.destroy();
        child.stderr.destroy();
      },
    };
  }
}
