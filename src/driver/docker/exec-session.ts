// An exec in a container as an ExecSession: stdin in, stdout and stderr out
// (demultiplexed unless tty), and the exit code once the output is drained.

import { PassThrough, Writable } from "node:stream";
import type { ExecOptions, ExecSession } from "../contract.js";
import type { EngineClient } from "./engine/client.js";
import { describe } from "./engine/result.js";
import { createDemuxer } from "./engine/demux.js";

export class ExecError extends Error {
  override readonly name = "ExecError";
}

export async function startExec(engine: EngineClient, containerId: string, opts: ExecOptions): Promise<ExecSession> {
  const created = await engine.execCreate(containerId, {
    Cmd: opts.cmd,
    Tty: opts.tty,
    AttachStdin: true,
    AttachStdout: true,
    AttachStderr: true,
    Env: opts.env ? Object.entries(opts.env).map(([k, v]) => `${k}=${v}`) : undefined,
    WorkingDir: opts.cwd,
  });
  if (created.kind !== "ok") throw new ExecError(`exec create failed: ${describe(created)}`);
  const execId = created.body.Id;
  const started = await engine.execStart(execId, { tty: opts.tty });
  if (started.kind !== "ok") throw new ExecError(`exec start failed: ${describe(started)}`);
  const socket = started.body;

  const stdout = new PassThrough();
  const stderr = new PassThrough();
  if (opts.tty) {
    socket.pipe(stdout);
    stderr.end();
    if (opts.size) void engine.execResize(execId, opts.size.rows, opts.size.cols);
  } else {
    // Backpressure: a full stdout or stderr pauses the socket (and so the process),
    // instead of buffering a fast producer's output without bound.
    const flow = (): void => {
      if (!stdout.writableNeedDrain && !stderr.writableNeedDrain) socket.resume();
    };
    stdout.on("drain", flow);
    stderr.on("drain", flow);
    const demux = createDemuxer(
      (b) => {
        if (!stdout.write(b)) socket.pause();
      },
      (b) => {
        if (!stderr.write(b)) socket.pause();
      },
    );
    socket.on("data", (chunk: Buffer) => demux.push(chunk));
    socket.on("end", () => {
      demux.end();
      stdout.end();
      stderr.end();
    });
  }
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
      if (!r.body.Running && r.body.ExitCode !== null) return r.body.ExitCode;
      await new Promise((res) => setTimeout(res, 20));
    }
    throw new ExecError("exec did not report an exit code");
  });
  // A caller that never awaits exitCode must not cause an unhandled rejection.
  exitCode.catch(() => undefined);

  return {
    stdin,
    stdout,
    stderr,
    exitCode,
    resize: async (cols, rows) => {
      const r = await engine.execResize(execId, rows, cols);
      if (r.kind !== "ok") throw new ExecError(`resize failed: ${describe(r)}`);
    },
    close: () => socket.destroy(),
  };
}
