// The gateway's state on SQLite (WAL), composed of one module per table
// (sandboxes-store.ts, events-store.ts, audit-store.ts, policies-store.ts,
// proposals-store.ts, secrets-store.ts, expiry-store.ts, aggregates.ts). This class owns
// the database and what spans tables: every phase change is a compare-and-set on
// (id, generation, phase) written in the same transaction as its event, so two writers
// can never both win and no change goes unrecorded; events reach listeners only once
// their transaction commits.

import Database from "better-sqlite3";
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import type { RuntimeRecord } from "../driver/contract.js";
import type { Phase } from "../lifecycle/phases.js";
import { policyHash, type Policy } from "../policy/index.js";
import { migrate } from "./migrations.js";
import { countByPhase, egressTotals } from "./aggregates.js";
import { appendAudit, auditWindow, deleteAuditOf, pruneAudit } from "./audit-store.js";
import {
  DuplicateNameError,
  StaleRevisionError,
  type AuditRecord,
  type EventRecord,
  type Transaction,
  type ListQuery,
  type LogQuery,
  type NewSandbox,
  type EgressTotals,
  type ExpiringRow,
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
  type TransitionWrite,
} from "./contract.js";
import { enteredPhaseAt, eventWindow, eventsAfter, insertEvent, pruneEvents } from "./events-store.js";
import { expiryColumns, expiringSandboxes, recordActivity, setTtlDeadline } from "./expiry-store.js";
import { activePolicy, activeRevision, insertPolicy } from "./policies-store.js";
import { countPending, decideProposal, getProposal, insertProposal, listProposals, pruneDecided } from "./proposals-store.js";
import * as sandboxes from "./sandboxes-store.js";
import { deleteSecret, getSecret, listSecrets, putSecret } from "./secrets-store.js";

/** The records and errors, for the tests and tools that import them from here (the gateway imports src/store/contract.ts). */
export { DuplicateNameError, StaleRevisionError };
export type { AuditRecord, EventKind, EventRecord, InfoWriter, ListQuery, LogQuery, PolicyRevision, Retention, SandboxRecord, SandboxSummary, TransitionWrite } from "./contract.js";

/** The Store (src/store/contract.ts) on SQLite: the gateway's embedded store. */
export class SqliteStore implements Store {
  readonly db: Database.Database;
  private readonly listeners = new Set<(e: EventRecord) => void>();
  private readonly now: () => Date;
  /**
   * While a transaction is open (transact, addPolicy), its end. The one connection is
   * inside it across the awaits of its function, so every other operation waits for it:
   * it would otherwise read uncommitted rows or write into that transaction.
   */
  #txEnd: Promise<void> | null = null;

  private constructor(db: Database.Database, now: () => Date) {
    this.db = db;
    this.now = now;
  }

  static open(path: string, opts: { now?: () => Date } = {}): SqliteStore {
    if (path !== ":memory:") mkdirSync(dirname(path), { recursive: true });
    const db = new Database(path);
    db.pragma("journal_mode = WAL");
    // FULL: a committed transition survives power loss, not only a process crash.
    db.pragma("synchronous = FULL");
    db.pragma("busy_timeout = 5000");
    migrate(db);
    return new SqliteStore(db, opts.now ?? (() => new Date()));
  }

  close(): void {
    this.listeners.clear();
    if (this.db.open) this.db.close();
  }

  /** One host: no fleet. */
  readonly fleet = null;

  /** False once closed: a last write at shutdown asks first. */
  get isOpen(): boolean {
    return this.db.open;
  }

