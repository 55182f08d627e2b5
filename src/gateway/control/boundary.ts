// Boundary health per sandbox, from the gateway's side of the control session: what
// policy revision it wants enforced, which one the supervisor reports enforcing, and
// whether that report is recent. Transport-free: the supervisor endpoint hands it
// authenticated sessions (SessionLink); policy only ever travels over those. The secrets
// those sessions carry are pushed and acked by secrets-push.ts; this registry says when.
import { referencedSecrets, type Policy } from "../../policy/index.js";
import { ACCEPTS_HOST_ADDRESSES, CLOSE } from "../../protocol/wire.js";
import type { AckMessage, GatewayMessage, HeartbeatMessage, SecretsAckMessage, WireAuditEvent } from "../../protocol/wire.js";
import type { BoundaryHealth } from "../../api/responses.js";
import { VersionWaiters } from "../../util/version-waiters.js";
import { SecretsPusher, type SecretValuesSource, type SecretsPush } from "./secrets-push.js";

/** The API's shapes (src/api/responses.ts), named here for the code that builds them. */
export type { BoundaryHealth };

/** An authenticated control session as the registry sees it. */
export interface SessionLink {
  readonly sessionId: string;
  readonly sandboxId: string;
  readonly generation: number;
  /** Gateway messages beyond the first protocol the supervisor said it understands (hello.accepts). */
  readonly accepts?: ReadonlySet<string>;
  send(message: GatewayMessage): void;
  close(code: number, reason: string): void;
}

export type AuditListener = (sandboxId: string, generation: number, event: WireAuditEvent) => void;
export type ChangeListener = (health: BoundaryHealth) => void;

export interface WaitResult {
  reached: boolean;
  health: BoundaryHealth;
  /**
   * Connections the supervisor closed when it applied the revision (from its ack in this
   * session); null when not reached or the supervisor did not say.
   */
  connectionsClosed: number | null;
}

/** Acks remembered per session, for the closed count of a wait. */
const ACKS_KEPT = 32;

export interface BoundaryLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

export interface BoundaryOptions {
  /** No heartbeat or ping for this long makes the sandbox unhealthy. Default 6000: three 2 s pings. */
  heartbeatStaleMs?: number;
  /** No message or ping for this long closes the session (frees the slot after a half-open loss). Default 10000. */
  sessionIdleMs?: number;
  log?: BoundaryLog;
  /** The values of the named secrets that exist, read at send time (secrets-push.ts). Absent: none are sent. */
  secretValues?: SecretValuesSource;
}

interface Desired {
  generation: number;
  policy: Policy;
  revision: number;
}

interface Live {
  link: SessionLink;
  lastMessageAt: number;
  lastHeartbeatAt: number | null;
  /** Freshness as last reported to #changed; the sweep reports a change of it. */
  fresh: boolean;
  enforcedRevision: number | null;
  proxy: "listening" | "not_listening" | null;
  lockdown: boolean | null;
  /** Recent acks of this session, oldest first: revision → connections closed (null: not said). */
  acks: Map<number, number | null>;
}

/** All the registry keeps of one sandbox: forgetting it is one delete. */
interface Known {
  desired: Desired | null;
  live: Live | null;
  /** The health last reported to the change listeners, as a key: only changes are reported. */
  lastEmitted: string | null;
}

const quiet: BoundaryLog = { info: () => undefined, warn: () => undefined };

export class BoundaryRegistry {
  readonly #staleMs: number;
  readonly #idleMs: number;
  readonly #log: BoundaryLog;
  readonly #sandboxes = new Map<string, Known>();
  /** The sessions up now (each its sandbox's `live`): the sweep walks these, not every sandbox known. */
  readonly #sessions = new Set<Live>();
  /** Waits for a revision to be enforced, by sandbox. */
  readonly #waiters = new VersionWaiters<WaitResult>({
    reached: (sandboxId, revision) => this.#reached(sandboxId, revision),
    answer: (sandboxId, revision) => ({ reached: true, health: this.health(sandboxId), connectionsClosed: this.#closedFor(sandboxId, revision) }),
    missed: (sandboxId) => ({ reached: false, health: this.health(sandboxId), connectionsClosed: null }),
  });
  readonly #auditListeners = new Set<AuditListener>();
  readonly #changeListeners = new Set<ChangeListener>();
  #closed = false;
  /**
   * One timer for every session (staleness and idle close), not two per session re-armed
   * on each message: an idle fleet of N supervisors costs N pings and one sweep.
   */
  #sweepTimer: NodeJS.Timeout | undefined;
  #hostAddresses: readonly string[] | null = null;
  readonly #secrets: SecretsPusher;

