// The supervisor's side of the control session: dial the gateway's supervisor endpoint,
// accept exactly the pinned certificate, authenticate with the launch token, apply pushed
// policy revisions, send acks, heartbeats and audit events. Reconnects forever with
// bounded, jittered exponential backoff. Fails closed: once the session has been down
// (or never up) for longer than the grace period, the policy holder is locked down and
// all egress is denied until the gateway re-authenticates us and re-pushes the policy.
import type { IncomingMessage } from "node:http";
import { TLSSocket } from "node:tls";
import WebSocket from "ws";
import { policyFromObject } from "../policy/core.js";
import type { LockdownPolicyHolder } from "./lockdown.js";
import { LOCKDOWN_SESSION_LOST } from "./lockdown.js";
import type { Logger } from "./logger.js";
import { errorFields } from "./logger.js";
import type { AuditEvent } from "./proxy/index.js";
import { DEFAULT_GRACE_MS } from "../protocol/launch.js";
import { ACCEPTS_HOST_ADDRESSES, ACCEPTS_SECRETS, CLOSE, normalizeFingerprint, parseGatewayMessage } from "../protocol/wire.js";
import type { SecretVault } from "./secret-vault.js";
import { parseIp } from "../policy/core.js";
import { backoffDelay, type BackoffPolicy } from "../util/backoff.js";
import type { GatewayMessage, SupervisorMessage } from "../protocol/wire.js";
import { errorMessage } from "../util/error-message.js";

export interface ControlSessionOptions {
  /** wss://…/v1/supervisor */
  url: string;
  /** The gateway certificate's SHA-256 fingerprint; nothing else is trusted. */
  fingerprint: string;
  /** Reads the launch token; called on every attempt so a re-minted token is picked up. */
  token: () => Promise<string>;
  sandboxId: string;
  generation: number;
  policy: LockdownPolicyHolder;
  proxyListening: () => boolean;
  /**
   * Closes every open connection the policy now in force would not allow; returns how many.
   * Called after each pushed revision is installed, before its ack (which carries the count).
   */
  revoke?: () => number;
  logger: Logger;
  /** Session down this long → deny all egress. Default 15000. */
  graceMs?: number;
  /** Liveness: a WebSocket ping every heartbeatMs (answered inside `ws`, no JSON). Default 2000. */
  heartbeatMs?: number;
  /**
   * The full heartbeat (enforced revision, proxy, lockdown, drops) goes out when any of it
   * changes, checked every heartbeatMs, and at least this often. Default 5 × heartbeatMs.
   */
  heartbeatRefreshMs?: number;
  /** Nothing heard from the gateway (messages or pongs) for this long → drop the session. Default 5000. */
  deadAfterMs?: number;
  backoffInitialMs?: number;
  backoffMaxMs?: number;
  /** Handshake + hello → welcome deadline. Default 5000. */
  connectTimeoutMs?: number;
  auditQueueMax?: number;
  random?: () => number;
  /**
   * The gateway host's addresses, whole, each time the gateway sends them (after every
   * welcome and on change). Given: hello says the supervisor accepts them.
   */
  onHostAddresses?: (addresses: string[]) => void;
  /**
   * Where the secret values the gateway sends are held (memory only). Given: hello says the
   * supervisor accepts them; without it the proxy swaps no placeholder.
   */
  secrets?: SecretVault;
}

export type SessionState = "connecting" | "up" | "down" | "stopped";

export interface ControlSessionStatus {
  state: SessionState;
  lockdown: string | null;
  lastUpAt: string | null;
  lastError: string | null;
  attempts: number;
  auditDropped: number;
}

/**
 * Reconnect pacing: the cap doubles from backoffInitialMs up to backoffMaxMs and
 * each delay falls in [cap/2, cap] (a base of 3/4 cap with ±1/3 jitter).
 */
export function sessionBackoff(initialMs: number, maxMs: number): BackoffPolicy {
  return { initialMs: initialMs * 0.75, factor: 2, maxMs: maxMs * 0.75, jitter: 1 / 3 };
}