  /** Called after every committed event; used for watch streams. */
  onEvent(listener: (e: EventRecord) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * Run one synchronous operation (each is atomic: better-sqlite3 is synchronous). With no
   * transaction open it runs now, in the caller's turn, as the synchronous store did: a
   * check the caller made just before (the recovery's commit-time evidence) still holds
   * at the write. Otherwise once the transaction has ended.
   */
  #run<T>(op: () => T): Promise<T> {
    if (this.#txEnd === null) {
      try {
        return Promise.resolve(op());
      } catch (err) {
        return Promise.reject(err instanceof Error ? err : new Error(String(err)));
      }
    }
    return this.#afterTransaction(op);
  }

  async #afterTransaction<T>(op: () => T): Promise<T> {
    while (this.#txEnd) await this.#txEnd;
    return op();
  }

  private emit(e: EventRecord): void {
    for (const l of this.listeners) l(e);
  }

  private stamp(): string {
    return this.now().toISOString();
  }

  // --- sandboxes (with their labels, first policy revision and phase events) ---

  /** A new sandbox at generation 1, Provisioning, with its first policy revision. */
  createSandbox(input: NewSandbox): Promise<SandboxRecord> {
    return this.#run(() => {
      const time = this.stamp();
      let event: EventRecord | undefined;
      try {
        this.db.transaction(() => {
          sandboxes.insertSandbox(this.db, input, time);
          insertPolicy(this.db, input.id, 1, input.policy, time, input.policySource ?? null);
          event = insertEvent(this.db, {
            sandboxId: input.id,
            sandboxName: input.name,
            generation: 1,
            kind: "phase",
            oldPhase: null,
            newPhase: "Provisioning",
            reason: null,
            message: "created",
            data: null,
            time,
          });
        })();
      } catch (err) {
        if (err instanceof Error && "code" in err && err.code === "SQLITE_CONSTRAINT_UNIQUE") {
          throw new DuplicateNameError(`a sandbox named "${input.name}" already exists`);
        }
        throw err;
      }
      if (event) this.emit(event);
      return sandboxes.getSandbox(this.db, input.id)!;
    });
  }

  /** Look up by id or by name. */
  get(idOrName: string): Promise<SandboxRecord | null> {
    return this.#run(() => sandboxes.getSandbox(this.db, idOrName));
  }

  list(): Promise<SandboxRecord[]> {
    return this.#run(() => sandboxes.listSandboxes(this.db));
  }

  /** A page by name (see ListQuery). */
  listPage(q: ListQuery): Promise<SandboxRecord[]> {
    return this.#run(() => sandboxes.listPage(this.db, q));
  }

  /** listPage's rows with only the columns a list shows (no spec parsed). */
  listSummaries(q: ListQuery): Promise<SandboxSummary[]> {
    return this.#run(() => sandboxes.listSummaries(this.db, q));
  }

  /**
   * Compare-and-set a phase change. Returns the updated record, or null when the
   * sandbox is no longer at the expected (phase, generation): somebody else won.
   */
  transition(id: string, write: TransitionWrite): Promise<SandboxRecord | null> {
    return this.#run(() => {
      const time = this.stamp();
      let event: EventRecord | undefined;
      this.db.transaction(() => {
        const name = sandboxes.casPhase(this.db, id, write, time);
        if (name === null) return;
        event = insertEvent(this.db, {
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
      })();
      if (!event) return null;
      this.emit(event);
      return sandboxes.getSandbox(this.db, id);
    });
  }

  /** Record the runtime of a generation, only while it is still that generation and phase. */
  setRuntime(id: string, expect: { phase: Phase; generation: number }, runtime: RuntimeRecord | null): Promise<boolean> {
    return this.#run(() => sandboxes.setRuntime(this.db, id, expect, runtime, this.stamp()));
  }

  /**
   * The containers of `generation` and every older one are gone: the owed teardown
   * (if it was for that generation or an older one) is settled, and a failed or
   * completed generation's runtime record is cleared.
   */
  settleTeardown(id: string, generation: number): Promise<boolean> {
    return this.#run(() => sandboxes.settleTeardown(this.db, id, generation, this.stamp()));
  }

  /** Remove a sandbox that is Deleting, and its audit trail; its events stay in the log. */
  deleteSandbox(id: string, expect: { generation: number }): Promise<boolean> {
    return this.#run(() => {
      const time = this.stamp();
      let event: EventRecord | undefined;
      this.db.transaction(() => {
        const name = sandboxes.deleteDeleting(this.db, id, expect.generation);
        if (name === null) return;
        // Its audit trail goes with it; its lifecycle events stay (until retention).
        deleteAuditOf(this.db, id);
        event = insertEvent(this.db, {
          sandboxId: id,
          sandboxName: name,
          generation: expect.generation,
          kind: "deleted",
          oldPhase: "Deleting",
          newPhase: null,
          reason: null,
          message: "deleted",
          data: null,
          time,
        });
      })();
      if (!event) return false;
      this.emit(event);
      return true;
    });
  }

  // --- policy revisions ---

  /** The active (highest) policy revision of a sandbox. */
  policy(sandboxId: string): Promise<PolicyRevision | null> {
    return this.#run(() => activePolicy(this.db, sandboxId));
  }

  /**
   * Record a new policy revision (numbered after the highest) and its event; returns the
   * revision. `expectRevision`: only if the active revision is still that one (a
   * compare-and-set: else StaleRevisionError and nothing is written). `within` runs in the
   * same transaction once the revision is written (a proposal marked approved commits with
   * it, or neither does).
   */
  addPolicy(
    sandbox: SandboxRef,
    policy: Policy,
    source: string | null = null,
    opts: { expectRevision?: number; within?: (revision: number, tx: Transaction) => Promise<void> } = {},
  ): Promise<number> {
    return this.transact(async (tx) => {
      const active = activeRevision(this.db, sandbox.id);
      if (opts.expectRevision !== undefined && active !== opts.expectRevision) throw new StaleRevisionError(opts.expectRevision, active);
      const revision = active + 1;
      insertPolicy(this.db, sandbox.id, revision, policy, this.stamp(), source);
      await tx.info(sandbox, `policy revision ${revision} accepted`, { revision, hash: policyHash(policy) });
      await opts.within?.(revision, tx);
      return revision;
    });
  }

  // --- events ---

  /**
   * Run `fn` in one transaction. The info events it writes through `tx` are emitted once
   * it commits, in order; none when it throws (then nothing it wrote stays).
   */
  async transact<T>(fn: (tx: Transaction) => Promise<T>): Promise<T> {
    while (this.#txEnd) await this.#txEnd;
    let end = (): void => undefined;
    this.#txEnd = new Promise((resolve) => (end = resolve));
    const events: EventRecord[] = [];
    try {
      this.db.exec("BEGIN IMMEDIATE");
      let result: T;
      try {
        result = await fn(this.#transaction(events));
        this.db.exec("COMMIT");
      } catch (err) {
        if (this.db.inTransaction) this.db.exec("ROLLBACK");
        throw err;
      }
      for (const e of events) this.emit(e);
      return result;
    } finally {
      this.#txEnd = null;
      end();
    }
  }

  /** The handle a transaction's function is given: the same operations, on the connection the transaction holds. */
  #transaction(events: EventRecord[]): Transaction {
    const db = this.db;
    return {
      info: async (sandbox, message, data) => {
        events.push(insertEvent(db, { sandboxId: sandbox.id, sandboxName: sandbox.name, generation: sandbox.generation, kind: "info", oldPhase: null, newPhase: null, reason: null, message, data: data ?? null, time: this.stamp() }));
      },
      insertProposal: async (p) => insertProposal(db, p),
      getProposal: async (sandboxId, id) => getProposal(db, sandboxId, id),
      listProposals: async (sandboxId, state) => listProposals(db, sandboxId, state),
      countPendingProposals: async (sandboxId) => countPending(db, sandboxId),
      decideProposal: async (sandboxId, id, d) => decideProposal(db, sandboxId, id, d),
      pruneDecidedProposals: async (sandboxId, keep) => pruneDecided(db, sandboxId, keep),
      appendAudit: async (records) => {
        appendAudit(db, records);
      },
    };
  }

  /** Append a non-phase event (info, audit) for a sandbox. */
  appendEvent(sandbox: SandboxRef, kind: "info", message: string, data?: unknown): Promise<EventRecord> {
    return this.#run(() => {
      const event = insertEvent(this.db, {
        sandboxId: sandbox.id,
        sandboxName: sandbox.name,
        generation: sandbox.generation,
        kind,
        oldPhase: null,
        newPhase: null,
        reason: null,
        message,
        data: data ?? null,
        time: this.stamp(),
      });
      this.emit(event);
      return event;
    });
  }

  /** When the sandbox last entered `phase` from another phase (ISO time), or null. */
  enteredPhaseAt(sandboxId: string, phase: Phase): Promise<string | null> {
    return this.#run(() => enteredPhaseAt(this.db, sandboxId, phase));
  }

  /** A window of a sandbox's event log, oldest first (see LogQuery). */
  events(sandboxId: string, q: LogQuery = {}): Promise<EventRecord[]> {
    return this.#run(() => eventWindow(this.db, sandboxId, q));
  }

  /** Events of every sandbox after a sequence number, oldest first (watch streams resuming). */
  eventsAfter(afterSeq: number, limit = 1000): Promise<EventRecord[]> {
    return this.#run(() => eventsAfter(this.db, afterSeq, limit));
  }

  // --- audit ---

  /** A window of a sandbox's audit trail, oldest first; `decision` and `since` (an ISO time: records at or after it) narrow it. */
  audit(sandboxId: string, q: LogQuery & { decision?: string; since?: string } = {}): Promise<AuditRecord[]> {
    return this.#run(() => auditWindow(this.db, sandboxId, q));
  }

  /** Append audit records in one transaction. */
  appendAudit(records: Omit<AuditRecord, "seq">[]): Promise<void> {
    return this.#run(() => {
      appendAudit(this.db, records);
    });
  }

  /**
   * Apply retention: per sandbox, only the newest `perSandbox` audit records and
   * lifecycle events are kept, and nothing older than `maxAgeMs` (events of a live
   * sandbox are kept whatever their age: its history). Returns the rows removed.
   */
  prune(audit: Retention, events: Retention): Promise<{ audit: number; events: number }> {
    return this.#run(() => {
      const now = this.now().getTime();
      const auditCut = new Date(now - audit.maxAgeMs).toISOString();
      const eventCut = new Date(now - events.maxAgeMs).toISOString();
      return this.db.transaction(() => ({ audit: pruneAudit(this.db, auditCut, audit.perSandbox), events: pruneEvents(this.db, eventCut, events.perSandbox) }))();
    });
  }

  // Proposals, expiry columns, aggregates and secrets: their SQL is in their own modules;
  // these delegate, so that nothing outside src/store holds the database.

  insertProposal(p: Pick<ProposalRecord, "id" | "sandboxId" | "input" | "hash" | "baseRevision" | "proposedBy" | "reason" | "createdAt">): Promise<boolean> {
    return this.#run(() => insertProposal(this.db, p));
  }

  getProposal(sandboxId: string, id: string): Promise<ProposalRecord | null> {
    return this.#run(() => getProposal(this.db, sandboxId, id));
  }

  listProposals(sandboxId: string, state?: ProposalState): Promise<ProposalRecord[]> {
    return this.#run(() => listProposals(this.db, sandboxId, state));
  }

  countPendingProposals(sandboxId: string): Promise<number> {
    return this.#run(() => countPending(this.db, sandboxId));
  }

  decideProposal(sandboxId: string, id: string, d: ProposalDecision): Promise<boolean> {
    return this.#run(() => decideProposal(this.db, sandboxId, id, d));
  }

  pruneDecidedProposals(sandboxId: string, keep: number): Promise<number> {
    return this.#run(() => pruneDecided(this.db, sandboxId, keep));
  }

  expiringSandboxes(): Promise<ExpiringRow[]> {
    return this.#run(() => expiringSandboxes(this.db));
  }

  setTtlDeadline(id: string, generation: number, deadline: string | null): Promise<boolean> {
    return this.#run(() => setTtlDeadline(this.db, id, generation, deadline));
  }

  recordActivity(entries: Iterable<[id: string, time: string]>): Promise<void> {
    return this.#run(() => {
      recordActivity(this.db, entries);
    });
  }

  expiryColumns(id: string): Promise<{ ttlDeadline: string | null; lastActive: string | null } | null> {
    return this.#run(() => expiryColumns(this.db, id));
  }

  countByPhase(): Promise<Record<Phase, number>> {
    return this.#run(() => countByPhase(this.db));
  }

  egressTotals(sandboxId: string, generation: number): Promise<EgressTotals> {
    return this.#run(() => egressTotals(this.db, sandboxId, generation));
  }

  putSecret(name: string, sealed: SealedSecret, time: string): Promise<number> {
    return this.#run(() => putSecret(this.db, name, sealed, time));
  }

  /** The one writer of its secrets is its gateway: nothing changes them behind its back. */
  onSecretChange(): () => void {
    return () => undefined;
  }

  getSecret(name: string): Promise<SecretRecord | null> {
    return this.#run(() => getSecret(this.db, name));
  }

  listSecrets(): Promise<SecretSummary[]> {
    return this.#run(() => listSecrets(this.db));
  }

  deleteSecret(name: string): Promise<boolean> {
    return this.#run(() => deleteSecret(this.db, name));
  }
}

/**
 * The SQLite store under its former name, for the tests and tools that open one
 * (`Store.open(path)`); the gateway names the interface, src/store/contract.ts.
 */
export { SqliteStore as Store };
