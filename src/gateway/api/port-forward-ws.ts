// Port forwarding over WebSocket: GET /v1/sandboxes/:name/port-forward?port=N upgraded,
// one WebSocket per forwarded TCP connection. The gateway runs the relay of
// port-forward-relay.ts in the workload (an exec by container id) and copies bytes;
// nothing new is routed, and users never get the Docker socket.
//
// The upgrade is answered only once the relay has connected to 127.0.0.1:N inside the
// workload, so "nothing listens there" and "the image has no node" are plain HTTP errors
// (ApiError JSON) before any byte flows.
// Frames, both ways: binary = the connection's bytes. Client → server text {"type":"eof"}:
// the client's side is done sending (half-close). Server → client: close 1000 when the
// workload's side closed; {"type":"error","message":...} then close 1011 otherwise.
// The token check runs before this handler, in upgrades.ts (one for every upgrade route).

import type { Logger } from "pino";
import { WebSocketServer, type WebSocket } from "ws";
import type { ExecSession } from "../../driver/contract.js";
import { DEFAULT_SETTINGS } from "../settings.js";
import { ApiError } from "../errors.js";
import { refuseUpgrade as refuse, type UpgradeRoute } from "./upgrades.js";
import { ROUTES, pathPattern } from "../../api/routes.js";
import type { ExecService } from "../sandboxes/exec-service.js";
import type { SandboxReadModel } from "../sandboxes/read-model.js";
import { EXEC_NOT_STARTED, RELAY_BINARY, RELAY_CONNECTED, RELAY_FAILED, parsePortQuery, relayCommand } from "./port-forward-relay.js";

/** The path of the table's portForward (routes.ts), the sandbox captured. */
const PORT_FORWARD_ROUTE = pathPattern(ROUTES.portForward.path);

export interface PortForwardLimits {
  /** Forwarded connections open at once into one sandbox; past it a new one is refused (503). Default: SANDGATE_PORT_FORWARD_MAX_PER_SANDBOX's. */
  maxPerSandbox: number;
  /** Forwarded connections open at once through this gateway; past it a new one is refused (503). Default: SANDGATE_PORT_FORWARD_MAX's. */
  maxTotal: number;
  /**
   * Bytes of one connection in flight inside the gateway in each direction: output is
   * paused while the client has this much unsent, input frames are not read while the
   * relay's stdin is full, and no frame may be larger. Default 1 MiB.
   */
  bufferBytes: number;
  /** How long the relay may take to start and connect before the connection is refused. Default 60 s. */
  connectTimeoutMs: number;
}

/** maxPerSandbox and maxTotal are settings (SANDGATE_PORT_FORWARD_*: ../settings.ts). */
export const DEFAULT_PORT_FORWARD_LIMITS: PortForwardLimits = { maxPerSandbox: DEFAULT_SETTINGS.portForwardMaxPerSandbox, maxTotal: DEFAULT_SETTINGS.portForwardMax, bufferBytes: 1 << 20, connectTimeoutMs: 60_000 };

/** Bytes of the relay's stderr and of pre-handshake output kept for error messages. */
const DIAGNOSTIC_BYTES = 4096;

export interface PortForwardStats {
  open: number;
  refusedAtLimit: number;
}

