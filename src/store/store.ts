// The gateway's state on SQLite (WAL). Every phase change is a compare-and-set on
// (id, generation, phase) written in the same transaction as its event, so two
// writers can never both win and no change goes unrecorded.

import Database from "better-sqlite3";
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import type { RuntimeRecord } from "../driver/contract.js";
import type { LifecycleState } from "../lifecycle/machine.js";
import type { Phase, SandboxReason } from "../lifecycle/phases.js";
import type { SandboxSpec } from "../lifecycle/spec.js";
import { policyHash, serializePolicy, type Policy } from "../policy/index.js";
import { migrate } from "./migrations.js";
import { SandgateError } from "../util/errors.js";

export interface SandboxRecord {
  id: string;
  name: string;
  phase: Phase;
  reason: SandboxReason | null;
  generation: number;
  spec: SandboxSpec;
  runtime: RuntimeRecord | null;
  /** The generation whose containers (and any older ones) must still be removed, or null. */
  teardownOwed: number | null;
  /** The user's labels (src/lifecycle/labels.ts); kept here only, never on Docker objects. */
  labels: Record<string, string>;
  createdAt: string;
  updatedAt: string;
}

/** What a list row needs, read without parsing the spec or the runtime record. */
export interface SandboxSummary {
  id: string;
  name: string;
  phase: Phase;
  reason: SandboxReason | null;
  generation: number;
  /** The recorded runtime's generation and container ids, or null when there is none. */
  runtime: { generation: number; workloadId: string; supervisorId: string } | null;
  labels: Record<string, string>;
  createdAt: string;
  updatedAt: string;
}

/** A page of sandboxes in name order: the `limit` first after the name `after`, of one phase and carrying every label given. */
export interface ListQuery {
  after?: string;
  limit: number;
  phase?: Phase;
  /** key=value pairs a sandbox must all carry (AND). */
  labels?: readonly (readonly [string, string])[];
}

export type EventKind = "phase" | "deleted" | "info";

export interface EventRecord {
  seq: number;
  sandboxId: string;
  sandboxName: string;
  generation: number;
  kind: EventKind;
  oldPhase: Phase | null;
  newPhase: Phase | null;
  reason: SandboxReason | null;
  message: string | null;
  data: unknown;
  time: string;
}

/** One egress decision record of the audit trail (repeats aggregated into `count`). */
export interface AuditRecord {
  seq: number;
  sandboxId: string;
  generation: number;
  time: string;
  decision: string;
  count: number;
  event: Record<string, unknown>;
}

/** A window of a log: records after `afterSeq`, or before `beforeSeq`, or the last `tail` ones. */
export interface LogQuery {
  afterSeq?: number;
  beforeSeq?: number;
  /** The last N records (with afterSeq/beforeSeq: the last N inside that window). */
  tail?: number;
  limit?: number;
}

export interface Retention {
  /** Records kept per sandbox, newest first. */
  perSandbox: number;
  /** Records older than this (ms) go. */
  maxAgeMs: number;
}

export interface PolicyRevision {
  revision: number;
  policy: Policy;
  /** The text the user gave (YAML), when the revision came as text. */
  source: string | null;
  hash: string;
  createdAt: string;
}

export class DuplicateNameError extends SandgateError {
  override readonly name = "DuplicateNameError";
  constructor(message: string, options?: ErrorOptions) {
    super(message, "already_exists", options);
  }
}

/** A compare-and-set on the active policy revision lost: it is no longer the one expected. */
export class StaleRevisionError extends SandgateError {
  override readonly name = "StaleRevisionError";
  constructor(
    readonly expected: number,
    readonly active: number,
  ) {
    super(`the active policy revision is ${active}, not ${expected}`, "stale_revision");
  }
}

/** Writes info events inside a Store.transact transaction. */
export interface InfoWriter {
  info(sandbox: { id: string; name: string; generation: number }, message: string, data?: unknown): void;
}

