// The supervisor endpoint: a TLS listener separate from the user API, bound where supervisor
// containers can reach it (the egress bridge's gateway address). A supervisor opens one
// WebSocket, verifies our certificate against its pin, then sends `hello` with its launch
// token as the first message. We verify the token and bind it to the current launch before
// the session exists; every refusal is logged with its reason and counted.
//
// Any local user can reach this port, so its connections are bounded (connection-bounds.ts):
// a TLS handshake and upgrade request must be in within the header timeout, and the hello
// within the auth timeout after it; connections that have not authenticated are capped apart
// from established sessions (the oldest evicted for a newcomer), so a flood of them keeps
// neither a new supervisor out nor an established one down.
import { randomUUID } from "node:crypto";
import https from "node:https";
import type { AddressInfo } from "node:net";
import type { Duplex } from "node:stream";
import { WebSocketServer } from "ws";
import type { WebSocket } from "ws";
import type { BoundaryRegistry, SessionLink } from "./boundary.js";
import type { LaunchTokens } from "./launch-tokens.js";
import { CLOSE, SUPERVISOR_PATH, parseSupervisorMessage } from "../../protocol/wire.js";
import { DEFAULT_CONNECTION_BOUNDS, boundConnections, boundedServerOptions, type ConnectionBoundsSettings, type ConnectionBoundsStats } from "../../util/connection-bounds.js";
import type { GatewayMessage, HelloMessage } from "../../protocol/wire.js";
import { errorMessage } from "../../util/error-message.js";

/** The launch a sandbox is expected to run now; null when none (stopped, deleted, unknown). */
export interface ExpectedLaunch {
  generation: number;
  nonce: string;
}

export type RefusalReason =
  | "malformed_hello"
  | "auth_timeout"
  | "malformed_token"
  | "bad_signature"
  | "expired"
  | "wrong_audience"
  | "wrong_issuer"
  | "bad_claims"
  | "sandbox_mismatch"
  | "unknown_sandbox"
  | "stale_generation"
  | "generation_mismatch"
  | "nonce_mismatch"
  | "duplicate_session"
  | "connections_full"
  | "gateway_closing";

export interface EndpointLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

export interface SupervisorEndpointOptions {
  /** Listen address; the egress bridge gateway IP in production, 127.0.0.1 in tests. */
  host: string;
  port?: number;
  tls: { certPem: string; keyPem: string };
  tokens: LaunchTokens;
  expected: (sandboxId: string) => Promise<ExpectedLaunch | null>;
  boundary: BoundaryRegistry;
  log: EndpointLog;
  /** Time an upgraded connection gets to send a valid hello. Default: the header timeout. */
  authTimeoutMs?: number;
  /** Header and idle timeouts, and caps on unauthenticated connections and on sessions (defaults: DEFAULT_CONNECTION_BOUNDS). */
  bounds?: Partial<ConnectionBoundsSettings>;
  /** Largest accepted supervisor message. Default 256 KiB. */
  maxPayload?: number;
}

export interface EndpointStats {
  accepted: number;
  refused: Partial<Record<RefusalReason, number>>;
  /** Authenticated sessions closed for a malformed message. */
  malformed: number;
  /** The listener's connections: open by pool, limits, closes by reason. */
  connections: ConnectionBoundsStats;
}

export interface SupervisorEndpoint {
  /** wss://host:port/v1/supervisor: what goes into launch configs. */
  readonly url: string;
  readonly address: AddressInfo;
  stats(): EndpointStats;
  close(): Promise<void>;
}

type Check = { ok: true; link: SessionLink } | { ok: false; reason: RefusalReason; detail: string; sandboxId?: string; generation?: number };

