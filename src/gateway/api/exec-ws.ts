// Exec and interactive sessions over WebSocket: GET /v1/sandboxes/:name/exec
// upgraded. Users never get the Docker socket; the gateway runs the exec and
// relays it.
//
// Frames, server → client: binary [1, ...stdout] or [2, ...stderr]; text
//   {"type":"exit","code":N} then close, or {"type":"error","message":...}.
// Frames, client → server: binary [0, ...stdin]; text {"type":"eof"},
//   {"type":"resize","cols":C,"rows":R} or {"type":"signal","signal":"INT"} (INT, TERM,
//   HUP, QUIT, KILL: sent to the command's process group; the exit frame follows when
//   it ends, e.g. code 130 for INT). A signal that cannot be delivered answers
//   {"type":"signal-failed","signal":S,"message":...}.
// The token check runs before this handler, in upgrades.ts (one for every upgrade route).

import type { Logger } from "pino";
import { WebSocketServer, type WebSocket } from "ws";
import { z } from "zod";
import { EXEC_SIGNALS, type ExecSession } from "../../driver/contract.js";
import { ExecQueryFull, formatZodError } from "../../api/schemas.js";
import { execOptions } from "./exec-options.js";
import { ApiError } from "../errors.js";
import { refuseUpgrade as refuse, type UpgradeRoute } from "./upgrades.js";
import { ROUTES, pathPattern } from "../../api/routes.js";
import type { ExecService } from "../sandboxes/exec-service.js";

export const STDIN = 0;
export const STDOUT = 1;
export const STDERR = 2;

const ControlFrame = z.discriminatedUnion("type", [
  z.object({ type: z.literal("eof") }),
  z.object({ type: z.literal("resize"), cols: z.number().int().min(1).max(1000), rows: z.number().int().min(1).max(1000) }),
  z.object({ type: z.literal("signal"), signal: z.enum(EXEC_SIGNALS) }),
]);

/** The path of the table's execSession (routes.ts), the sandbox captured. */
const ROUTE = pathPattern(ROUTES.execSession.path);

/** Output bytes a slow client may have outstanding before the process's output is paused. */
export const EXEC_OUTPUT_HIGH_WATER = 1 << 20;

/** The exec route's handler, for upgrades.ts's dispatcher (which checked the token). */
export function execUpgrades(ctx: { execs: Pick<ExecService, "start">; log: Logger }): UpgradeRoute {
  // maxPayload: stdin frames are relayed as they come; nothing needs more than this.
  const wss = new WebSocketServer({ noServer: true, maxPayload: 1 << 20, perMessageDeflate: false });
  const live = new Set<WebSocket>();

  return {
    pattern: ROUTE,
    async handle(req, socket, head, m) {
      const url = new URL(req.url ?? "", "http://gateway");
      const raw: Record<string, string | string[]> = {};
      for (const key of new Set(url.searchParams.keys())) {
        const all = url.searchParams.getAll(key);
        raw[key] = key === "cmd" ? all : all[0]!;
      }
      // env is the one repeated key besides cmd: every value is a KEY=VALUE pair.
      if (typeof raw.env === "string") raw.env = url.searchParams.getAll("env");
      const q = ExecQueryFull.safeParse(raw);
      if (!q.success) return refuse(socket, new ApiError("invalid_request", formatZodError(q.error)));
      const cmd = typeof q.data.cmd === "string" ? [q.data.cmd] : (q.data.cmd ?? []);
      const tty = q.data.tty === "1";
      let session: ExecSession;
      try {
        const { env, workdir, user, timeout } = q.data;
        const options = execOptions({ cmd, ...(env === undefined ? {} : { env: typeof env === "string" ? [env] : env }), ...(workdir === undefined ? {} : { workdir }), ...(user === undefined ? {} : { user }), ...(timeout === undefined ? {} : { timeout }) });
        session = await ctx.execs.start(decodeURIComponent(m[1]!), {
          ...options,
          tty,
          ...(q.data.cols && q.data.rows ? { size: { cols: q.data.cols, rows: q.data.rows } } : {}),
        });
      } catch (err) {
        if (err instanceof ApiError) return refuse(socket, err);
        ctx.log.warn({ err: (err as Error).message }, "exec failed to start");
        return refuse(socket, new ApiError("unavailable", `exec failed: ${(err as Error).message}`));
      }
      if (socket.destroyed) {
        session.close();
        return;
      }
      wss.handleUpgrade(req, socket, head, (ws) => {
        live.add(ws);
        relay(ws, session, ctx.log);
        ws.on("close", () => live.delete(ws));
      });
    },
    close() {
      for (const ws of live) ws.terminate();
      wss.close();
    },
  };
}