export class ControlSession {
  readonly #o: Required<Omit<ControlSessionOptions, "token" | "policy" | "proxyListening" | "revoke" | "logger" | "onHostAddresses" | "secrets">>;
  readonly #secrets: SecretVault | undefined;
  readonly #onHostAddresses: ((addresses: string[]) => void) | undefined;
  readonly #token: () => Promise<string>;
  readonly #policy: LockdownPolicyHolder;
  readonly #proxyListening: () => boolean;
  readonly #revoke: () => number;
  /** Connections closed since the held revision was applied (for the ack of a re-push). */
  #closedByRevision: { revision: number; closed: number } | undefined;
  readonly #log: Logger;
  readonly #pin: string;

  #state: SessionState = "down";
  #ws: WebSocket | undefined;
  #attempt = 0;
  #attempts = 0;
  #lastUpAt: number | null = null;
  #lastError: string | null = null;
  /** Set by our own decisions to drop the current connection; reported as lastError on close. */
  #sessionError: string | undefined;
  #lastHeard = 0;
  #graceTimer: NodeJS.Timeout | undefined;
  #retryTimer: NodeJS.Timeout | undefined;
  #heartbeatTimer: NodeJS.Timeout | undefined;
  #connectTimer: NodeJS.Timeout | undefined;
  /** The last full heartbeat sent in this session: its content and when. */
  #lastBeat: { key: string; at: number } | undefined;
  readonly #auditQueue: AuditEvent[] = [];
  #auditDropped = 0;
  readonly #listeners = new Set<(s: ControlSessionStatus) => void>();