/** The port-forward route's handler, for upgrades.ts's dispatcher (which checked the token). */
export function portForwardUpgrades(ctx: {
  execs: Pick<ExecService, "start">;
  read: Pick<SandboxReadModel, "driven" | "find">;
  log: Logger;
  limits?: Partial<PortForwardLimits>;
}): UpgradeRoute & { stats(): PortForwardStats } {
  const limits: PortForwardLimits = { ...DEFAULT_PORT_FORWARD_LIMITS, ...ctx.limits };
  const wss = new WebSocketServer({ noServer: true, maxPayload: limits.bufferBytes, perMessageDeflate: false });
  const live = new Set<WebSocket>();
  const sessions = new Set<ExecSession>();
  /** Open (and starting) connections per sandbox id: a slot is taken before the exec starts. */
  const perSandbox = new Map<string, number>();
  let total = 0;
  let refusedAtLimit = 0;
  let closed = false;

  const release = (id: string): void => {
    total--;
    const n = (perSandbox.get(id) ?? 1) - 1;
    if (n <= 0) perSandbox.delete(id);
    else perSandbox.set(id, n);
  };

  return {
    pattern: PORT_FORWARD_ROUTE,
    async handle(req, socket, head, m) {
      const url = new URL(req.url ?? "", "http://gateway");
      const p = parsePortQuery(url.searchParams.get("port"));
      if ("error" in p) return refuse(socket, new ApiError("invalid_request", p.error));
      let name: string;
      let id: string;
      try {
        const s = await ctx.read.driven(decodeURIComponent(m[1]!));
        ({ name, id } = s);
      } catch (err) {
        if (err instanceof ApiError) return refuse(socket, err);
        return refuse(socket, new ApiError("invalid_request", `bad sandbox name in ${req.url ?? ""}`));
      }
      if (closed) return refuse(socket, new ApiError("unavailable", "the gateway is shutting down"));
      const mine = perSandbox.get(id) ?? 0;
      if (mine >= limits.maxPerSandbox || total >= limits.maxTotal) {
        refusedAtLimit++;
        const which = mine >= limits.maxPerSandbox
          ? `sandbox "${name}" has ${mine} forwarded connections open, the most allowed (SANDGATE_PORT_FORWARD_MAX_PER_SANDBOX=${limits.maxPerSandbox})`
          : `the gateway has ${total} forwarded connections open, the most allowed (SANDGATE_PORT_FORWARD_MAX=${limits.maxTotal})`;
        return refuse(socket, new ApiError("unavailable", `${which}; close one and retry`));
      }
      perSandbox.set(id, mine + 1);
      total++;
      let session: ExecSession | undefined;
      try {
        // Through the exec service: an open forwarded connection is a session --idle-stop waits for.
        session = await ctx.execs.start(id, { cmd: relayCommand(p.port), tty: false });
        sessions.add(session);
        const failure = await handshake(session, p.port, name, limits.connectTimeoutMs);
        if (failure) throw failure;
      } catch (err) {
        if (session) {
          session.close();
          sessions.delete(session);
        }
        release(id);
        if (err instanceof ApiError) return refuse(socket, err);
        ctx.log.warn({ err: (err as Error).message, sandbox: name }, "port-forward relay failed to start");
        return refuse(socket, new ApiError("unavailable", `port-forward failed: ${(err as Error).message}`));
      }
      const s = session;
      if (socket.destroyed || closed) {
        s.close();
        sessions.delete(s);
        release(id);
        return;
      }
      wss.handleUpgrade(req, socket, head, (ws) => {
        live.add(ws);
        let released = false;
        const done = (): void => {
          if (released) return;
          released = true;
          live.delete(ws);
          sessions.delete(s);
          release(id);
        };
        ws.on("close", done);
        relay(ws, s, limits.bufferBytes, ctx.log, async () => {
          if (closed) return "the gateway is shutting down";
          const now = await ctx.read.find(id);
          return now?.phase === "Ready" ? null : `sandbox "${name}" is ${now ? now.phase : "deleted"}`;
        });
      });
    },
    close() {
      closed = true;
      for (const ws of live) ws.terminate();
      for (const s of sessions) s.close();
      wss.close();
    },
    stats: () => ({ open: total, refusedAtLimit }),
  };
}

/**
 * Waits for the relay's verdict on stderr. Null once it has connected; else the
 * ApiError that says why (nothing listening, no relay binary in the image, no answer).
 */
