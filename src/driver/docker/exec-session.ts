// An exec in a container as an ExecSession: stdin in, stdout and stderr out
// (demultiplexed unless tty), and the exit code once the output is drained.

import { PassThrough, Writable } from "node:stream";
import type { ExecOptions, ExecSession } from "../compute-driver.js";
import { describe, type EngineClient } from "./engine.js";
import { createDemuxer } from "./engine-demux.js";

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
    const demux = createDemuxer(
      (b) => stdout.write(b),
      (b) => stderr.write(b),
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

  const drained = new Promise<void>((resolve) => {
    let open = 2;
    const done = (): void => {
      if (--open === 0) resolve();
    };
    stdout.on("end", done).on("error", done).on("close", done);
    stderr.on("end", done).on("error", done).on("close", done);
    socket.once("close", () => {
      open = 1;
      done();
    });
  });

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
