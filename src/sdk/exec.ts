// A command in a sandbox over the gateway's exec WebSocket (GET /v1/sandboxes/:name/exec;
// frames: src/gateway/api/exec-ws.ts). ExecSession is the whole protocol (the CLI's
// `exec` and `connect` drive one); `exec()` is the SDK's call: input in, output to
// callbacks as it comes, the command's exit code out.
//
// Bounds: output is never held beyond what the socket has already read; a callback
// that returns a promise pauses the socket until it settles (the gateway then pauses
// the command's output). Input is sent in frames of STDIN_FRAME_BYTES, and at most
// STDIN_HIGH_WATER bytes of it wait in our socket before `write` waits.

import WebSocket from "ws";
import { checkExecEnv, checkWorkdir } from "../lifecycle/process-input.js";
import { SandgateError } from "./errors.js";
import type { Transport } from "./transport.js";

export const EXEC_SIGNALS = ["INT", "TERM", "HUP", "QUIT", "KILL"] as const;
export type ExecSignal = (typeof EXEC_SIGNALS)[number];
export const SIGNAL_NUMBERS: Readonly<Record<ExecSignal, number>> = { HUP: 1, INT: 2, QUIT: 3, KILL: 9, TERM: 15 };

const STDIN = 0;
const STDOUT = 1;
const STDERR = 2;
/** The largest stdin frame sent (the gateway takes frames up to 1 MiB). */
export const STDIN_FRAME_BYTES = 64 * 1024;
/** Stdin bytes sent but not yet written to the socket before `write` waits. */
export const STDIN_HIGH_WATER = 1024 * 1024;
/** The most of a refusal's body read. */
const REFUSAL_MAX_BYTES = 64 * 1024;

export interface ExecRequest {
  cmd: string[];
  env?: Record<string, string>;
  /** The working directory, absolute (default: the sandbox's). */
  cwd?: string;
  /** The workload's own user only, as uid or uid:gid. */
  user?: string;
  /** SIGTERM after this long, SIGKILL 5 s later, exit code 124: seconds, or "30s", "10m". */
  timeout?: number | string;
  tty?: boolean;
  size?: { cols: number; rows: number };
}

export interface SessionHandlers {
  /** The session is open: input, signals and resizes may be sent. */
  onOpen?: () => void;
  /**
   * Output as it comes; a returned promise (any thenable) holds the next until it settles,
   * any other return value is ignored (`(c) => process.stdout.write(c)`'s boolean, say).
   */
  onStdout?: (chunk: Buffer) => unknown;
  onStderr?: (chunk: Buffer) => unknown;
  /** An error the gateway reported during the session (it ends without an exit code). */
  onError?: (message: string) => void;
  /** A signal the gateway could not deliver to the command. */
  onSignalFailed?: (signal: string, message: string) => void;
}

/** The query of the exec WebSocket for a request. */
export function execQuery(r: ExecRequest): URLSearchParams {
  const q = new URLSearchParams();
  for (const c of r.cmd) q.append("cmd", c);
  q.set("tty", r.tty ? "1" : "0");
  for (const [k, v] of Object.entries(r.env ?? {})) q.append("env", `${k}=${v}`);
  if (r.cwd !== undefined) q.set("workdir", r.cwd);
  if (r.user !== undefined) q.set("user", r.user);
  if (r.timeout !== undefined) q.set("timeout", String(r.timeout));
  if (r.size) {
    q.set("cols", String(r.size.cols));
    q.set("rows", String(r.size.rows));
  }
  return q;
}

const isThenable = (v: unknown): v is PromiseLike<unknown> => typeof (v as { then?: unknown } | null)?.then === "function";

/** One command's session. `exit` settles once: its exit code, or why there is none. */
export class ExecSession {
  readonly exit: Promise<number>;
  readonly #ws: WebSocket;
  readonly #h: SessionHandlers;
  #resolve!: (code: number) => void;
  #reject!: (err: unknown) => void;
  #settled = false;
  #code: number | undefined;
  /** Deliveries and notices waiting behind a handler's promise, and the chain that runs them in order. */
  #pending = 0;
  #chain: Promise<void> = Promise.resolve();
  #outstanding = 0;
  #waiters: (() => void)[] = [];