/**
 * Relays one exec session over one WebSocket, with backpressure both ways: output
 * waits while the client has EXEC_OUTPUT_HIGH_WATER bytes outstanding (so a slow
 * reader slows the process, not the gateway's memory), and stdin frames are not
 * read while the process's stdin is full. Any error of either side ends both.
 */
function relay(ws: WebSocket, session: ExecSession, log: Logger): void {
  let outstanding = 0;
  const sources = [session.stdout, session.stderr];
  const send = (channel: number, source: NodeJS.ReadableStream) => (chunk: Buffer) => {
    if (ws.readyState !== ws.OPEN) return;
    const frame = Buffer.concat([Buffer.of(channel), chunk]);
    outstanding += frame.length;
    if (outstanding > EXEC_OUTPUT_HIGH_WATER) source.pause();
    ws.send(frame, () => {
      outstanding -= frame.length;
      if (outstanding <= EXEC_OUTPUT_HIGH_WATER / 2) for (const s of sources) if (s.isPaused()) s.resume();
    });
  };
  session.stdout.on("data", send(STDOUT, session.stdout));
  session.stderr.on("data", send(STDERR, session.stderr));
  session.stdin.on("error", () => undefined); // a process that exits before reading all stdin
  // Reading frames resumes when stdin drains — and when it can take nothing more: an ended
  // Writable never emits 'drain', and a socket left paused cannot read the client's close
  // frame (the client then waited out ws's 30 s close timeout after every large stdin).
  const resume = (): void => {
    if (ws.isPaused) ws.resume();
  };
  session.stdin.on("drain", resume);
  session.stdin.on("finish", resume);
  session.stdin.on("close", resume);
  const ended = (s: NodeJS.ReadableStream): Promise<void> =>
    new Promise((resolve) => {
      s.once("end", () => resolve());
      s.once("close", () => resolve());
      s.once("error", () => resolve());
    });
  const drained = Promise.all([ended(session.stdout), ended(session.stderr)]);

  ws.on("error", (err) => {
    log.debug({ err: err.message }, "exec websocket error; closing the session");
    session.close();
    ws.terminate();
  });
  ws.on("message", (data: Buffer, isBinary: boolean) => {
    if (isBinary) {
      if (data[0] === STDIN && !session.stdin.writableEnded && !session.stdin.destroyed) {
        if (!session.stdin.write(data.subarray(1))) ws.pause();
      }
      return;
    }
    let parsed: z.infer<typeof ControlFrame>;
    try {
      parsed = ControlFrame.parse(JSON.parse(data.toString()));
    } catch {
      ws.send(JSON.stringify({ type: "error", message: "bad control frame" }));
      return;
    }
    if (parsed.type === "eof") {
      session.stdin.end();
      resume(); // later stdin frames are dropped; control frames and the close must still be read
    } else if (parsed.type === "signal") {
      const sig = parsed.signal;
      const failed = (why: string): void => {
        if (ws.readyState === ws.OPEN) ws.send(JSON.stringify({ type: "signal-failed", signal: sig, message: why }));
      };
      if (!session.signal) failed("this runtime cannot signal an exec's command");
      else session.signal(sig).catch((err: unknown) => failed((err as Error).message));
    } else session.resize(parsed.cols, parsed.rows).catch((err: unknown) => log.debug({ err }, "resize failed"));
  });
  ws.on("close", () => session.close());

  session.exitCode.then(
    async (code) => {
      // Every byte of output goes out before the exit code.
      await drained;
      resume();
      if (ws.readyState === ws.OPEN) {
        ws.send(JSON.stringify({ type: "exit", code }));
        ws.close(1000);
      }
    },
    (err: unknown) => {
      if (ws.readyState === ws.OPEN) {
        ws.send(JSON.stringify({ type: "error", message: (err as Error).message }));
        ws.close(1011);
      }
    },
  );
}