function handshake(session: ExecSession, port: number, name: string, timeoutMs: number): Promise<ApiError | null> {
  return new Promise((resolve) => {
    let err = "";
    let out = "";
    let settled = false;
    const settle = (v: ApiError | null): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      session.stderr.off("data", onErr);
      session.stdout.off("data", onOut);
      session.stdout.pause();
      resolve(v);
    };
    const onErr = (b: Buffer): void => {
      err = (err + b.toString()).slice(0, DIAGNOSTIC_BYTES);
      if (err.includes(RELAY_CONNECTED)) settle(null);
      const failed = err.indexOf(RELAY_FAILED);
      if (failed >= 0 && err.indexOf("\n", failed) > 0) {
        const code = err.slice(failed + RELAY_FAILED.length, err.indexOf("\n", failed)).trim();
        const what = code === "ECONNREFUSED" ? "nothing is listening there" : code;
        settle(new ApiError("unavailable", `cannot connect to 127.0.0.1:${port} inside sandbox "${name}": ${what} (${code})`));
      }
    };
    // Before the handshake the relay writes nothing to stdout; Docker writes its own
    // error there when the binary cannot be started.
    const onOut = (b: Buffer): void => {
      out = (out + b.toString()).slice(0, DIAGNOSTIC_BYTES);
    };
    session.stderr.on("data", onErr);
    session.stdout.on("data", onOut);
    const timer = setTimeout(
      () => settle(new ApiError("unavailable", `the relay in sandbox "${name}" did not connect to 127.0.0.1:${port} within ${Math.round(timeoutMs / 1000)} s`)),
      timeoutMs,
    );
    session.exitCode.then(
      (code) => {
        const said = `${out}${err}`.trim().replace(/\s+/g, " ").slice(0, 300);
        if (EXEC_NOT_STARTED.has(code) || /executable file not found|no such file or directory/i.test(said)) {
          settle(
            new ApiError(
              "unavailable",
              `the workload image of sandbox "${name}" has no "${RELAY_BINARY}" on its PATH: port-forward runs ${RELAY_BINARY} inside the workload to reach 127.0.0.1:${port}${said ? ` (${said})` : ""}`,
            ),
          );
        } else settle(new ApiError("unavailable", `the relay in sandbox "${name}" exited ${code} before connecting${said ? `: ${said}` : ""}`));
      },
      (e: unknown) => settle(new ApiError("unavailable", `the relay in sandbox "${name}" failed: ${(e as Error).message}`)),
    );
  });
}

/**
 * Copies one connection both ways with bounded buffers: output waits while the client
 * has `high` bytes unsent (the exec's socket then stops, see exec-session.ts), and
 * frames are not read while the relay's stdin is full. The close says how it ended.
 */
function relay(ws: WebSocket, session: ExecSession, high: number, log: Logger, whyGone: () => Promise<string | null>): void {
  let outstanding = 0;
  let stderr = "";
  session.stderr.on("data", (b: Buffer) => {
    stderr = (stderr + b.toString()).slice(-DIAGNOSTIC_BYTES);
  });
  session.stdout.on("data", (chunk: Buffer) => {
    if (ws.readyState !== ws.OPEN) return;
    outstanding += chunk.length;
    if (outstanding > high) session.stdout.pause();
    ws.send(chunk, { binary: true }, () => {
      outstanding -= chunk.length;
      if (outstanding <= high / 2 && session.stdout.isPaused()) session.stdout.resume();
    });
  });
  session.stdout.resume();
  session.stdin.on("error", () => undefined); // the relay exited before reading all input
  const resumeFrames = (): void => {
    if (ws.isPaused) ws.resume();
  };
  session.stdin.on("drain", resumeFrames);
  session.stdin.on("finish", resumeFrames);
  session.stdin.on("close", resumeFrames);
  const ended = new Promise<void>((resolve) => {
    session.stdout.once("end", resolve).once("close", resolve).once("error", () => resolve());
  });

  ws.on("error", (err) => {
    log.debug({ err: err.message }, "port-forward websocket error; closing the relay");
    session.close();
    ws.terminate();
  });
  ws.on("message", (data: Buffer, isBinary: boolean) => {
    if (isBinary) {
      if (!session.stdin.writableEnded && !session.stdin.destroyed && !session.stdin.write(data)) ws.pause();
      return;
    }
    let eof = false;
    try {
      eof = (JSON.parse(data.toString()) as { type?: unknown }).type === "eof";
    } catch {
      // not JSON: refused below
    }
    if (!eof) {
      ws.send(JSON.stringify({ type: "error", message: 'bad control frame: only {"type":"eof"} is accepted' }));
      return;
    }
    session.stdin.end();
    resumeFrames();
  });
  ws.on("close", () => session.close());

  const fail = (message: string): void => {
    if (ws.readyState !== ws.OPEN) return;
    ws.send(JSON.stringify({ type: "error", message }));
    ws.close(1011);
  };
  session.exitCode.then(
    async (code) => {
      await ended; // every byte goes out before the close
      const gone = await whyGone();
      if (gone) return fail(`${gone}: the forwarded connection was closed`);
      if (code === 0) {
        if (ws.readyState === ws.OPEN) ws.close(1000);
        return;
      }
      const said = stderr.trim().replace(/\s+/g, " ").slice(0, 300);
      fail(`the relay exited ${code}${said ? `: ${said}` : ""}`);
    },
    async (err: unknown) => {
      const gone = await whyGone();
      fail(gone ? `${gone}: the forwarded connection was closed` : `the relay failed: ${(err as Error).message}`);
    },
  );
}