interface SandboxRow {
  id: string;
  name: string;
  phase: string;
  reason: string | null;
  generation: number;
  spec: string;
  runtime: string | null;
  teardown_owed: number | null;
  /** JSON object, from LABELS_COLUMN. */
  labels: string;
  created_at: string;
  updated_at: string;
}

interface EventRow {
  seq: number;
  sandbox_id: string;
  sandbox_name: string;
  generation: number;
  kind: string;
  old_phase: string | null;
  new_phase: string | null;
  reason: string | null;
  message: string | null;
  data: string | null;
  time: string;
}

// eslint-disable-next-line @typescript-eslint/no-unnecessary-type-parameters -- typed JSON columns
const parse = <T>(text: string | null): T | null => (text === null ? null : (JSON.parse(text) as T));

type HeadRow = Pick<SandboxRow, "id" | "name" | "phase" | "reason" | "generation" | "labels" | "created_at" | "updated_at">;

/** A sandbox row's labels as one JSON object, read through the labels' primary key (key order). */
const LABELS_COLUMN = `(SELECT json_group_object(key, value) FROM sandbox_labels WHERE sandbox_id = sandboxes.id) AS labels`;

/** The columns every reading of a sandbox row shares, and `more` (Object.assign: a spread with more properties is slow, see api/views.ts). */
function rowHead<T extends object>(row: HeadRow, more: T) {
  const head = {
    id: row.id,
    name: row.name,
    phase: row.phase as Phase,
    reason: parse<SandboxReason>(row.reason),
    generation: row.generation,
    labels: JSON.parse(row.labels) as Record<string, string>,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
  return Object.assign(head, more);
}

function toSandbox(row: SandboxRow): SandboxRecord {
  return rowHead(row, {
    spec: JSON.parse(row.spec) as SandboxSpec,
    runtime: parse<RuntimeRecord>(row.runtime),
    teardownOwed: row.teardown_owed,
  });
}

function toEvent(row: EventRow): EventRecord {
  return {
    seq: row.seq,
    sandboxId: row.sandbox_id,
    sandboxName: row.sandbox_name,
    generation: row.generation,
    kind: row.kind as EventKind,
    oldPhase: row.old_phase as Phase | null,
    newPhase: row.new_phase as Phase | null,
    reason: parse<SandboxReason>(row.reason),
    message: row.message,
    data: parse<unknown>(row.data),
    time: row.time,
  };
}

export interface TransitionWrite {
  expect: { phase: Phase; generation: number };
  next: LifecycleState;
  message?: string;
  /** undefined keeps the recorded runtime; null clears it. */
  runtime?: RuntimeRecord | null;
  /** A generation whose containers are now owed a teardown (kept at the highest owed). */
  oweTeardown?: number;
}

export class Store {
  readonly db: Database.Database;
  private readonly listeners = new Set<(e: EventRecord) => void>();
  private readonly statements = new Map<string, Database.Statement>();
  private readonly now: () => Date;

  private constructor(db: Database.Database, now: () => Date) {
    this.db = db;
    this.now = now;
  }

  static open(path: string, opts: { now?: () => Date } = {}): Store {
    if (path !== ":memory:") mkdirSync(dirname(path), { recursive: true });
    const db = new Database(path);
    db.pragma("journal_mode = WAL");
    // FULL: a committed transition survives power loss, not only a process crash.
    db.pragma("synchronous = FULL");
    db.pragma("busy_timeout = 5000");
    migrate(db);
    return new Store(db, opts.now ?? (() => new Date()));
  }

  close(): void {
    this.listeners.clear();
    if (this.db.open) this.db.close();
  }

  /** Called after every committed event; used for watch streams. */
  onEvent(listener: (e: EventRecord) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private emit(e: EventRecord): void {
    for (const l of this.listeners) l(e);
  }

  private stamp(): string {
    return this.now().toISOString();
  }

  /** A new sandbox at generation 1, Provisioning, with its first policy revision. */
  createSandbox(input: { id: string; name: string; spec: SandboxSpec; policy: Policy; policySource?: string | null; labels?: Readonly<Record<string, string>> }): SandboxRecord {
    const time = this.stamp();
    let event: EventRecord | undefined;
    try {
      this.db.transaction(() => {
        this.db
          .prepare(
            `INSERT INTO sandboxes (id, name, phase, reason, generation, spec, runtime, created_at, updated_at)
             VALUES (?, ?, 'Provisioning', NULL, 1, ?, NULL, ?, ?)`,
          )
          .run(input.id, input.name, JSON.stringify(input.spec), time, time);
        const label = this.db.prepare(`INSERT INTO sandbox_labels (sandbox_id, key, value) VALUES (?, ?, ?)`);
        for (const [k, v] of Object.entries(input.labels ?? {})) label.run(input.id, k, v);
        this.insertPolicy(input.id, 1, input.policy, time, input.policySource ?? null);
        event = this.insertEvent({
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
    return this.get(input.id)!;
  }

  /** Look up by id or by name. */
  get(idOrName: string): SandboxRecord | null {
    const row = this.cached(`SELECT *, ${LABELS_COLUMN} FROM sandboxes WHERE id = ? OR name = ?`).get(idOrName, idOrName) as
      | SandboxRow
      | undefined;
    return row ? toSandbox(row) : null;
  }

  list(): SandboxRecord[] {
    const rows = this.db.prepare(`SELECT *, ${LABELS_COLUMN} FROM sandboxes ORDER BY created_at, name`).all() as SandboxRow[];
    return rows.map(toSandbox);
  }

  /** A page by name (the UNIQUE index on name serves the order and the cursor: no sort, no scan of earlier rows). */
  listPage(q: ListQuery): SandboxRecord[] {
    return (this.page(`*, ${LABELS_COLUMN}`, q) as SandboxRow[]).map(toSandbox);
  }

  /**
   * listPage's rows with only the columns a list shows. The runtime's three values come
   * from one multi-path json_extract (SQLite parses the record once; three calls parse it
   * three times, which measured slower than the rest of the page together); no spec is read.
   */
  listSummaries(q: ListQuery): SandboxSummary[] {
    const cols = `id, name, phase, reason, generation, created_at, updated_at, ${LABELS_COLUMN},
      json_extract(runtime, '$.generation', '$.workload.id', '$.supervisor.id') AS rt`;
    const rows = this.page(cols, q) as (HeadRow & { rt: string | null })[];
    return rows.map((r) => {
      const rt = parse<[number | null, string | null, string | null]>(r.rt);
      return rowHead(r, {
        runtime: rt === null || rt[0] === null || rt[1] === null || rt[2] === null ? null : { generation: rt[0], workloadId: rt[1], supervisorId: rt[2] },
      });
    });
  }

  private page(cols: string, q: ListQuery): unknown[] {
    const phase = q.phase === undefined ? "" : "AND phase = ?";
    // Each label through the (key, value) index; one statement per number of labels (at most LABELS_MAX + 1 kinds).
    const labels = (q.labels ?? []).map(() => "AND id IN (SELECT sandbox_id FROM sandbox_labels WHERE key = ? AND value = ?)").join(" ");
    const params = [q.after ?? "", ...(q.phase === undefined ? [] : [q.phase]), ...(q.labels ?? []).flat(), q.limit];
    return this.cached(`SELECT ${cols} FROM sandboxes WHERE name > ? ${phase} ${labels} ORDER BY name LIMIT ?`).all(...params);
  }

  /** Prepared once: compiling the statement is ~100 µs, a sizeable part of a list page. */
  private cached(sql: string): Database.Statement {
    let stmt = this.statements.get(sql);
    if (!stmt) this.statements.set(sql, (stmt = this.db.prepare(sql)));
    return stmt;
  }

  /**
   * Compare-and-set a phase change. Returns the updated record, or null when the
   * sandbox is no longer at the expected (phase, generation): somebody else won.
   */
  transition(id: string, write: TransitionWrite): SandboxRecord | null {
    const time = this.stamp();
    let event: EventRecord | undefined;
    this.db.transaction(() => {
      const runtimeSql = write.runtime === undefined ? "runtime" : "?";
      const owedSql = write.oweTeardown === undefined ? "teardown_owed" : "max(coalesce(teardown_owed, 0), ?)";
      const params: unknown[] = [write.next.phase, write.next.reason ? JSON.stringify(write.next.reason) : null];
      params.push(write.next.generation);
      if (write.runtime !== undefined) params.push(write.runtime === null ? null : JSON.stringify(write.runtime));
      if (write.oweTeardown !== undefined) params.push(write.oweTeardown);
      params.push(time, id, write.expect.generation, write.expect.phase);
      const info = this.db
        .prepare(
          `UPDATE sandboxes SET phase = ?, reason = ?, generation = ?, runtime = ${runtimeSql}, teardown_owed = ${owedSql}, updated_at = ?
           WHERE id = ? AND generation = ? AND phase = ?`,
        )
        .run(...params);
      if (info.changes !== 1) return;
      const name = (this.db.prepare(`SELECT name FROM sandboxes WHERE id = ?`).get(id) as { name: string }).name;
      event = this.insertEvent({
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
    return this.get(id);
  }

  /** Record the runtime of a generation, only while it is still that generation and phase. */
  setRuntime(id: string, expect: { phase: Phase; generation: number }, runtime: RuntimeRecord | null): boolean {
    const info = this.db
      .prepare(`UPDATE sandboxes SET runtime = ?, updated_at = ? WHERE id = ? AND generation = ? AND phase = ?`)
      .run(runtime === null ? null : JSON.stringify(runtime), this.stamp(), id, expect.generation, expect.phase);
    return info.changes === 1;
  }

  /**
   * The containers of `generation` and every older one are gone: the owed teardown
   * (if it was for that generation or an older one) is settled, and a failed or
   * completed generation's runtime record is cleared.
   */
  settleTeardown(id: string, generation: number): boolean {
    const info = this.db
      .prepare(
        `UPDATE sandboxes SET teardown_owed = NULL,
           runtime = CASE WHEN phase IN ('Error', 'Completed') AND generation = ? THEN NULL ELSE runtime END, updated_at = ?
         WHERE id = ? AND teardown_owed IS NOT NULL AND teardown_owed <= ?`,
      )
      .run(generation, this.stamp(), id, generation);
    return info.changes === 1;
  }

  /** Remove a sandbox that is Deleting, and its audit trail; its events stay in the log. */
  deleteSandbox(id: string, expect: { generation: number }): boolean {
    const time = this.stamp();
    let event: EventRecord | undefined;
    this.db.transaction(() => {
      const row = this.db.prepare(`SELECT name FROM sandboxes WHERE id = ? AND generation = ? AND phase = 'Deleting'`).get(
        id,
        expect.generation,
      ) as { name: string } | undefined;
      if (!row) return;
      this.db.prepare(`DELETE FROM sandboxes WHERE id = ?`).run(id);
      // Its audit trail goes with it; its lifecycle events stay (until retention).
      this.db.prepare(`DELETE FROM audit WHERE sandbox_id = ?`).run(id);
      event = this.insertEvent({
        sandboxId: id,
        sandboxName: row.name,
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
  }

  private insertPolicy(sandboxId: string, revision: number, policy: Policy, time: string, source: string | null): void {
    this.db
      .prepare(`INSERT INTO policies (sandbox_id, revision, policy, hash, created_at, source) VALUES (?, ?, ?, ?, ?, ?)`)
      .run(sandboxId, revision, serializePolicy(policy), policyHash(policy), time, source);
  }

  /** The active (highest) policy revision of a sandbox. */
  policy(sandboxId: string): PolicyRevision | null {
    const row = this.db
      .prepare(`SELECT revision, policy, hash, created_at, source FROM policies WHERE sandbox_id = ? ORDER BY revision DESC LIMIT 1`)
      .get(sandboxId) as { revision: number; policy: string; hash: string; created_at: string; source: string | null } | undefined;
    return row ? { revision: row.revision, policy: JSON.parse(row.policy) as Policy, source: row.source, hash: row.hash, createdAt: row.created_at } : null;
  }

  /**
   * Record a new policy revision (numbered after the highest) and its event; returns the
   * revision. `expectRevision`: only if the active revision is still that one (a
   * compare-and-set: else StaleRevisionError and nothing is written). `within` runs in the
   * same transaction once the revision is written (a proposal marked approved commits with
   * it, or neither does).
   */
  addPolicy(
    sandbox: { id: string; name: string; generation: number },
    policy: Policy,
    source: string | null = null,
    opts: { expectRevision?: number; within?: (revision: number, tx: InfoWriter) => void } = {},
  ): number {
    return this.transact((tx) => {
      const row = this.db.prepare(`SELECT max(revision) AS r FROM policies WHERE sandbox_id = ?`).get(sandbox.id) as { r: number | null };
      const active = row.r ?? 0;
      if (opts.expectRevision !== undefined && active !== opts.expectRevision) throw new StaleRevisionError(opts.expectRevision, active);
      const revision = active + 1;
      this.insertPolicy(sandbox.id, revision, policy, this.stamp(), source);
      tx.info(sandbox, `policy revision ${revision} accepted`, { revision, hash: policyHash(policy) });
      opts.within?.(revision, tx);
      return revision;
    });
  }

  /**
   * Run `fn` in one transaction. The info events it writes through `tx` are emitted once
   * it commits, in order; none when it throws (then nothing it wrote stays).
   */
  transact<T>(fn: (tx: InfoWriter) => T): T {
    const events: EventRecord[] = [];
    const tx: InfoWriter = {
      info: (sandbox, message, data) => {
        events.push(this.insertEvent({ sandboxId: sandbox.id, sandboxName: sandbox.name, generation: sandbox.generation, kind: "info", oldPhase: null, newPhase: null, reason: null, message, data: data ?? null, time: this.stamp() }));
      },
    };
    const result = this.db.transaction(() => fn(tx))();
    for (const e of events) this.emit(e);
    return result;
  }

  /** Append a non-phase event (info, audit) for a sandbox. */
  appendEvent(sandbox: { id: string; name: string; generation: number }, kind: "info", message: string, data?: unknown): EventRecord {
    const event = this.insertEvent({
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
  }

  /** When the sandbox last entered `phase` from another phase (ISO time), or null. */
  enteredPhaseAt(sandboxId: string, phase: Phase): string | null {
    const row = this.db
      .prepare(
        `SELECT time FROM events WHERE sandbox_id = ? AND kind = 'phase' AND new_phase = ? AND (old_phase IS NULL OR old_phase <> new_phase)
         ORDER BY seq DESC LIMIT 1`,
      )
      .get(sandboxId, phase) as { time: string } | undefined;
    return row?.time ?? null;
  }

  /** A window of a sandbox's event log, oldest first (see LogQuery). */
  events(sandboxId: string, q: LogQuery = {}): EventRecord[] {
    return this.window<EventRow>("events", "", sandboxId, q).map(toEvent);
  }

  /** A window of a sandbox's audit trail, oldest first; `decision` and `since` (an ISO time: records at or after it) narrow it. */
  audit(sandboxId: string, q: LogQuery & { decision?: string; since?: string } = {}): AuditRecord[] {
    const extra = `${q.decision === undefined ? "" : "AND decision = ?"} ${q.since === undefined ? "" : "AND time >= ?"}`;
    const params = [...(q.decision === undefined ? [] : [q.decision]), ...(q.since === undefined ? [] : [q.since])];
    const rows = this.window<{ seq: number; sandbox_id: string; generation: number; time: string; decision: string; count: number; event: string }>("audit", extra, sandboxId, q, params);
    return rows.map((r) => ({ seq: r.seq, sandboxId: r.sandbox_id, generation: r.generation, time: r.time, decision: r.decision, count: r.count, event: JSON.parse(r.event) as Record<string, unknown> }));
  }

  /** Events of every sandbox after a sequence number, oldest first (watch streams resuming). */
  eventsAfter(afterSeq: number, limit = 1000): EventRecord[] {
    return (this.db.prepare(`SELECT * FROM events WHERE seq > ? ORDER BY seq LIMIT ?`).all(afterSeq, Math.min(limit, 10_000)) as EventRow[]).map(toEvent);
  }

  private window<Row>(table: "events" | "audit", extra: string, sandboxId: string, q: LogQuery, extraParams: unknown[] = []): Row[] {
    const limit = Math.min(q.tail ?? q.limit ?? 1000, 10_000);
    const where = `sandbox_id = ? AND seq > ? AND seq < ? ${extra}`;
    const params = [sandboxId, q.afterSeq ?? 0, q.beforeSeq ?? Number.MAX_SAFE_INTEGER, ...extraParams, limit];
    if (q.tail !== undefined) {
      return (this.db.prepare(`SELECT * FROM (SELECT * FROM ${table} WHERE ${where} ORDER BY seq DESC LIMIT ?) ORDER BY seq`).all(...params) as Row[]);
    }
    return this.db.prepare(`SELECT * FROM ${table} WHERE ${where} ORDER BY seq LIMIT ?`).all(...params) as Row[];
  }

  /** Append audit records in one transaction. */
  appendAudit(records: Omit<AuditRecord, "seq">[]): void {
    if (records.length === 0) return;
    const insert = this.db.prepare(`INSERT INTO audit (sandbox_id, generation, time, decision, count, event) VALUES (?, ?, ?, ?, ?, ?)`);
    this.db.transaction(() => {
      for (const r of records) insert.run(r.sandboxId, r.generation, r.time, r.decision, r.count, JSON.stringify(r.event));
    })();
  }

  /**
   * Apply retention: per sandbox, only the newest `perSandbox` audit records and
   * lifecycle events are kept, and nothing older than `maxAgeMs` (events of a live
   * sandbox are kept whatever their age: its history). Returns the rows removed.
   */
  prune(audit: Retention, events: Retention): { audit: number; events: number } {
    const now = this.now().getTime();
    const auditCut = new Date(now - audit.maxAgeMs).toISOString();
    const eventCut = new Date(now - events.maxAgeMs).toISOString();
    let a = 0;
    let e = 0;
    this.db.transaction(() => {
      a += this.db.prepare(`DELETE FROM audit WHERE time < ?`).run(auditCut).changes;
      // Policy records (proposals, decisions, sets) are counted apart from egress: a
      // chatty workload's traffic cannot push the record of its policy's changes out.
      a += this.db
        .prepare(
          `DELETE FROM audit WHERE seq IN (SELECT seq FROM (SELECT seq, row_number() OVER (PARTITION BY sandbox_id, decision = 'policy' ORDER BY seq DESC) AS n FROM audit) WHERE n > ?)`,
        )
        .run(audit.perSandbox).changes;
      e += this.db.prepare(`DELETE FROM events WHERE time < ? AND sandbox_id NOT IN (SELECT id FROM sandboxes)`).run(eventCut).changes;
      e += this.db
        .prepare(`DELETE FROM events WHERE seq IN (SELECT seq FROM (SELECT seq, row_number() OVER (PARTITION BY sandbox_id ORDER BY seq DESC) AS n FROM events) WHERE n > ?)`)
        .run(events.perSandbox).changes;
    })();
    return { audit: a, events: e };
  }

  private insertEvent(e: Omit<EventRecord, "seq">): EventRecord {
    const info = this.db
      .prepare(
        `INSERT INTO events (sandbox_id, sandbox_name, generation, kind, old_phase, new_phase, reason, message, data, time)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(
        e.sandboxId,
        e.sandboxName,
        e.generation,
        e.kind,
        e.oldPhase,
        e.newPhase,
        e.reason ? JSON.stringify(e.reason) : null,
        e.message,
        e.data === null || e.data === undefined ? null : JSON.stringify(e.data),
        e.time,
      );
    return Object.assign({}, e, { seq: Number(info.lastInsertRowid) });
  }
}