  constructor(opts: ControlSessionOptions) {
    const pin = normalizeFingerprint(opts.fingerprint);
    if (pin === null) throw new Error("control session: fingerprint must be sha256:<64 hex digits>");
    this.#pin = pin;
    this.#token = opts.token;
    this.#policy = opts.policy;
    this.#proxyListening = opts.proxyListening;
    this.#revoke = opts.revoke ?? (() => 0);
    this.#log = opts.logger;
    this.#onHostAddresses = opts.onHostAddresses;
    this.#secrets = opts.secrets;
    this.#o = {
      url: opts.url,
      fingerprint: pin,
      sandboxId: opts.sandboxId,
      generation: opts.generation,
      graceMs: opts.graceMs ?? DEFAULT_GRACE_MS,
      // 2 s: the top of the 1-2 s band. A ping costs the gateway a frame and an automatic pong;
      // the JSON heartbeat (parse, schema check, health update) only on change or refresh.
      heartbeatMs: opts.heartbeatMs ?? 2000,
      heartbeatRefreshMs: opts.heartbeatRefreshMs ?? 5 * (opts.heartbeatMs ?? 2000),
      deadAfterMs: opts.deadAfterMs ?? 5000,
      backoffInitialMs: opts.backoffInitialMs ?? 250,
      backoffMaxMs: opts.backoffMaxMs ?? 10_000,
      connectTimeoutMs: opts.connectTimeoutMs ?? 5000,
      auditQueueMax: opts.auditQueueMax ?? 1000,
      random: opts.random ?? Math.random,
    };
  }

  start(): void {
    if (this.#state !== "down" || this.#ws !== undefined || this.#retryTimer !== undefined) return;
    // Never up yet counts as down: the launch policy is trusted only for the grace period.
    this.#armGrace();
    this.#connect();
  }

  async stop(): Promise<void> {
    this.#state = "stopped";
    clearTimeout(this.#graceTimer);
    clearTimeout(this.#retryTimer);
    this.#retryTimer = undefined;
    this.#stopSessionTimers();
    const ws = this.#ws;
    this.#ws = undefined;
    if (ws === undefined || ws.readyState === WebSocket.CLOSED) return;
    await new Promise<void>((resolve) => {
      ws.once("close", () => resolve());
      if (ws.readyState === WebSocket.OPEN) ws.close(CLOSE.goingAway, "supervisor stopping");
      else ws.terminate();
      setTimeout(() => {
        ws.terminate();
        resolve();
      }, 1000).unref();
    });
  }

  status(): ControlSessionStatus {
    return {
      state: this.#state,
      lockdown: this.#policy.lockdownReason(),
      lastUpAt: this.#lastUpAt === null ? null : new Date(this.#lastUpAt).toISOString(),
      lastError: this.#lastError,
      attempts: this.#attempts,
      auditDropped: this.#auditDropped,
    };
  }

  onStatus(listener: (s: ControlSessionStatus) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Forwards a proxy audit event; queued (bounded, oldest dropped) while the session is down. */
  audit(event: AuditEvent): void {
    if (this.#state === "up" && this.#ws !== undefined && this.#ws.bufferedAmount < 1024 * 1024) {
      this.#send({ type: "audit", event });
      return;
    }
    if (this.#state === "stopped") return;
    this.#auditQueue.push(event);
    if (this.#auditQueue.length > this.#o.auditQueueMax) {
      this.#auditQueue.shift();
      this.#auditDropped++;
    }
  }

  // ---- connection ----

  #connect(): void {
    if (this.#state === "stopped") return;
    this.#retryTimer = undefined;
    this.#attempts++;
    this.#setState("connecting");
    this.#token().then(
      (token) => this.#dial(token.trim()),
      (err: unknown) => {
        this.#lastError = `cannot read launch token: ${errorMessage(err)}`;
        this.#log.error("control session: cannot read launch token", { sandboxId: this.#o.sandboxId, ...errorFields(err) });
        this.#retry();
      },
    );
  }

  #dial(token: string): void {
    if (this.#state === "stopped") return;
    let pinned = false;
    // Why this attempt failed, when we know better than the close code.
    let failure: string | undefined;
    const ws = new WebSocket(this.#o.url, {
      // The chain is not checked: the pin below is the whole trust decision.
      rejectUnauthorized: false,
      handshakeTimeout: this.#o.connectTimeoutMs,
      perMessageDeflate: false,
      maxPayload: 16 * 1024 * 1024,
      followRedirects: false,
    });
    this.#ws = ws;
    this.#connectTimer = setTimeout(() => {
      failure ??= "no welcome from the gateway in time";
      ws.terminate();
    }, this.#o.connectTimeoutMs);

    ws.on("upgrade", (res: IncomingMessage) => {
      const socket = res.socket;
      const presented = socket instanceof TLSSocket ? socket.getPeerX509Certificate()?.fingerprint256 : undefined;
      const fp = presented === undefined ? null : normalizeFingerprint(presented);
      if (fp !== this.#pin) {
        failure = "gateway certificate does not match the pinned fingerprint";
        this.#log.error("control session: gateway certificate does not match the pinned fingerprint; not sending the token", {
          sandboxId: this.#o.sandboxId,
          url: this.#o.url,
          presented: fp,
          pinned: this.#pin,
        });
        ws.terminate();
        return;
      }
      pinned = true;
    });

    ws.on("open", () => {
      // Defence in depth: "open" must never run for an unpinned peer.
      if (!pinned) {
        ws.terminate();
        return;
      }
      this.#lastHeard = Date.now();
      const held = this.#policy.held();
      this.#send({
        type: "hello",
        token,
        sandboxId: this.#o.sandboxId,
        generation: this.#o.generation,
        enforcedRevision: held?.revision ?? null,
        proxy: this.#proxyListening() ? "listening" : "not_listening",
        ...(this.#accepts().length === 0 ? {} : { accepts: this.#accepts() }),
      });
    });

    ws.on("message", (data, isBinary) => {
      this.#lastHeard = Date.now();
      const parsed = isBinary ? { ok: false as const, error: "binary message" } : parseGatewayMessage(data);
      if (!parsed.ok) {
        this.#protocolError(ws, parsed.error);
        return;
      }
      this.#handle(ws, parsed.message);
    });

    ws.on("pong", () => {
      this.#lastHeard = Date.now();
    });

    ws.on("unexpected-response", (_req, res: IncomingMessage) => {
      failure ??= `gateway answered HTTP ${String(res.statusCode)}`;
      ws.terminate();
    });

    ws.on("error", (err) => {
      failure ??= err.message;
    });

    ws.on("close", (code, reasonBuf) => {
      const reason = reasonBuf.toString("utf8");
      const wasUp = this.#state === "up";
      if (this.#ws === ws) this.#ws = undefined;
      this.#stopSessionTimers();
      if (this.#state === "stopped") return;
      this.#lastError = failure ?? this.#sessionError ?? `closed ${String(code)}${reason === "" ? "" : ` ${reason}`}`;
      this.#sessionError = undefined;
      const fields = { sandboxId: this.#o.sandboxId, code, reason, error: this.#lastError };
      if (wasUp) this.#log.warn("control session lost", fields);
      else this.#log.warn("control session attempt failed", { ...fields, attempt: this.#attempts });
      this.#setState("down");
      if (wasUp) this.#armGrace();
      this.#retry();
    });
  }

  #accepts(): string[] {
    return [...(this.#onHostAddresses === undefined ? [] : [ACCEPTS_HOST_ADDRESSES]), ...(this.#secrets === undefined ? [] : [ACCEPTS_SECRETS])];
  }

  #handle(ws: WebSocket, m: GatewayMessage): void {
    if (m.type === "welcome") {
      if (this.#state === "up" || m.sandboxId !== this.#o.sandboxId || m.generation !== this.#o.generation) {
        this.#protocolError(ws, "unexpected welcome");
        return;
      }
      clearTimeout(this.#connectTimer);
      clearTimeout(this.#graceTimer);
      this.#graceTimer = undefined;
      this.#attempt = 0;
      this.#lastUpAt = Date.now();
      this.#lastError = null;
      this.#setState("up");
      this.#log.info("control session up", { sandboxId: this.#o.sandboxId, generation: this.#o.generation, sessionId: m.sessionId });
      this.#heartbeatTimer = setInterval(() => this.#tick(ws), this.#o.heartbeatMs);
      this.#sendHeartbeat();
      for (const event of this.#auditQueue.splice(0)) this.#send({ type: "audit", event });
      return;
    }
    if (this.#state !== "up") {
      this.#protocolError(ws, `${m.type} before welcome`);
      return;
    }
    if (m.type === "lockdown") {
      // Error means closed: the gateway says so over the session, without Docker.
      this.#policy.seal(`gateway_${m.reason}`);
      // No value outlives the boundary.
      this.#secrets?.clear();
      this.#log.error("lockdown ordered by the gateway: denying all egress for good", { sandboxId: this.#o.sandboxId, reason: m.reason });
      this.#emit();
      this.#sendHeartbeat();
      return;
    }
    if (m.type === "hostAddresses") {
      const bad = m.addresses.find((a) => parseIp(a) === null);
      if (bad !== undefined || this.#onHostAddresses === undefined) {
        this.#protocolError(ws, bad === undefined ? "hostAddresses not accepted" : `hostAddresses: not an IP address: ${JSON.stringify(bad)}`);
        return;
      }
      this.#onHostAddresses(m.addresses);
      return;
    }
    if (m.type === "secrets") {
      if (this.#secrets === undefined) {
        this.#protocolError(ws, "secrets not accepted");
        return;
      }
      // A gateway lockdown is final: no value is taken in again.
      if (this.#policy.sealed) return;
      const values = new Map(Object.entries(m.secrets).map(([name, b64]) => [name, Buffer.from(b64, "base64")]));
      const installed = this.#secrets.replace(m.version, values);
      // Names and the version only: the message is the one that carries values.
      this.#log.info("secrets received", { sandboxId: this.#o.sandboxId, version: m.version, installed, names: [...values.keys()].sort() });
      this.#send({ type: "secretsAck", version: this.#secrets.version ?? m.version });
      return;
    }
    const checked = policyFromObject(m.policy);
    if (!checked.ok) {
      this.#protocolError(ws, `pushed policy invalid: ${checked.errors.slice(0, 3).join("; ")}`);
      return;
    }
    const applied = this.#policy.replace(checked.policy, m.revision);
    // Only a policy the gateway confirmed over an authenticated session lifts a lockdown.
    const wasLocked = this.#policy.lockdownReason() !== null;
    this.#policy.unlock();
    // What the new revision does not allow is closed before the ack says it is enforced.
    const closedNow = this.#revoke();
    const enforced = this.#policy.held()?.revision ?? m.revision;
    // A re-push of the revision already held (a new session: the first ack may have been
    // lost with the old one) reports what applying that revision closed, not just now.
    let closed = closedNow;
    if (applied) this.#closedByRevision = { revision: m.revision, closed: closedNow };
    else if (this.#closedByRevision?.revision === enforced) closed = this.#closedByRevision.closed += closedNow;
    this.#log.info("policy pushed", { sandboxId: this.#o.sandboxId, revision: m.revision, applied, enforcedRevision: enforced, lockdownLifted: wasLocked, connectionsClosed: closed });
    this.#send({ type: "ack", revision: enforced, applied, closed });
    this.#sendHeartbeat();
  }

  #tick(ws: WebSocket): void {
    if (ws.readyState !== WebSocket.OPEN) return;
    if (Date.now() - this.#lastHeard > this.#o.deadAfterMs) {
      this.#sessionError = `nothing heard from the gateway for ${String(this.#o.deadAfterMs)} ms`;
      ws.terminate();
      return;
    }
    ws.ping();
    this.#sendHeartbeat(false);
  }

  /** The full heartbeat; unless forced, only when its content changed or the refresh is due. */
  #sendHeartbeat(force = true): void {
    const beat = {
      type: "heartbeat",
      enforcedRevision: this.#policy.held()?.revision ?? null,
      proxy: this.#proxyListening() ? "listening" : "not_listening",
      lockdown: this.#policy.lockdownReason() !== null,
      auditDropped: this.#auditDropped,
    } as const;
    const key = `${String(beat.enforcedRevision)} ${beat.proxy} ${String(beat.lockdown)} ${String(beat.auditDropped)}`;
    const now = Date.now();
    if (!force && this.#lastBeat?.key === key && now - this.#lastBeat.at < this.#o.heartbeatRefreshMs) return;
    this.#lastBeat = { key, at: now };
    this.#send(beat);
  }

  #send(m: SupervisorMessage): void {
    const ws = this.#ws;
    if (ws?.readyState === WebSocket.OPEN) ws.send(JSON.stringify(m));
  }

  #protocolError(ws: WebSocket, error: string): void {
    this.#sessionError = `protocol error: ${error}`;
    this.#log.error("control session: malformed message from the gateway; closing", { sandboxId: this.#o.sandboxId, error });
    ws.close(CLOSE.malformed, "malformed message");
    setTimeout(() => ws.terminate(), 1000).unref();
  }

  #retry(): void {
    if (this.#state === "stopped" || this.#retryTimer !== undefined) return;
    const delay = backoffDelay(this.#attempt++, this.#o.random(), sessionBackoff(this.#o.backoffInitialMs, this.#o.backoffMaxMs));
    this.#retryTimer = setTimeout(() => this.#connect(), delay);
  }

  #armGrace(): void {
    if (this.#graceTimer !== undefined || this.#policy.lockdownReason() !== null) return;
    this.#graceTimer = setTimeout(() => {
      this.#graceTimer = undefined;
      if (this.#state === "up" || this.#state === "stopped") return;
      this.#policy.lock(LOCKDOWN_SESSION_LOST);
      // The values come back with the policy over the next authenticated session.
      this.#secrets?.clear();
      this.#log.error("control session down past the grace period: denying all egress", { sandboxId: this.#o.sandboxId, graceMs: this.#o.graceMs, error: this.#lastError });
      this.#emit();
    }, this.#o.graceMs);
  }

  #stopSessionTimers(): void {
    clearInterval(this.#heartbeatTimer);
    clearTimeout(this.#connectTimer);
    this.#lastBeat = undefined;
    this.#heartbeatTimer = undefined;
    this.#connectTimer = undefined;
  }

  #setState(s: SessionState): void {
    if (this.#state === s) return;
    this.#state = s;
    this.#emit();
  }

  #emit(): void {
    const s = this.status();
    for (const l of this.#listeners) l(s);
  }
}
