// The Store (src/store/contract.ts) on PostgreSQL: the fleet's shared state, which several
// gateways read and write at once. Every operation is one statement or one transaction
// on a bounded pool; a change and its event commit in one transaction; compare-and-sets
// are single UPDATEs whose WHERE names the expected state (sandboxes.ts). Events reach
// listeners through the EventFeed, in sequence order, whether this gateway or another
// one committed them (LISTEN on a connection of its own, re-established when it drops).
// An unreachable database is a StoreUnavailableError (the API's 503), never a crash;
// the connection URL, which may carry a password, is in no error or log line.

import pg from "pg";
import type { RuntimeRecord } from "../../driver/contract.js";
import type { Phase } from "../../lifecycle/phases.js";
import { policyHash, type Policy } from "../../policy/index.js";
import { SandgateError } from "../../util/errors.js";
import {
  DuplicateNameError,
  StaleRevisionError,
  type AuditRecord,
  type EgressTotals,
  type EventRecord,
  type ExpiringRow,
  type FleetHosts,
  type ListQuery,
  type LogQuery,
  type NewSandbox,
  type PolicyRevision,
  type ProposalDecision,
  type ProposalRecord,
  type ProposalState,
  type Retention,
  type SandboxRecord,
  type SandboxRef,
  type SandboxSummary,
  type SealedSecret,
  type SecretRecord,
  type SecretSummary,
  type Store,
  type Transaction,
  type TransitionWrite,
} from "../contract.js";
import { EventFeed } from "./event-feed.js";
import { listHosts } from "./hosts.js";
import * as logs from "./logs.js";
import * as records from "./records.js";
import * as sandboxes from "./sandboxes.js";
import { migrate } from "./schema.js";
import { TYPES, sqlState, storeError, type Queryable } from "./sql.js";

export interface PostgresStoreOptions {
  /** Connections the pool opens at most (default 10); one more is kept for LISTEN. */
  maxConnections?: number;
  /** How long an operation waits for a free connection, or to connect, before StoreUnavailableError (default 10 s). */
  connectTimeoutMs?: number;
  now?: () => Date;
  /** Errors that have no caller to go to (a dropped idle connection, a failed catch-up). */
  onError?: (err: Error) => void;
  /**
   * The host lease this gateway holds (lease.ts): every write checks, in its transaction,
   * that the lease's epoch is still this one (else LeaseLostError, nothing written, and
   * `onLost`). The check holds the lease's row until the commit, so a gateway taking the
   * lease over waits for writes in flight and every later write of the old holder fails.
   */
  fence?: { host: string; epoch: number; onLost?: (why: string) => void };
}

/** A write by a gateway that no longer holds its host's lease: refused, nothing written. */
export class LeaseLostError extends SandgateError {
  override readonly name = "LeaseLostError";
  constructor(host: string, epoch: number, now: number | null) {
    super(`this gateway no longer holds the lease of host ${host} (its epoch ${epoch}, now ${now ?? "none"}): another gateway drives it`, "unavailable");
  }
}

const RELISTEN_MS = [100, 250, 500, 1000, 2000, 5000];

export class PostgresStore implements Store {
  readonly #pool: pg.Pool;
  readonly #config: pg.ClientConfig;
  readonly #now: () => Date;
  readonly #onError: (err: Error) => void;
  readonly #feed: EventFeed;
  readonly #fence: PostgresStoreOptions["fence"];
  #listener: pg.Client | null = null;
  readonly #secretListeners = new Set<(name: string | null) => void>();
  #relisten: NodeJS.Timeout | null = null;
  #closed = false;

  private constructor(pool: pg.Pool, config: pg.ClientConfig, startAfter: number, opts: PostgresStoreOptions) {
    this.#pool = pool;
    this.#config = config;
    this.#now = opts.now ?? (() => new Date());
    this.#onError = opts.onError ?? (() => undefined);
    this.#fence = opts.fence;
    this.#feed = new EventFeed((after, limit) => logs.eventsAfter(this.#pool, after, limit), startAfter, (err) => this.#onError(storeError(err)));
  }