  constructor(opts: BoundaryOptions = {}) {
    this.#staleMs = opts.heartbeatStaleMs ?? 6000;
    this.#idleMs = opts.sessionIdleMs ?? 10_000;
    this.#log = opts.log ?? quiet;
    this.#secrets = new SecretsPusher(opts.secretValues, this.#log, (sandboxId) => this.#liveOf(sandboxId)?.link);
  }

  /** How often the sweep runs: a quarter of the shorter deadline, at most 1 s. */
  get sweepMs(): number {
    return Math.max(10, Math.min(1000, Math.floor(Math.min(this.#staleMs, this.#idleMs) / 4)));
  }

  // ---- API for the lifecycle service ----

  /**
   * Records the policy this launch must enforce and pushes it to a live session of the same
   * generation. A session of an older generation is closed (it belongs to a stale launch).
   * Within one generation revisions only move forward; returns false when ignored.
   */
  setDesired(sandboxId: string, generation: number, policy: Policy, revision: number): boolean {
    if (!Number.isSafeInteger(revision) || revision < 0) throw new TypeError(`policy revision must be a non-negative integer, got ${String(revision)}`);
    const prev = this.#desiredOf(sandboxId);
    if (prev !== undefined && prev.generation > generation) return false;
    if (prev !== undefined && prev.generation === generation && prev.revision > revision) return false;
    this.#known(sandboxId).desired = { generation, policy, revision };
    const live = this.#liveOf(sandboxId);
    if (live !== undefined) {
      if (live.link.generation !== generation) this.disconnect(sandboxId, "superseded by a newer launch");
      else {
        // Values first: by the time the supervisor acks the revision, it holds what it binds.
        this.#secrets.send(live.link, policy);
        live.link.send({ type: "policy", revision, policy: policy as unknown as Record<string, unknown> });
      }
    }
    this.#changed(sandboxId);
    return true;
  }

  /**
   * The gateway host's addresses, whole: sent to every live session that accepts them now,
   * and to each session after its welcome from now on.
   */
  setHostAddresses(addresses: readonly string[]): void {
    this.#hostAddresses = [...addresses];
    for (const live of this.#sessions) this.#sendHostAddresses(live.link);
  }

  #sendHostAddresses(link: SessionLink): void {
    if (this.#hostAddresses === null || link.accepts?.has(ACCEPTS_HOST_ADDRESSES) !== true) return;
    link.send({ type: "hostAddresses", addresses: [...this.#hostAddresses] });
  }

  /**
   * Sends every live session whose policy references the secret its new set of values (after
   * `secret set` or `secret delete`); returns the pushes, to wait for their acks.
   */
  secretChanged(name: string): SecretsPush[] {
    const pushed: SecretsPush[] = [];
    for (const live of this.#sessions) {
      const desired = this.#desiredOf(live.link.sandboxId);
      if (desired?.generation !== live.link.generation || !referencedSecrets(desired.policy).includes(name)) continue;
      const version = this.#secrets.send(live.link, desired.policy);
      if (version !== null) pushed.push({ sandboxId: live.link.sandboxId, version });
    }
    return pushed;
  }

  /** Resolves true once the sandbox's supervisor acked secrets `version` (or newer), false after timeoutMs. */
  waitForSecrets(sandboxId: string, version: number, timeoutMs: number): Promise<boolean> {
    return this.#secrets.wait(sandboxId, version, timeoutMs);
  }

  health(sandboxId: string): BoundaryHealth {
    const desired = this.#desiredOf(sandboxId);
    const live = this.#liveOf(sandboxId);
    const desiredRevision = desired?.revision ?? null;
    if (live === undefined) {
      return {
        sandboxId,
        session: "down",
        generation: null,
        lastHeartbeatAt: null,
        enforcedRevision: null,
        desiredRevision,
        proxy: null,
        lockdown: null,
        healthy: false,
        problem: "no control session",
      };
    }
    const fresh = this.#fresh(live, Date.now());
    let problem: string | null = null;
    if (desired === undefined) problem = "no desired policy set";
    else if (desired.generation !== live.link.generation) problem = "session belongs to another generation";
    else if (live.enforcedRevision === null) problem = "policy not acknowledged yet";
    else if (!fresh) problem = "heartbeat stale";
    else if (live.enforcedRevision !== desired.revision) problem = `enforcing revision ${String(live.enforcedRevision)}, want ${String(desired.revision)}`;
    else if (live.lockdown === true) problem = "supervisor in lockdown";
    else if (live.proxy !== "listening") problem = "proxy not listening";
    return {
      sandboxId,
      session: "up",
      generation: live.link.generation,
      lastHeartbeatAt: live.lastHeartbeatAt === null ? null : new Date(live.lastHeartbeatAt).toISOString(),
      enforcedRevision: live.enforcedRevision,
      desiredRevision,
      proxy: live.proxy,
      lockdown: live.lockdown,
      healthy: problem === null,
      problem,
    };
  }

  /** Resolves once a live session acknowledged `revision` (or newer), or after timeoutMs with reached=false. */
  waitForRevision(sandboxId: string, revision: number, timeoutMs: number): Promise<WaitResult> {
    return this.#waiters.wait(sandboxId, revision, timeoutMs);
  }

  onAudit(cb: AuditListener): () => void {
    this.#auditListeners.add(cb);
    return () => this.#auditListeners.delete(cb);
  }

  /** Called when session state, revisions, lockdown, proxy state or healthiness change (not on every heartbeat). */
  onChange(cb: ChangeListener): () => void {
    this.#changeListeners.add(cb);
    return () => this.#changeListeners.delete(cb);
  }

  /** Closes the live session, if any (stop). The supervisor will try to reconnect; `expected()` decides. */
  disconnect(sandboxId: string, reason = "disconnected by the gateway"): void {
    const live = this.#liveOf(sandboxId);
    if (live === undefined) return;
    this.#drop(live);
    live.link.close(CLOSE.superseded, reason);
  }

  /**
   * Fail closed over the session itself (no Docker needed): the supervisor is told
   * to deny all egress and close every connection, then the session is closed.
   * Its reconnects are refused while the sandbox is not live, so nothing lifts it.
   */
  lockdown(sandboxId: string, reason: string): void {
    const live = this.#liveOf(sandboxId);
    if (live === undefined) return;
    live.link.send({ type: "lockdown", reason });
    this.#log.info({ event: "supervisor_lockdown_sent", sandboxId, generation: live.link.generation, reason }, "lockdown sent to the supervisor");
    this.disconnect(sandboxId, reason);
  }

  /** Forgets everything about a sandbox (delete), locking its live session down first. */
  forget(sandboxId: string, reason = "sandbox_deleted"): void {
    this.lockdown(sandboxId, reason);
    this.#sandboxes.delete(sandboxId);
  }

  /**
   * The live session of a sandbox: its id and generation, null when there is none.
   * One session keeps its id while it stays up; a reconnect is a new session.
   */
  liveSession(sandboxId: string): { sessionId: string; generation: number } | null {
    const link = this.#liveOf(sandboxId)?.link;
    return link === undefined ? null : { sessionId: link.sessionId, generation: link.generation };
  }

  sandboxes(): string[] {
    return [...this.#sandboxes].filter(([, k]) => k.desired !== null || k.live !== null).map(([id]) => id);
  }

  close(): void {
    this.#closed = true;
    clearInterval(this.#sweepTimer);
    this.#sweepTimer = undefined;
    for (const live of [...this.#sessions]) {
      this.#drop(live);
      live.link.close(CLOSE.goingAway, "gateway shutting down");
    }
    this.#waiters.close();
    this.#secrets.close();
  }

  // ---- API for the supervisor endpoint ----

  /** Admits an authenticated session; refuses a second one for the same sandbox (the first is kept). */
  admit(link: SessionLink): { ok: true } | { ok: false; reason: "duplicate_session" | "gateway_closing" } {
    if (this.#closed) return { ok: false, reason: "gateway_closing" };
    if (this.#liveOf(link.sandboxId) !== undefined) return { ok: false, reason: "duplicate_session" };
    const live: Live = {
      link,
      lastMessageAt: Date.now(),
      lastHeartbeatAt: null,
      fresh: false,
      enforcedRevision: null,
      proxy: null,
      lockdown: null,
      acks: new Map(),
    };
    this.#known(link.sandboxId).live = live;
    this.#sessions.add(live);
    this.#armSweep();
    link.send({ type: "welcome", sessionId: link.sessionId, sandboxId: link.sandboxId, generation: link.generation });
    // Before the policy: by the time the supervisor acks it, it refuses today's host addresses.
    this.#sendHostAddresses(link);
    const desired = this.#desiredOf(link.sandboxId);
    // Re-push on every (re)connect: this is what lifts a supervisor's lockdown.
    if (desired?.generation === link.generation) {
      this.#secrets.send(link, desired.policy);
      link.send({ type: "policy", revision: desired.revision, policy: desired.policy as unknown as Record<string, unknown> });
    }
    this.#log.info({ event: "supervisor_session_up", sandboxId: link.sandboxId, generation: link.generation, sessionId: link.sessionId }, "supervisor session up");
    this.#changed(link.sandboxId);
    return { ok: true };
  }

  ack(link: SessionLink, msg: AckMessage): void {
    const live = this.#current(link);
    if (live === undefined) return;
    live.enforcedRevision = msg.revision;
    // A re-ack of a revision (a re-push) replaces the count: it is the latest application.
    live.acks.delete(msg.revision);
    live.acks.set(msg.revision, msg.closed ?? null);
    if (live.acks.size > ACKS_KEPT) live.acks.delete(live.acks.keys().next().value!);
    this.#touch(live);
    this.#changed(link.sandboxId);
  }

  secretsAck(link: SessionLink, msg: SecretsAckMessage): void {
    const live = this.#current(link);
    if (live === undefined) return;
    this.#touch(live);
    this.#secrets.acked(link, msg.version);
  }

  heartbeat(link: SessionLink, msg: HeartbeatMessage): void {
    const live = this.#current(link);
    if (live === undefined) return;
    // Enforcing counts only after an ack in this session; heartbeats then keep it current.
    if (live.enforcedRevision !== null) live.enforcedRevision = msg.enforcedRevision;
    live.proxy = msg.proxy;
    live.lockdown = msg.lockdown;
    this.#seen(live);
    this.#changed(link.sandboxId);
  }

  /**
   * A WebSocket ping of the session: liveness without content. The supervisor sends its
   * full heartbeat only when that changes, so this is the idle fleet's whole cost.
   */
  alive(link: SessionLink): void {
    const live = this.#current(link);
    if (live === undefined) return;
    const wasFresh = live.fresh;
    this.#seen(live);
    if (!wasFresh) this.#changed(link.sandboxId);
  }

  audit(link: SessionLink, event: WireAuditEvent): void {
    const live = this.#current(link);
    if (live === undefined) return;
    this.#touch(live);
    for (const cb of this.#auditListeners) {
      try {
        cb(link.sandboxId, link.generation, event);
      } catch (err) {
        this.#log.warn({ event: "audit_listener_failed", err }, "audit listener failed");
      }
    }
  }

  /** The transport closed. A link that was never admitted (or was replaced) is ignored. */
  detach(link: SessionLink, why: string): void {
    const live = this.#current(link);
    if (live === undefined) return;
    this.#drop(live);
    this.#log.info({ event: "supervisor_session_down", sandboxId: link.sandboxId, generation: link.generation, sessionId: link.sessionId, why }, "supervisor session down");
  }

  // ---- internals ----

  #known(sandboxId: string): Known {
    let k = this.#sandboxes.get(sandboxId);
    if (k === undefined) this.#sandboxes.set(sandboxId, (k = { desired: null, live: null, lastEmitted: null }));
    return k;
  }

  #desiredOf(sandboxId: string): Desired | undefined {
    return this.#sandboxes.get(sandboxId)?.desired ?? undefined;
  }

  #liveOf(sandboxId: string): Live | undefined {
    return this.#sandboxes.get(sandboxId)?.live ?? undefined;
  }

  #current(link: SessionLink): Live | undefined {
    const live = this.#liveOf(link.sandboxId);
    return live?.link === link ? live : undefined;
  }

  #drop(live: Live): void {
    const k = this.#sandboxes.get(live.link.sandboxId);
    if (k?.live === live) k.live = null;
    this.#sessions.delete(live);
    if (this.#sessions.size === 0) {
      clearInterval(this.#sweepTimer);
      this.#sweepTimer = undefined;
    }
    this.#changed(live.link.sandboxId);
  }

  #touch(live: Live): void {
    live.lastMessageAt = Date.now();
  }

  /** A heartbeat or a ping: the session is alive now. */
  #seen(live: Live): void {
    const now = Date.now();
    live.lastMessageAt = now;
    live.lastHeartbeatAt = now;
    live.fresh = true;
  }

  #fresh(live: Live, now: number): boolean {
    return live.lastHeartbeatAt !== null && now - live.lastHeartbeatAt < this.#staleMs;
  }

  #armSweep(): void {
    if (this.#sweepTimer !== undefined) return;
    this.#sweepTimer = setInterval(() => this.#sweep(), this.sweepMs);
    this.#sweepTimer.unref();
  }

  /** Silent sessions are closed (their slot freed); sessions that just went stale are reported. */
  #sweep(): void {
    const now = Date.now();
    for (const live of [...this.#sessions]) {
      if (now - live.lastMessageAt >= this.#idleMs) {
        this.#log.warn({ event: "supervisor_session_idle", sandboxId: live.link.sandboxId, sessionId: live.link.sessionId, idleMs: this.#idleMs }, "supervisor session silent: closing it");
        this.#drop(live);
        live.link.close(CLOSE.idle, "no heartbeat");
        continue;
      }
      if (live.fresh && !this.#fresh(live, now)) {
        live.fresh = false;
        this.#changed(live.link.sandboxId);
      }
    }
  }

  #reached(sandboxId: string, revision: number): boolean {
    const live = this.#liveOf(sandboxId);
    const desired = this.#desiredOf(sandboxId);
    if (live === undefined || live.enforcedRevision === null) return false;
    if (desired !== undefined && desired.generation !== live.link.generation) return false;
    return live.enforcedRevision >= revision && live.lockdown !== true;
  }

  /**
   * Closed count of the first ack in this session that covers `revision` (its own, or a
   * newer one that superseded it); the same-revision ack wins.
   */
  #closedFor(sandboxId: string, revision: number): number | null {
    const live = this.#liveOf(sandboxId);
    if (live === undefined) return null;
    if (live.acks.has(revision)) return live.acks.get(revision)!;
    let best: number | undefined;
    for (const r of live.acks.keys()) if (r > revision && (best === undefined || r < best)) best = r;
    return best === undefined ? null : live.acks.get(best)!;
  }

  #changed(sandboxId: string): void {
    this.#waiters.advance(sandboxId);
    if (this.#changeListeners.size === 0) return;
    const h = this.health(sandboxId);
    const key = JSON.stringify([h.session, h.generation, h.enforcedRevision, h.desiredRevision, h.proxy, h.lockdown, h.healthy, h.problem]);
    const k = this.#sandboxes.get(sandboxId);
    if (k?.lastEmitted === key) return;
    if (k !== undefined) k.lastEmitted = key;
    for (const cb of this.#changeListeners) {
      try {
        cb(h);
      } catch (err) {
        this.#log.warn({ event: "change_listener_failed", err }, "change listener failed");
      }
    }
  }
}
