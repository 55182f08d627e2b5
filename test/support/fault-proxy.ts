// A fault-injection proxy for the Docker socket, for monitoring/recovery tests: the
// gateway talks to the proxy's Unix socket, the proxy pipes each connection to the real
// (healthy) daemon, and the test injects transport faults deterministically.
//
// Matching is per request, not per connection: HTTP clients (undici in EngineClient)
// reuse a keep-alive connection, so GET /events often rides the connection that just
// carried GET /_ping. A small observer (RequestTracker) follows request framing on the
// client→daemon direction to see each request line; bytes are forwarded unchanged.
// Assumes non-pipelined clients (undici's default): a request's response is the next
// response on its connection.
//
// Unix sockets have no RST: a destroyed connection reaches the peer as EOF (ECONNRESET
// only if unread bytes were queued), which is also what a crashed dockerd looks like.
import { mkdtempSync, rmSync } from "node:fs";
import { createConnection, createServer } from "node:net";
import type { Server, Socket } from "node:net";
import { join } from "node:path";

export type TruncateMode = "after-headers" | { inject: string };

export interface FaultProxyStats {
  /** Connections accepted (refused ones included). */
  accepted: number;
  /** Client connections currently open (stalled ones included). */
  open: number;
  /** Connections torn down by cut(), cutAll() or stall(false). */
  cut: number;
  /** Connections destroyed on accept while refuse() was on. */
  refused: number;
  /** Requests answered by fail(). */
  failed: number;
  /** Responses truncated by truncateNext(). */
  truncated: number;
}

type Segment = { kind: "request"; line: string } | { kind: "bytes"; data: Buffer };

const REQUEST_LINE = /^[A-Z]+ [\x21-\x7e]+ HTTP\/\d\.\d$/;
// A prefix that may still become a request line. Anything else (a hijacked stream's
// stdin, garbage) switches the tracker to raw pass-through, so nothing is ever held back.
const PARTIAL_REQUEST_LINE = /^[A-Z]{1,20}(?: [\x21-\x7e]*(?: [\x21-\x7e]*)?)?\r?$/;
const MAX_LINE = 8192;
const MAX_HEAD = 65536;

type TrackerState = "line" | "headers" | "body" | "chunk-size" | "chunk-data" | "trailer" | "raw";

/**
 * Splits the client→daemon byte stream into request-line events and pass-through bytes.
 * Only a request line is held (so fail/stall can decide before any of it goes upstream);
 * headers and bodies (Content-Length or chunked) pass as they come. After an Upgrade, or
 * on anything it does not understand, it goes raw: everything passes, no more events.
 */
export class RequestTracker {
  #state: TrackerState = "line";
  #held = "";
  #head = "";
  #remaining = 0;