  constructor(t: Transport, sandbox: string, req: ExecRequest, handlers: SessionHandlers = {}) {
    this.#h = handlers;
    this.exit = new Promise<number>((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
    // A caller that awaits only `exit` later must not see an unhandled rejection meanwhile.
    this.exit.catch(() => undefined);
    // A gateway (or Docker behind it) that never answers the upgrade must not hold the
    // caller for good: the handshake has the request deadline.
    this.#ws = t.webSocket(`/v1/sandboxes/${encodeURIComponent(sandbox)}/exec?${execQuery(req).toString()}`, { perMessageDeflate: false, handshakeTimeout: t.timeoutMs });
    const ws = this.#ws;

    ws.on("unexpected-response", (request, res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on("data", (b: Buffer) => {
        if (size < REFUSAL_MAX_BYTES) chunks.push(b);
        size += b.length;
      });
      res.on("end", () => {
        const body = Buffer.concat(chunks).toString();
        let err: SandgateError;
        try {
          const e = (JSON.parse(body) as { error: { code: string; message: string } }).error;
          if (typeof e.message !== "string") throw new Error("no message");
          err = t.apiError(res.statusCode ?? 0, { error: e }, e.message);
        } catch {
          const text = body.trim().slice(0, 200);
          err = new SandgateError(`exec refused with HTTP ${res.statusCode ?? "?"} ${res.statusMessage ?? ""}${text ? `: ${text}` : " (no explanation)"}`, "bad_response");
        }
        this.#settle({ error: err });
        request.destroy();
      });
    });
    ws.on("error", (err: Error & { code?: string }) => {
      this.#inOrder(() => this.#settle({ error: t.connectionError(err, () => new SandgateError(`exec connection failed: ${err.message}`, "connection_lost")) }));
    });
    ws.on("open", () => this.#h.onOpen?.());
    ws.on("message", (data: Buffer, isBinary: boolean) => {
      if (isBinary) {
        const handler = data[0] === STDOUT ? this.#h.onStdout : data[0] === STDERR ? this.#h.onStderr : undefined;
        if (handler) this.#inOrder(() => handler(data.subarray(1)));
        return;
      }
      let msg: { type?: string; code?: number; message?: string; signal?: string };
      try {
        msg = JSON.parse(data.toString()) as typeof msg;
      } catch {
        return this.fail(new SandgateError("the gateway sent an exec frame that is not JSON", "bad_response"));
      }
      if (msg.type === "exit" && typeof msg.code === "number") this.#code = msg.code;
      else if (msg.type === "error") this.#inOrder(() => this.#h.onError?.(msg.message ?? "exec error"));
      else if (msg.type === "signal-failed") this.#inOrder(() => this.#h.onSignalFailed?.(msg.signal ?? "?", msg.message ?? "unknown error"));
    });
    ws.on("close", () => {
      this.#wake();
      this.#inOrder(() => {
        if (this.#code !== undefined) this.#settle({ code: this.#code });
        else this.#settle({ error: new SandgateError("the exec session ended without an exit code (gateway or sandbox went away)", "connection_lost") });
      });
    });
  }

  /** Open: input, signals and resizes go to the command. */
  get isOpen(): boolean {
    return this.#ws.readyState === WebSocket.OPEN;
  }

  /**
   * Sends input; resolves when it may be sent more (backpressure). Input given after the
   * session closed is dropped.
   */
  async write(data: Uint8Array): Promise<void> {
    for (let off = 0; off < data.length; off += STDIN_FRAME_BYTES) {
      if (!this.isOpen) return;
      const frame = Buffer.concat([Buffer.of(STDIN), data.subarray(off, off + STDIN_FRAME_BYTES)]);
      this.#outstanding += frame.length;
      this.#ws.send(frame, () => {
        this.#outstanding -= frame.length;
        if (this.#outstanding <= STDIN_HIGH_WATER / 2) this.#wake();
      });
      if (this.#outstanding > STDIN_HIGH_WATER) await new Promise<void>((r) => this.#waiters.push(r));
    }
  }

  /** The end of input. */
  end(): void {
    this.#control({ type: "eof" });
  }

  /** Sends a signal to the command's process group; false when the session is not open. */
  signal(sig: ExecSignal): boolean {
    return this.#control({ type: "signal", signal: sig });
  }

  resize(cols: number, rows: number): void {
    this.#control({ type: "resize", cols, rows });
  }

  /** Stops waiting: the session closes, and `exit` resolves with `code` when given (else as the close decides). */
  close(code?: number): void {
    if (code !== undefined) this.#code = code;
    if (this.#ws.readyState === WebSocket.CONNECTING) this.#ws.terminate();
    else this.#ws.close();
  }

  /** Ends the session with an error: `exit` rejects with it. */
  fail(err: unknown): void {
    this.#settle({ error: err });
    this.#ws.terminate();
  }

  #control(frame: object): boolean {
    if (!this.isOpen) return false;
    this.#ws.send(JSON.stringify(frame));
    return true;
  }

  #wake(): void {
    const w = this.#waiters;
    this.#waiters = [];
    for (const r of w) r();
  }

  /** The exit code, or why there is none: the first call decides. */
  #settle(v: { code: number } | { error: unknown }): void {
    if (this.#settled) return;
    this.#settled = true;
    this.#wake();
    if ("code" in v) this.#resolve(v.code);
    else this.#reject(v.error);
  }

  /** Runs `fn` after everything queued before it (at once when nothing is). */
  #inOrder(fn: () => unknown): void {
    if (this.#pending === 0) {
      let r: unknown;
      try {
        r = fn();
      } catch (err) {
        return this.fail(err);
      }
      if (isThenable(r)) this.#queue(Promise.resolve(r));
      return;
    }
    this.#queue(this.#chain.then(fn));
  }