export async function startSupervisorEndpoint(opts: SupervisorEndpointOptions): Promise<SupervisorEndpoint> {
  const { boundary, tokens, log } = opts;
  const authTimeoutMs = opts.authTimeoutMs ?? opts.bounds?.headerTimeoutMs ?? DEFAULT_CONNECTION_BOUNDS.headerTimeoutMs;
  const stats: Omit<EndpointStats, "connections"> = { accepted: 0, refused: {}, malformed: 0 };
  const sockets = new Set<WebSocket>();

  const server = https.createServer({ cert: opts.tls.certPem, key: opts.tls.keyPem, minVersion: "TLSv1.3", ...boundedServerOptions(opts.bounds) }, (_req, res) => {
    res.writeHead(426, { "content-type": "text/plain" }).end("WebSocket upgrade required\n");
  });
  // A session is authenticated once its hello and launch token are verified (authenticate below).
  const bounds = boundConnections(server, opts.bounds ?? {});
  const wss = new WebSocketServer({ server, path: SUPERVISOR_PATH, maxPayload: opts.maxPayload ?? 256 * 1024, perMessageDeflate: false, clientTracking: false });

  function refuse(ws: WebSocket, remote: string | undefined, r: Check & { ok: false }): void {
    stats.refused[r.reason] = (stats.refused[r.reason] ?? 0) + 1;
    // A supervisor of a launch the gateway has just let go (a stop, a delete, a new generation)
    // redials until its container stops: expected, so info; every other refusal is a warning.
    const expected = r.reason === "unknown_sandbox" || r.reason === "stale_generation";
    log[expected ? "info" : "warn"](
      { event: "supervisor_session_refused", reason: r.reason, detail: r.detail, sandboxId: r.sandboxId ?? null, generation: r.generation ?? null, remote: remote ?? null },
      "supervisor session refused",
    );
    const code =
      r.reason === "duplicate_session" ? CLOSE.duplicate : r.reason === "auth_timeout" ? CLOSE.authTimeout : r.reason === "malformed_hello" ? CLOSE.malformed : r.reason === "connections_full" ? CLOSE.tryAgainLater : CLOSE.refused;
    ws.close(code, r.reason);
  }

  async function authenticate(ws: WebSocket, socket: Duplex, hello: HelloMessage): Promise<Check> {
    const claimed = { sandboxId: hello.sandboxId, generation: hello.generation };
    const verified = await tokens.verify(hello.token);
    if (!verified.ok) return { ...verified, ...claimed };
    const c = verified.claims;
    const ids = { sandboxId: c.sandboxId, generation: c.generation };
    // A token copied from another sandbox is refused even though its signature is valid.
    if (c.sandboxId !== hello.sandboxId || c.generation !== hello.generation) {
      return { ok: false, reason: "sandbox_mismatch", detail: `token is for ${c.sandboxId} g${String(c.generation)}, supervisor says ${hello.sandboxId} g${String(hello.generation)}`, ...ids };
    }
    const expected = await opts.expected(c.sandboxId);
    if (expected === null) return { ok: false, reason: "unknown_sandbox", detail: "no current launch for this sandbox", ...ids };
    if (c.generation < expected.generation) return { ok: false, reason: "stale_generation", detail: `generation ${String(c.generation)} < current ${String(expected.generation)}`, ...ids };
    if (c.generation !== expected.generation) return { ok: false, reason: "generation_mismatch", detail: `generation ${String(c.generation)} != current ${String(expected.generation)}`, ...ids };
    if (c.nonce !== expected.nonce) return { ok: false, reason: "nonce_mismatch", detail: "launch nonce does not match the current launch", ...ids };
    // A slot among the sessions, before the session exists; the supervisor retries with backoff.
    const slot = bounds.authenticated(socket);
    if (!slot.ok) return { ok: false, reason: "connections_full", detail: slot.reason, ...ids };
    const link: SessionLink = {
      sessionId: randomUUID(),
      sandboxId: c.sandboxId,
      generation: c.generation,
      accepts: new Set(hello.accepts ?? []),
      send(message: GatewayMessage) {
        if (ws.readyState === ws.OPEN) ws.send(JSON.stringify(message));
      },
      close(code: number, reason: string) {
        ws.close(code, reason);
        // A peer that never answers the close frame must not keep the socket.
        setTimeout(() => ws.terminate(), 2000).unref();
      },
    };
    const admitted = boundary.admit(link);
    if (!admitted.ok) return { ok: false, reason: admitted.reason, detail: admitted.reason === "duplicate_session" ? "this launch already has an established session" : "gateway is shutting down", ...ids };
    return { ok: true, link };
  }

  wss.on("connection", (ws, req) => {
    sockets.add(ws);
    const remote = req.socket.remoteAddress;
    let link: SessionLink | undefined;
    let authenticating = false;
    const authTimer = setTimeout(() => {
      if (link === undefined) refuse(ws, remote, { ok: false, reason: "auth_timeout", detail: `no valid hello within ${String(authTimeoutMs)} ms` });
    }, authTimeoutMs);
    authTimer.unref();

    ws.on("error", (err) => log.warn({ event: "supervisor_socket_error", err: err.message, remote: remote ?? null }, "supervisor socket error"));
    ws.on("close", (code, reason) => {
      sockets.delete(ws);
      clearTimeout(authTimer);
      if (link !== undefined) boundary.detach(link, `closed ${String(code)} ${reason.toString("utf8")}`);
    });

    // The supervisor's liveness beat; `ws` answers the pong itself.
    ws.on("ping", () => {
      if (link !== undefined) boundary.alive(link);
    });

    ws.on("message", (data, isBinary) => {
      const parsed = isBinary ? { ok: false as const, error: "binary message" } : parseSupervisorMessage(data);
      if (link === undefined) {
        // Exactly one hello, and nothing else, before the session exists.
        if (authenticating) {
          refuse(ws, remote, { ok: false, reason: "malformed_hello", detail: "message before authentication finished" });
          return;
        }
        if (!parsed.ok || parsed.message.type !== "hello") {
          refuse(ws, remote, { ok: false, reason: "malformed_hello", detail: parsed.ok ? `expected hello, got ${parsed.message.type}` : parsed.error });
          return;
        }
        authenticating = true;
        authenticate(ws, req.socket, parsed.message).then(
          (check) => {
            authenticating = false;
            if (ws.readyState !== ws.OPEN) {
              if (check.ok) boundary.detach(check.link, "closed during authentication");
              return;
            }
            if (!check.ok) {
              refuse(ws, remote, check);
              return;
            }
            clearTimeout(authTimer);
            link = check.link;
            stats.accepted++;
          },
          (err: unknown) => {
            refuse(ws, remote, { ok: false, reason: "malformed_token", detail: errorMessage(err) });
          },
        );
        return;
      }
      if (!parsed.ok || parsed.message.type === "hello") {
        stats.malformed++;
        log.warn(
          { event: "supervisor_message_malformed", sandboxId: link.sandboxId, sessionId: link.sessionId, error: parsed.ok ? "second hello" : parsed.error },
          "malformed supervisor message: closing the session",
        );
        boundary.detach(link, "malformed message");
        ws.close(CLOSE.malformed, "malformed message");
        return;
      }
      const m = parsed.message;
      if (m.type === "ack") boundary.ack(link, m);
      else if (m.type === "heartbeat") boundary.heartbeat(link, m);
      else if (m.type === "secretsAck") boundary.secretsAck(link, m);
      else boundary.audit(link, m.event);
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(opts.port ?? 0, opts.host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const hostPart = address.family === "IPv6" ? `[${address.address}]` : address.address;
  const url = `wss://${hostPart}:${String(address.port)}${SUPERVISOR_PATH}`;
  log.info({ event: "supervisor_endpoint_listening", url }, "supervisor endpoint listening");

  let closing: Promise<void> | undefined;
  return {
    url,
    address,
    stats: () => ({ accepted: stats.accepted, refused: { ...stats.refused }, malformed: stats.malformed, connections: bounds.stats() }),
    close: () =>
      (closing ??= new Promise<void>((resolve) => {
        // Cut like a crash would: supervisors reconnect with backoff, and their grace
        // period covers a gateway restart.
        for (const ws of sockets) ws.terminate();
        bounds.close();
        wss.close();
        server.close(() => resolve());
        server.closeAllConnections();
      })),
  };
}
