// An exec in a container as an ExecSession: stdin in, stdout and stderr out
// (demultiplexed unless tty), and the exit code once the output is drained.

import { PassThrough, Writable } from "node:stream";
import type { ExecOptions, ExecSession, ExecSignal } from "../contract.js";
import type { EngineClient } from "./engine/client.js";
import { describe } from "./engine/result.js";
import { createDemuxer } from "./engine/demux.js";
import { StartFailureWatch, type StartFailure } from "./exec-start-failure.js";
import { hostProc, identifyExecProcess, signalExecProcess, type ExecProcess, type ProcReader } from "./exec-signal.js";
import { setTimeout as sleep } from "node:timers/promises";
import { SandgateError } from "../../util/errors.js";

export class ExecError extends SandgateError {
  override readonly name = "ExecError";
  constructor(message: string, options?: ErrorOptions) {
    super(message, "exec_failed", options);
  }
}

/**
 * `workloadPid` is the host pid of the container's init: signals go only to a process in
 * its pid namespace (exec-signal.ts).
 */
export async function startExec(engine: EngineClient, containerId: string, opts: ExecOptions, workloadPid?: number, proc: ProcReader = hostProc): Promise<ExecSession> {
  const created = await engine.execCreate(containerId, {
    Cmd: opts.cmd,
    Tty: opts.tty,
    AttachStdin: true,
    AttachStdout: true,
    AttachStderr: true,
    Env: opts.env ? Object.entries(opts.env).map(([k, v]) => `${k}=${v}`) : undefined,
    WorkingDir: opts.cwd,
    User: opts.user,
  });
  if (created.kind !== "ok") throw new ExecError(`exec create failed: ${describe(created)}`);
  const execId = created.body.Id;
  const started = await engine.execStart(execId, { tty: opts.tty });
  if (started.kind !== "ok") throw new ExecError(`exec start failed: ${describe(started)}`);
  const socket = started.body;

  const stdout = new PassThrough();
  const stderr = new PassThrough();
  // Docker's own line for a command that never started comes first on stdout: held until it
  // is clear that it is not that, and said as a shell would (exec-start-failure.ts).
  const head = new StartFailureWatch((b) => stdout.write(b));
  let notStarted: StartFailure | null = null;
  if (opts.tty) {
    stderr.end();
    if (opts.size) void engine.execResize(execId, opts.size.rows, opts.size.cols);
  }
  const demux = opts.tty
    ? { push: (b: Buffer) => head.push(b), end: () => undefined }
    : createDemuxer(
        (b) => head.push(b),
        (b) => {
          head.release(); // a command that writes is a command that started
          stderr.write(b);
        },
      );
  // Backpressure: a reader that stops reading stops the exec's socket, so Docker's
  // output waits in the kernel, not in these PassThroughs.
  const full = (): boolean => stdout.writableNeedDrain || stderr.writableNeedDrain;
  const resume = (): void => {
    if (!full()) socket.resume();
  };
  stdout.on("drain", resume);
  stderr.on("drain", resume);
  socket.on("data", (chunk: Buffer) => {
    demux.push(chunk);
    if (full()) socket.pause();
  });
  socket.on("end", () => {
    demux.end();
    notStarted = head.end(opts.cmd[0] ?? "");
    // A terminal has one stream, in raw mode: the line goes there, ended as a terminal's.
    if (notStarted && opts.tty) stdout.write(notStarted.line.replace(/\n$/, "\r\n"));
    else if (notStarted) stderr.write(notStarted.line);
    stdout.end();
    if (!opts.tty) stderr.end();
  });
  socket.on("error", (err) => {
    stdout.destroy(err);
    stderr.destroy(err);
  });

  // Half-close on end(): Docker passes EOF on to the process's stdin.
  const stdin = new Writable({
    write(chunk: Buffer, _enc, cb) {
      socket.write(chunk, cb);
    },
    final(cb) {
      socket.end();
      cb();
    },
  });

  // Each stream counts once, whichever of end/error/close it emits first (a
  // PassThrough emits both 'end' and 'close'; counting both let a tty session's
  // already-ended stderr alone settle this while the process was still running).
  const finished = (s: PassThrough): Promise<void> =>
    new Promise<void>((resolve) => {
      s.once("end", resolve).once("error", () => resolve()).once("close", resolve);
    });
  const drained = Promise.race([
    Promise.all([finished(stdout), finished(stderr)]).then(() => undefined),
    new Promise<void>((resolve) => socket.once("close", () => resolve())),
  ]);

  const exitCode = drained.then(async () => {
    // The output ends slightly before Docker records the exit code.
    for (let i = 0; i < 100; i++) {
      const r = await engine.execInspect(execId);
      if (r.kind !== "ok") throw new ExecError(`exec inspect failed: ${describe(r)}`);
      // A command that never started exits as a shell says (127 not found, 126 not runnable), whatever the daemon's version recorded.
      if (!r.body.Running && r.body.ExitCode !== null) return notStarted?.exitCode ?? r.body.ExitCode;
      await sleep(20);
    }
    throw new ExecError("exec did not report an exit code");
  });
  // A caller that never awaits exitCode must not cause an unhandled rejection.
  exitCode.catch(() => undefined);

  // Identified at the first signal (an inspect per exec only for the few that get one).
  /** How many 50 ms looks for the daemon to mark a started exec running (10 s). */
  const START_WAIT_TRIES = 200;
  let identified: ExecProcess | undefined;
  const signal = async (sig: ExecSignal): Promise<"sent" | "gone"> => {
    if (identified === undefined) {
      if (workloadPid === undefined) throw new ExecError("cannot signal the command: the workload's pid is not known");
      // Under load the daemon may not yet have marked a started exec running, nor recorded its
      // pid (it marks it running before containerd starts it, and the pid after: its output can
      // arrive in between): either is "not yet", waited for; only an exit is gone.
      const notYet = (b: { Running: boolean; Pid?: number; ExitCode: number | null }): boolean => (b.Running ? !b.Pid : b.ExitCode === null);
      let r = await engine.execInspect(execId);
      for (let i = 0; i < START_WAIT_TRIES && r.kind === "ok" && notYet(r.body); i++) {
        await sleep(50);
        r = await engine.execInspect(execId);
      }
      if (r.kind !== "ok") throw new ExecError(`cannot signal the command: exec inspect failed: ${describe(r)}`);
      if (notYet(r.body)) throw new ExecError("cannot signal the command: the daemon has not started it yet");
      if (!r.body.Running || !r.body.Pid) return "gone";
      const id = identifyExecProcess(r.body.Pid, workloadPid, proc);
      if (!id.ok) {
        if (id.gone) return "gone";
        throw new ExecError(`cannot signal the command: ${id.why}`);
      }
      identified = id.process;
    }
    return signalExecProcess(identified, sig, proc);
  };

  return {
    stdin,
    stdout,
    stderr,
    exitCode,
    signal,
    resize: async (cols, rows) => {
      const r = await engine.execResize(execId, rows, cols);
      if (r.kind !== "ok") throw new ExecError(`resize failed: ${describe(r)}`);
    },
    close: () => socket.destroy(),
  };
}