  /** Holds what follows (and the socket's reading) until `p` settles; a failure ends the session. */
  #queue(p: Promise<unknown>): void {
    this.#pending++;
    this.#ws.pause();
    this.#chain = p.then(
      () => this.#done(),
      (err: unknown) => {
        this.#done();
        this.fail(err);
      },
    );
  }

  #done(): void {
    if (--this.#pending === 0 && this.#ws.isPaused) this.#ws.resume();
  }
}

export interface ExecOptions extends Omit<ExecRequest, "cmd" | "tty" | "size"> {
  /** The command's input; without it the command's stdin is closed at once. */
  stdin?: string | Uint8Array | AsyncIterable<Uint8Array | string>;
  /**
   * Its stdout as it comes; a returned promise (any thenable) holds the rest until it
   * settles, any other return value is ignored (`(c) => process.stdout.write(c)`'s boolean).
   */
  onStdout?: (chunk: Buffer) => unknown;
  onStderr?: (chunk: Buffer) => unknown;
  /** On abort, the command gets `abortSignal` (default INT, as Ctrl-C); exec still resolves with its exit code (130 after INT). */
  signal?: AbortSignal;
  abortSignal?: ExecSignal;
}

/** Checks what the gateway would refuse, so that a mistake is one line before anything starts. */
function checkRequest(cmd: readonly string[], o: ExecOptions): void {
  if (!Array.isArray(cmd) || cmd.length === 0 || !cmd.every((c) => typeof c === "string")) {
    throw new SandgateError(`cmd: expected a non-empty array of strings, got ${JSON.stringify(cmd)}`, "invalid_request");
  }
  if (o.env !== undefined) {
    const bad = checkExecEnv(o.env);
    if (bad) throw new SandgateError(`env: ${bad}`, "invalid_request");
  }
  if (o.cwd !== undefined) {
    const bad = checkWorkdir(o.cwd);
    if (bad) throw new SandgateError(`cwd: ${bad}`, "invalid_request");
  }
  if (o.abortSignal !== undefined && !EXEC_SIGNALS.includes(o.abortSignal)) {
    throw new SandgateError(`abortSignal: expected one of ${EXEC_SIGNALS.join(", ")}, got ${JSON.stringify(o.abortSignal)}`, "invalid_request");
  }
}

async function pumpStdin(session: ExecSession, input: NonNullable<ExecOptions["stdin"]>): Promise<void> {
  if (typeof input === "string" || input instanceof Uint8Array) {
    await session.write(typeof input === "string" ? Buffer.from(input) : input);
  } else {
    for await (const c of input) {
      if (!session.isOpen) break;
      await session.write(typeof c === "string" ? Buffer.from(c) : c);
    }
  }
  session.end();
}

/**
 * Runs `cmd` in the sandbox and resolves with its exit code (see ExecOptions). `drop`
 * ends the session without a signal (the client is disposed): exec rejects with
 * `connection_lost` and the command is left as a dropped connection leaves it.
 */
export async function exec(t: Transport, sandbox: string, cmd: readonly string[], o: ExecOptions = {}, drop?: AbortSignal): Promise<number> {
  checkRequest(cmd, o);
  o.signal?.throwIfAborted();
  drop?.throwIfAborted();
  const abortWith = o.abortSignal ?? "INT";
  let aborted = false;
  let gatewayError: string | undefined;
  const req: ExecRequest = { cmd: [...cmd] };
  if (o.env !== undefined) req.env = o.env;
  if (o.cwd !== undefined) req.cwd = o.cwd;
  if (o.user !== undefined) req.user = o.user;
  if (o.timeout !== undefined) req.timeout = o.timeout;
  const session: ExecSession = new ExecSession(t, sandbox, req, {
    onOpen: () => {
      if (o.stdin === undefined) session.end();
      else pumpStdin(session, o.stdin).catch((err: unknown) => session.fail(err));
      if (aborted) session.signal(abortWith);
    },
    ...(o.onStdout ? { onStdout: o.onStdout } : {}),
    ...(o.onStderr ? { onStderr: o.onStderr } : {}),
    onError: (m) => (gatewayError = m),
    onSignalFailed: (sig, m) => session.fail(new SandgateError(`SIG${sig} was not delivered: ${m}; the command may still run`, "signal_failed", { exitCode: 128 + (SIGNAL_NUMBERS[sig as ExecSignal] ?? 0) })),
  });
  const onAbort = (): void => {
    aborted = true;
    session.signal(abortWith);
  };
  const onDrop = (): void => session.fail(new SandgateError("the exec session was closed: the client was disposed", "connection_lost"));
  o.signal?.addEventListener("abort", onAbort, { once: true });
  drop?.addEventListener("abort", onDrop, { once: true });
  try {
    return await session.exit;
  } catch (err) {
    if (gatewayError !== undefined && err instanceof SandgateError && err.code === "connection_lost") throw new SandgateError(`${err.message}: ${gatewayError}`, err.code);
    throw err;
  } finally {
    o.signal?.removeEventListener("abort", onAbort);
    drop?.removeEventListener("abort", onDrop);
    session.close();
  }
}