  push(chunk: Buffer): Segment[] {
    const out: Segment[] = [];
    let from = 0; // first byte of chunk neither emitted nor held
    const emit = (to: number): void => {
      if (to > from) out.push({ kind: "bytes", data: chunk.subarray(from, to) });
      from = to;
    };
    let i = 0;
    while (i < chunk.length && this.#state !== "raw") {
      switch (this.#state) {
        case "line": {
          emit(i);
          this.#held += String.fromCharCode(chunk[i++]!);
          from = i;
          if (this.#held.endsWith("\r\n")) {
            const line = this.#held.slice(0, -2);
            if (REQUEST_LINE.test(line)) {
              out.push({ kind: "request", line });
              this.#state = "headers";
              this.#head = "\r\n"; // the line's CRLF, so an empty header block ends at once
            } else this.#state = "raw";
            out.push({ kind: "bytes", data: Buffer.from(this.#held, "latin1") });
            this.#held = "";
          } else if (this.#held.length > MAX_LINE || !PARTIAL_REQUEST_LINE.test(this.#held)) {
            out.push({ kind: "bytes", data: Buffer.from(this.#held, "latin1") });
            this.#held = "";
            this.#state = "raw";
          }
          break;
        }
        case "headers":
          this.#head += String.fromCharCode(chunk[i++]!);
          if (this.#head.endsWith("\r\n\r\n")) this.#state = this.#bodyState();
          else if (this.#head.length > MAX_HEAD) this.#state = "raw";
          break;
        case "chunk-size":
          this.#head += String.fromCharCode(chunk[i++]!);
          if (this.#head.endsWith("\r\n")) {
            const size = Number.parseInt(this.#head.split(";")[0]!.trim(), 16);
            this.#head = "";
            if (!Number.isFinite(size) || size < 0) this.#state = "raw";
            else if (size === 0) this.#state = "trailer";
            else {
              this.#remaining = size + 2; // data and its CRLF
              this.#state = "chunk-data";
            }
          } else if (this.#head.length > MAX_LINE) this.#state = "raw";
          break;
        case "trailer":
          this.#head += String.fromCharCode(chunk[i++]!);
          if (this.#head === "\r\n") this.#state = "line";
          else if (this.#head.endsWith("\r\n")) this.#head = "";
          else if (this.#head.length > MAX_HEAD) this.#state = "raw";
          break;
        case "body":
        case "chunk-data": {
          const n = Math.min(this.#remaining, chunk.length - i);
          i += n;
          this.#remaining -= n;
          if (this.#remaining === 0) {
            this.#head = "";
            this.#state = this.#state === "body" ? "line" : "chunk-size";
          }
          break;
        }
      }
    }
    emit(chunk.length);
    return out;
  }

  #bodyState(): TrackerState {
    const headers = this.#head.toLowerCase();
    this.#head = "";
    if (/\r\nupgrade:/.test(headers)) return "raw"; // e.g. exec start: a raw stream follows
    if (/\r\ntransfer-encoding:[^\r]*chunked/.test(headers)) return "chunk-size";
    const length = /\r\ncontent-length:\s*(\d+)/.exec(headers);
    this.#remaining = length ? Number(length[1]) : 0;
    return this.#remaining > 0 ? "body" : "line";
  }
}

class Conn {
  upstream: Socket | undefined;
  /** Latest request line seen ("" before the first). */
  line = "";
  /** forward: piped; stalled: read and dropped, never answered; answered: we replied (fail/truncate), input dropped. */
  state: "forward" | "stalled" | "answered" = "forward";
  truncate: { mode: TruncateMode; head: Buffer } | undefined;
  readonly tracker = new RequestTracker();
  constructor(readonly client: Socket) {}
}

interface TruncateRule {
  match: RegExp;
  mode: TruncateMode;
  remaining: number;
}

function matches(re: RegExp, s: string): boolean {
  re.lastIndex = 0; // a /g or /y regex would otherwise remember its last match
  return re.test(s);
}

/** Writes with backpressure: pauses src until dst drains. */
function send(dst: Socket, data: Buffer, src: Socket | undefined): void {
  if (!dst.write(data) && src && !src.isPaused()) {
    src.pause();
    dst.once("drain", () => src.resume());
  }
}

const STATUS_TEXT: Record<number, string> = { 400: "Bad Request", 404: "Not Found", 409: "Conflict", 500: "Internal Server Error", 503: "Service Unavailable" };

export class FaultProxy {
  readonly socketPath: string;
  readonly upstreamSocket: string;
  readonly #server: Server;
  readonly #tempDir: string | undefined;
  readonly #conns = new Set<Conn>();
  /** Every socket (client and upstream) not yet closed, so close() can wait for all. */
  readonly #sockets = new Set<Socket>();
  #rules: TruncateRule[] = [];
  #refusing = false;
  #stalling = false;
  #failStatus: number | null = null;
  #counts = { accepted: 0, cut: 0, refused: 0, failed: 0, truncated: 0 };
  #closed = false;

  private constructor(upstreamSocket: string, socketPath: string | undefined) {
    this.upstreamSocket = upstreamSocket;
    if (socketPath === undefined) {
      this.#tempDir = mkdtempSync("/tmp/sg-fp-"); // short: Unix socket paths max 107 bytes
      this.socketPath = join(this.#tempDir, "docker.sock");
    } else this.socketPath = socketPath;
    // allowHalfOpen: a client that half-closes after its request still gets the answer.
    this.#server = createServer({ allowHalfOpen: true }, (client) => this.#accept(client));
  }

  static async start(opts: { upstreamSocket: string; socketPath?: string }): Promise<FaultProxy> {
    const proxy = new FaultProxy(opts.upstreamSocket, opts.socketPath);
    try {
      await new Promise<void>((resolve, reject) => {
        proxy.#server.once("error", reject);
        proxy.#server.listen(proxy.socketPath, () => {
          proxy.#server.off("error", reject);
          resolve();
        });
      });
    } catch (err) {
      if (proxy.#tempDir !== undefined) rmSync(proxy.#tempDir, { recursive: true, force: true });
      throw err;
    }
    return proxy;
  }

  /** Destroy every open connection now. Returns how many were cut. */
  cutAll(): number {
    return this.#cutWhere(() => true);
  }

  /** Cut only connections whose latest request line matches (e.g. /\/events/). */
  cut(match: RegExp): number {
    return this.#cutWhere((c) => matches(match, c.line));
  }

  /** While on: accept and immediately destroy new connections. Open ones are untouched. */
  refuse(on: boolean): void {
    this.#refusing = on;
  }

  /**
   * While on: new connections are accepted but never forwarded or answered, and so is any
   * new request on an open keep-alive connection (a hung daemon). Streams already flowing
   * keep flowing. Turning it off destroys the stalled connections.
   */
  stall(on: boolean): void {
    this.#stalling = on;
    if (!on) this.#cutWhere((c) => c.state === "stalled");
  }

  /**
   * While on (a status): every new request, on new or open connections, is answered with
   * this status and {"message": ...} (Connection: close) without being forwarded.
   */
  fail(status: number | null): void {
    this.#failStatus = status;
  }

  /**
   * For the next `count` requests whose request line matches: forward it, pass the response
   * through the end of its headers, then close the client side cleanly (FIN), after writing
   * `inject` if given. `inject` goes out raw: for a chunked response (events, wait) include
   * the chunk framing yourself. Rules are checked in the order they were added.
   */
  truncateNext(match: RegExp, mode: TruncateMode, count = 1): void {
    if (count > 0) this.#rules.push({ match, mode, remaining: count });
  }

  stats(): FaultProxyStats {
    return { ...this.#counts, open: this.#conns.size };
  }

  /** Latest request line of each open connection ("" for one that sent nothing yet). */
  openRequests(): string[] {
    return [...this.#conns].map((c) => c.line);
  }

  /** Stops listening, destroys every connection and waits until all sockets are closed. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#rules = [];
    const serverClosed = new Promise<void>((resolve) => this.#server.close(() => resolve()));
    const socketsClosed = [...this.#sockets].map((s) => new Promise<void>((resolve) => s.once("close", () => resolve())));
    for (const s of this.#sockets) s.destroy();
    this.#conns.clear();
    await Promise.all([serverClosed, ...socketsClosed]);
    if (this.#tempDir !== undefined) rmSync(this.#tempDir, { recursive: true, force: true });
  }

  #track(s: Socket): void {
    this.#sockets.add(s);
    s.on("close", () => this.#sockets.delete(s));
    s.on("error", () => undefined); // resets are expected here; 'close' follows
  }

  #accept(client: Socket): void {
    this.#counts.accepted++;
    this.#track(client);
    if (this.#refusing || this.#closed) {
      this.#counts.refused++;
      client.destroy();
      return;
    }
    const conn = new Conn(client);
    this.#conns.add(conn);
    client.on("close", () => {
      this.#conns.delete(conn);
      conn.upstream?.destroy();
    });
    if (this.#stalling) conn.state = "stalled";
    else conn.upstream = this.#connectUpstream(conn);
    client.on("data", (chunk: Buffer) => {
      for (const seg of conn.tracker.push(chunk)) {
        if (seg.kind === "request") this.#onRequest(conn, seg.line);
        else if (conn.state === "forward" && conn.upstream) send(conn.upstream, seg.data, client);
      }
    });
    client.on("end", () => {
      if (conn.state === "forward") conn.upstream?.end();
    });
  }

  #connectUpstream(conn: Conn): Socket {
    const up = createConnection({ path: this.upstreamSocket, allowHalfOpen: true });
    this.#track(up);
    up.on("data", (chunk: Buffer) => this.#fromUpstream(conn, chunk));
    up.on("end", () => {
      if (conn.state === "forward") conn.client.end();
    });
    // A failed connect (daemon gone) or a reset from the daemon resets the client too.
    up.on("close", (hadError) => {
      if (hadError && conn.state === "forward") conn.client.destroy();
    });
    return up;
  }

  #onRequest(conn: Conn, line: string): void {
    if (conn.state === "answered") return;
    conn.line = line;
    if (conn.state === "stalled") return;
    if (this.#stalling) {
      conn.state = "stalled";
      this.#dropUpstream(conn);
      return;
    }
    if (this.#failStatus !== null) {
      this.#counts.failed++;
      this.#answer(conn, this.#failStatus);
      return;
    }
    const rule = this.#rules.find((r) => matches(r.match, line));
    if (rule) {
      if (--rule.remaining === 0) this.#rules = this.#rules.filter((r) => r !== rule);
      conn.truncate = { mode: rule.mode, head: Buffer.alloc(0) };
    }
  }

  #fromUpstream(conn: Conn, chunk: Buffer): void {
    if (conn.state !== "forward") return;
    const t = conn.truncate;
    if (!t) {
      send(conn.client, chunk, conn.upstream);
      return;
    }
    // Hold the response until its header block is complete, then cut right after it.
    t.head = Buffer.concat([t.head, chunk]);
    const end = t.head.indexOf("\r\n\r\n");
    if (end < 0) return;
    this.#counts.truncated++;
    conn.state = "answered";
    conn.truncate = undefined;
    this.#dropUpstream(conn);
    conn.client.write(t.head.subarray(0, end + 4));
    if (typeof t.mode === "object") conn.client.write(t.mode.inject);
    conn.client.end(); // FIN after the flushed bytes; the client's input is then dropped
  }

  #answer(conn: Conn, status: number): void {
    conn.state = "answered";
    this.#dropUpstream(conn);
    const body = `${JSON.stringify({ message: `fault-proxy: injected HTTP ${status}` })}\n`;
    conn.client.end(
      `HTTP/1.1 ${status} ${STATUS_TEXT[status] ?? "Error"}\r\n` +
        "Content-Type: application/json\r\n" +
        `Content-Length: ${Buffer.byteLength(body)}\r\n` +
        "Connection: close\r\n\r\n" +
        body,
    );
  }

  #dropUpstream(conn: Conn): void {
    conn.upstream?.destroy();
    conn.upstream = undefined;
  }

  #cutWhere(pick: (c: Conn) => boolean): number {
    let n = 0;
    for (const c of [...this.#conns]) {
      if (!pick(c)) continue;
      this.#conns.delete(c); // now, not at 'close', so stats() right after is exact
      c.client.destroy();
      this.#dropUpstream(c);
      n++;
    }
    this.#counts.cut += n;
    return n;
  }
}