  /** Connect, bring the schema up to date and start listening; StoreUnavailableError when the database cannot be reached. */
  static async open(url: string, opts: PostgresStoreOptions = {}): Promise<PostgresStore> {
    const config: pg.ClientConfig = { connectionString: url, types: TYPES, application_name: "sandgate", connectionTimeoutMillis: opts.connectTimeoutMs ?? 10_000 };
    const pool = new pg.Pool({ ...config, max: opts.maxConnections ?? 10, idleTimeoutMillis: 30_000 });
    // An idle connection that breaks emits here; unhandled, it would end the process.
    pool.on("error", (err) => opts.onError?.(storeError(err)));
    try {
      const client = await pool.connect();
      const onError = (): void => undefined;
      client.on("error", onError);
      try {
        await migrate(client);
      } finally {
        client.off("error", onError);
        client.release();
      }
      const store = new PostgresStore(pool, config, await logs.lastSeq(pool), opts);
      await store.#listen();
      return store;
    } catch (err) {
      await pool.end().catch(() => undefined);
      throw storeError(err);
    }
  }

  get isOpen(): boolean {
    return !this.#closed;
  }

  /** The hosts sharing this database (hosts.ts). */
  readonly fleet: FleetHosts = { hosts: () => this.#op((db) => listHosts(db)) };

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#feed.clear();
    if (this.#relisten) clearTimeout(this.#relisten);
    const l = this.#listener;
    this.#listener = null;
    await l?.end().catch(() => undefined);
    await this.#pool.end().catch(() => undefined);
  }

  onEvent(listener: (e: EventRecord) => void): () => void {
    return this.#feed.subscribe(listener);
  }

  onSecretChange(listener: (name: string | null) => void): () => void {
    this.#secretListeners.add(listener);
    return () => this.#secretListeners.delete(listener);
  }

  #secretChanged(name: string | null): void {
    for (const l of this.#secretListeners) l(name);
  }

  /**
   * The LISTEN connection: every notification asks the feed to catch up. Throws when it
   * cannot connect (at open); once open, a lost connection is re-established in the
   * background, backing off, and each re-establishment catches up on what committed meanwhile.
   */
  async #listen(): Promise<void> {
    const client = new pg.Client(this.#config);
    client.on("notification", (n) => {
      if (n.channel === records.SECRETS_CHANNEL) this.#secretChanged(n.payload ?? null);
      else void this.#feed.notified(Number(n.payload));
    });
    const lost = (): void => {
      if (this.#listener !== client) return;
      this.#listener = null;
      client.end().catch(() => undefined);
      this.#relistenAfter(0);
    };
    client.on("error", lost);
    client.on("end", lost);
    try {
      await client.connect();
      await client.query(`LISTEN ${logs.EVENTS_CHANNEL}; LISTEN ${records.SECRETS_CHANNEL}`);
    } catch (err) {
      client.end().catch(() => undefined);
      throw err;
    }
    if (this.#closed) {
      await client.end().catch(() => undefined);
      return;
    }
    this.#listener = client;
  }

  #relistenAfter(attempt: number): void {
    if (this.#closed || this.#relisten) return;
    this.#relisten = setTimeout(() => {
      this.#relisten = null;
      this.#listen().then(
        () => {
          void this.#feed.notified();
          // What changed while nobody listened is unknown: every secret is read again.
          this.#secretChanged(null);
        },
        (err: unknown) => {
          this.#onError(storeError(err));
          this.#relistenAfter(attempt + 1);
        },
      );
    }, RELISTEN_MS[Math.min(attempt, RELISTEN_MS.length - 1)]);
    this.#relisten.unref();
  }

  #stamp(): string {
    return this.#now().toISOString();
  }

  /** One statement on the pool. */
  async #op<T>(fn: (db: Queryable) => Promise<T>): Promise<T> {
    if (this.#closed) throw new SandgateError("the state store is closed", "unavailable");
    try {
      return await fn(this.#pool);
    } catch (err) {
      throw storeError(err);
    }
  }

  /** One transaction on one connection; the events it wrote go out once it committed. */
  async #tx<T>(fn: (client: pg.PoolClient, events: EventRecord[]) => Promise<T>): Promise<T> {
    if (this.#closed) throw new SandgateError("the state store is closed", "unavailable");
    let client: pg.PoolClient;
    try {
      client = await this.#pool.connect();
    } catch (err) {
      throw storeError(err);
    }
    const events: EventRecord[] = [];
    let broken = false;
    // A checked-out client's connection error between queries is emitted on the client; with
    // no listener it would be an uncaught exception (pg-pool leaves it to the borrower).
    const onError = (): void => {
      broken = true;
    };
    client.on("error", onError);
    let result: T;
    try {
      await client.query("BEGIN");
      await this.#checkFence(client);
      result = await fn(client, events);
      await client.query("COMMIT");
    } catch (err) {
      await client.query("ROLLBACK").catch(() => {
        broken = true;
      });
      throw storeError(err);
    } finally {
      client.off("error", onError);
      client.release(broken);
    }
    await this.#feed.committed(events);
    return result;
  }

  async #checkFence(tx: Queryable): Promise<void> {
    const f = this.#fence;
    if (f === undefined) return;
    const { rows } = await tx.query<{ epoch: number }>(`SELECT epoch FROM host_leases WHERE host = $1 FOR SHARE`, [f.host]);
    const now = rows[0]?.epoch ?? null;
    if (now === f.epoch) return;
    const err = new LeaseLostError(f.host, f.epoch, now);
    f.onLost?.(err.message);
    throw err;
  }

  /** A write outside a transaction of its own: one, so that it is fenced. */
  #write<T>(fn: (db: Queryable) => Promise<T>): Promise<T> {
    return this.#fence === undefined ? this.#op(fn) : this.#tx((tx) => fn(tx));
  }

  async #event(tx: Queryable, events: EventRecord[], e: Omit<EventRecord, "seq">): Promise<void> {
    events.push(await logs.insertEvent(tx, e));
  }

  // --- sandboxes ---

  createSandbox(input: NewSandbox): Promise<SandboxRecord> {
    const time = this.#stamp();
    return this.#tx(async (tx, events) => {
      try {
        await sandboxes.insertSandbox(tx, input, time);
      } catch (err) {
        if (sqlState(err) === "23505") throw new DuplicateNameError(`a sandbox named "${input.name}" already exists`);
        throw err;
      }
      await records.insertPolicy(tx, input.id, 1, input.policy, time, input.policySource ?? null);
      await this.#event(tx, events, { sandboxId: input.id, sandboxName: input.name, generation: 1, kind: "phase", oldPhase: null, newPhase: "Provisioning", reason: null, message: "created", data: null, time });
      return (await sandboxes.getSandbox(tx, input.id))!;
    });
  }

  get(idOrName: string): Promise<SandboxRecord | null> {
    return this.#op((db) => sandboxes.getSandbox(db, idOrName));
  }

  list(): Promise<SandboxRecord[]> {
    return this.#op((db) => sandboxes.listSandboxes(db));
  }

  listPage(q: ListQuery): Promise<SandboxRecord[]> {
    return this.#op((db) => sandboxes.listPage(db, q));
  }

  listSummaries(q: ListQuery): Promise<SandboxSummary[]> {
    return this.#op((db) => sandboxes.listSummaries(db, q));
  }

  transition(id: string, write: TransitionWrite): Promise<SandboxRecord | null> {
    const time = this.#stamp();
    return this.#tx(async (tx, events) => {
      const name = await sandboxes.casPhase(tx, id, write, time);
      if (name === null) return null;
      await this.#event(tx, events, {
        sandboxId: id,
        sandboxName: name,
        generation: write.next.generation,
        kind: "phase",
        oldPhase: write.expect.phase,
        newPhase: write.next.phase,
        reason: write.next.reason,
        message: write.message ?? null,
        data: null,
        time,
      });
      return sandboxes.getSandbox(tx, id);
    });
  }

  setRuntime(id: string, expect: { phase: Phase; generation: number }, runtime: RuntimeRecord | null): Promise<boolean> {
    return this.#write((db) => sandboxes.setRuntime(db, id, expect, runtime, this.#stamp()));
  }

  settleTeardown(id: string, generation: number): Promise<boolean> {
    return this.#write((db) => sandboxes.settleTeardown(db, id, generation, this.#stamp()));
  }

  deleteSandbox(id: string, expect: { generation: number }): Promise<boolean> {
    const time = this.#stamp();
    return this.#tx(async (tx, events) => {
      const name = await sandboxes.deleteDeleting(tx, id, expect.generation);
      if (name === null) return false;
      await logs.deleteAuditOf(tx, id);
      await this.#event(tx, events, { sandboxId: id, sandboxName: name, generation: expect.generation, kind: "deleted", oldPhase: "Deleting", newPhase: null, reason: null, message: "deleted", data: null, time });
      return true;
    });
  }

  countByPhase(): Promise<Record<Phase, number>> {
    return this.#op((db) => sandboxes.countByPhase(db));
  }

  // --- expiry columns ---

  expiringSandboxes(): Promise<ExpiringRow[]> {
    return this.#op((db) => sandboxes.expiringSandboxes(db));
  }

  setTtlDeadline(id: string, generation: number, deadline: string | null): Promise<boolean> {
    return this.#write((db) => sandboxes.setTtlDeadline(db, id, generation, deadline));
  }

  recordActivity(entries: Iterable<[id: string, time: string]>): Promise<void> {
    const list = [...entries];
    return this.#write((db) => sandboxes.recordActivity(db, list));
  }

  expiryColumns(id: string): Promise<{ ttlDeadline: string | null; lastActive: string | null } | null> {
    return this.#op((db) => sandboxes.expiryColumns(db, id));
  }

  // --- policy revisions ---

  policy(sandboxId: string): Promise<PolicyRevision | null> {
    return this.#op((db) => records.activePolicy(db, sandboxId));
  }

  addPolicy(
    sandbox: SandboxRef,
    policy: Policy,
    source: string | null = null,
    opts: { expectRevision?: number; within?: (revision: number, tx: Transaction) => Promise<void> } = {},
  ): Promise<number> {
    return this.#tx(async (tx, events) => {
      const active = await records.lockActiveRevision(tx, sandbox.id);
      if (active === null) throw new SandgateError(`sandbox "${sandbox.name}" no longer exists`, "not_found");
      if (opts.expectRevision !== undefined && active !== opts.expectRevision) throw new StaleRevisionError(opts.expectRevision, active);
      const revision = active + 1;
      await records.insertPolicy(tx, sandbox.id, revision, policy, this.#stamp(), source);
      const handle = this.#transaction(tx, events);
      await handle.info(sandbox, `policy revision ${revision} accepted`, { revision, hash: policyHash(policy) });
      await opts.within?.(revision, handle);
      return revision;
    });
  }

  // --- events ---

  transact<T>(fn: (tx: Transaction) => Promise<T>): Promise<T> {
    return this.#tx((tx, events) => fn(this.#transaction(tx, events)));
  }

  #transaction(tx: Queryable, events: EventRecord[]): Transaction {
    return {
      info: (sandbox, message, data) =>
        this.#event(tx, events, { sandboxId: sandbox.id, sandboxName: sandbox.name, generation: sandbox.generation, kind: "info", oldPhase: null, newPhase: null, reason: null, message, data: data ?? null, time: this.#stamp() }),
      insertProposal: (p) => records.insertProposal(tx, p),
      getProposal: (sandboxId, id) => records.getProposal(tx, sandboxId, id),
      listProposals: (sandboxId, state) => records.listProposals(tx, sandboxId, state),
      countPendingProposals: (sandboxId) => records.countPending(tx, sandboxId),
      decideProposal: (sandboxId, id, d) => records.decideProposal(tx, sandboxId, id, d),
      pruneDecidedProposals: (sandboxId, keep) => records.pruneDecided(tx, sandboxId, keep),
      appendAudit: (recs) => logs.appendAudit(tx, recs),
    };
  }

  async appendEvent(sandbox: SandboxRef, kind: "info", message: string, data?: unknown): Promise<EventRecord> {
    return this.#tx(async (tx, events) => {
      await this.#event(tx, events, { sandboxId: sandbox.id, sandboxName: sandbox.name, generation: sandbox.generation, kind, oldPhase: null, newPhase: null, reason: null, message, data: data ?? null, time: this.#stamp() });
      return events[0]!;
    });
  }

  enteredPhaseAt(sandboxId: string, phase: Phase): Promise<string | null> {
    return this.#write((db) => logs.enteredPhaseAt(db, sandboxId, phase));
  }

  events(sandboxId: string, q: LogQuery = {}): Promise<EventRecord[]> {
    return this.#op((db) => logs.eventWindow(db, sandboxId, q));
  }

  eventsAfter(afterSeq: number, limit = 1000): Promise<EventRecord[]> {
    return this.#op((db) => logs.eventsAfter(db, afterSeq, limit));
  }

  // --- audit ---

  audit(sandboxId: string, q: LogQuery & { decision?: string; since?: string } = {}): Promise<AuditRecord[]> {
    return this.#op((db) => logs.auditWindow(db, sandboxId, q));
  }

  appendAudit(recs: Omit<AuditRecord, "seq">[]): Promise<void> {
    return this.#write((db) => logs.appendAudit(db, recs));
  }

  egressTotals(sandboxId: string, generation: number): Promise<EgressTotals> {
    return this.#op((db) => logs.egressTotals(db, sandboxId, generation));
  }

  prune(audit: Retention, events: Retention): Promise<{ audit: number; events: number }> {
    const now = this.#now().getTime();
    const auditCut = new Date(now - audit.maxAgeMs).toISOString();
    const eventCut = new Date(now - events.maxAgeMs).toISOString();
    return this.#tx(async (tx) => ({ audit: await logs.pruneAudit(tx, auditCut, audit.perSandbox), events: await logs.pruneEvents(tx, eventCut, events.perSandbox) }));
  }

  // --- proposals ---

  insertProposal(p: Pick<ProposalRecord, "id" | "sandboxId" | "input" | "hash" | "baseRevision" | "proposedBy" | "reason" | "createdAt">): Promise<boolean> {
    return this.#write((db) => records.insertProposal(db, p));
  }

  getProposal(sandboxId: string, id: string): Promise<ProposalRecord | null> {
    return this.#op((db) => records.getProposal(db, sandboxId, id));
  }

  listProposals(sandboxId: string, state?: ProposalState): Promise<ProposalRecord[]> {
    return this.#op((db) => records.listProposals(db, sandboxId, state));
  }

  countPendingProposals(sandboxId: string): Promise<number> {
    return this.#op((db) => records.countPending(db, sandboxId));
  }

  decideProposal(sandboxId: string, id: string, d: ProposalDecision): Promise<boolean> {
    return this.#write((db) => records.decideProposal(db, sandboxId, id, d));
  }

  pruneDecidedProposals(sandboxId: string, keep: number): Promise<number> {
    return this.#op((db) => records.pruneDecided(db, sandboxId, keep));
  }

  // --- secrets ---

  putSecret(name: string, sealed: SealedSecret, time: string): Promise<number> {
    return this.#write((db) => records.putSecret(db, name, sealed, time));
  }

  getSecret(name: string): Promise<SecretRecord | null> {
    return this.#op((db) => records.getSecret(db, name));
  }

  listSecrets(): Promise<SecretSummary[]> {
    return this.#op((db) => records.listSecrets(db));
  }

  deleteSecret(name: string): Promise<boolean> {
    return this.#write((db) => records.deleteSecret(db, name));
  }
}
