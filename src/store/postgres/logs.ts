// The two logs on PostgreSQL: lifecycle events (numbered across sandboxes, read by watch
// streams from a sequence number) and the egress audit trail, with their retention and
// a generation's egress totals. Same windows as SQLite's (src/store/statements.ts).
//
// Event order: a sequence value is taken when a row is inserted but becomes visible when
// its transaction commits, so two writers can make seq 11 visible before seq 10, and a
// watcher that has read up to 11 never sees 10. Every transaction that appends an event
// first takes one transaction-scoped advisory lock (held to its commit or rollback), so
// values are taken in commit order: what is visible is always every committed event up
// to the highest (gaps are only rollbacks', and stay gaps). The same transaction sends a
// NOTIFY with the number only (payloads are capped at 8,000 bytes), delivered at commit.

import type { Phase } from "../../lifecycle/phases.js";
import type { AuditRecord, EgressTotals, EventRecord, LogQuery } from "../contract.js";
import { toEvent, type EventRow } from "../rows.js";
import { LOCKS } from "./schema.js";
import type { Queryable } from "./sql.js";

/** The channel gateways LISTEN on for committed events (the payload is the sequence number). */
export const EVENTS_CHANNEL = "sandgate_events";

/** Append one event inside the caller's transaction (which then holds the events lock to its end); returns it with its number. */
export async function insertEvent(tx: Queryable, e: Omit<EventRecord, "seq">): Promise<EventRecord> {
  await tx.query("SELECT pg_advisory_xact_lock($1, $2)", [LOCKS.namespace, LOCKS.events]);
  const { rows } = await tx.query<{ seq: number }>(
    `INSERT INTO events (sandbox_id, sandbox_name, generation, kind, old_phase, new_phase, reason, message, data, time)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING seq`,
    [
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
    ],
  );
  const seq = rows[0]!.seq;
  await tx.query("SELECT pg_notify($1, $2)", [EVENTS_CHANNEL, String(seq)]);
  return Object.assign({}, e, { seq });
}

/** The highest committed event number (0: none): where a new listener starts. */
export async function lastSeq(db: Queryable): Promise<number> {
  return (await db.query<{ s: number }>(`SELECT coalesce(max(seq), 0)::bigint AS s FROM events`)).rows[0]!.s;
}

export async function enteredPhaseAt(db: Queryable, sandboxId: string, phase: Phase): Promise<string | null> {
  const { rows } = await db.query<{ time: string }>(
    `SELECT time FROM events WHERE sandbox_id = $1 AND kind = 'phase' AND new_phase = $2 AND (old_phase IS NULL OR old_phase <> new_phase) ORDER BY seq DESC LIMIT 1`,
    [sandboxId, phase],
  );
  return rows[0]?.time ?? null;
}

/** A window of a log of one sandbox, oldest first (see LogQuery); `extra` narrows it with its own parameters, numbered from $4. */
async function logWindow<Row extends object>(db: Queryable, table: "events" | "audit", sandboxId: string, q: LogQuery, extra = "", extraParams: unknown[] = []): Promise<Row[]> {
  const limit = Math.min(q.tail ?? q.limit ?? 1000, 10_000);
  const params = [sandboxId, q.afterSeq ?? 0, q.beforeSeq ?? Number.MAX_SAFE_INTEGER, ...extraParams, limit];
  const where = `sandbox_id = $1 AND seq > $2 AND seq < $3 ${extra}`;
  const lim = `$${params.length}`;
  const sql =
    q.tail !== undefined
      ? `SELECT * FROM (SELECT * FROM ${table} WHERE ${where} ORDER BY seq DESC LIMIT ${lim}) w ORDER BY seq`
      : `SELECT * FROM ${table} WHERE ${where} ORDER BY seq LIMIT ${lim}`;
  return (await db.query<Row>(sql, params)).rows;
}

export async function eventWindow(db: Queryable, sandboxId: string, q: LogQuery): Promise<EventRecord[]> {
  return (await logWindow<EventRow>(db, "events", sandboxId, q)).map(toEvent);
}

export async function eventsAfter(db: Queryable, afterSeq: number, limit: number): Promise<EventRecord[]> {
  return (await db.query<EventRow>(`SELECT * FROM events WHERE seq > $1 ORDER BY seq LIMIT $2`, [afterSeq, Math.min(limit, 10_000)])).rows.map(toEvent);
}

export async function pruneEvents(db: Queryable, cut: string, perSandbox: number): Promise<number> {
  let n = (await db.query(`DELETE FROM events WHERE time < $1 AND sandbox_id NOT IN (SELECT id FROM sandboxes)`, [cut])).rowCount ?? 0;
  n +=
    (await db.query(`DELETE FROM events WHERE seq IN (SELECT seq FROM (SELECT seq, row_number() OVER (PARTITION BY sandbox_id ORDER BY seq DESC) AS n FROM events) r WHERE n > $1)`, [perSandbox]))
      .rowCount ?? 0;
  return n;
}

// --- the audit trail ---

interface AuditRow {
  seq: number;
  sandbox_id: string;
  generation: number;
  time: string;
  decision: string;
  count: number;
  event: string;
}

export async function auditWindow(db: Queryable, sandboxId: string, q: LogQuery & { decision?: string; since?: string }): Promise<AuditRecord[]> {
  const extraParams: unknown[] = [];
  let extra = "";
  if (q.decision !== undefined) {
    extraParams.push(q.decision);
    extra += ` AND decision = $${3 + extraParams.length}`;
  }
  if (q.since !== undefined) {
    extraParams.push(q.since);
    extra += ` AND time >= $${3 + extraParams.length}`;
  }
  const rows = await logWindow<AuditRow>(db, "audit", sandboxId, q, extra, extraParams);
  return rows.map((r) => ({ seq: r.seq, sandboxId: r.sandbox_id, generation: r.generation, time: r.time, decision: r.decision, count: r.count, event: JSON.parse(r.event) as Record<string, unknown> }));
}

/** Append records in one statement (all or none). */
export async function appendAudit(db: Queryable, records: readonly Omit<AuditRecord, "seq">[]): Promise<void> {
  if (records.length === 0) return;
  await db.query(
    `INSERT INTO audit (sandbox_id, generation, time, decision, count, event)
     SELECT * FROM unnest($1::text[], $2::int[], $3::text[], $4::text[], $5::int[], $6::text[])`,
    [records.map((r) => r.sandboxId), records.map((r) => r.generation), records.map((r) => r.time), records.map((r) => r.decision), records.map((r) => r.count), records.map((r) => JSON.stringify(r.event))],
  );
}

export async function deleteAuditOf(db: Queryable, sandboxId: string): Promise<void> {
  await db.query(`DELETE FROM audit WHERE sandbox_id = $1`, [sandboxId]);
}

export async function pruneAudit(db: Queryable, cut: string, perSandbox: number): Promise<number> {
  let n = (await db.query(`DELETE FROM audit WHERE time < $1`, [cut])).rowCount ?? 0;
  // Policy records are counted apart from egress (see src/store/audit-store.ts).
  n +=
    (
      await db.query(
        `DELETE FROM audit WHERE seq IN (SELECT seq FROM (SELECT seq, row_number() OVER (PARTITION BY sandbox_id, decision = 'policy' ORDER BY seq DESC) AS n FROM audit) r WHERE n > $1)`,
        [perSandbox],
      )
    ).rowCount ?? 0;
  return n;
}

export async function egressTotals(db: Queryable, sandboxId: string, generation: number): Promise<EgressTotals> {
  const { rows } = await db.query<{ bytes_out: number; bytes_in: number; allowed: number; denied: number; would_deny: number; dropped: number; since: string | null }>(
    `SELECT
       coalesce(sum((event::jsonb->>'bytesOut')::float8), 0)::bigint AS bytes_out,
       coalesce(sum((event::jsonb->>'bytesIn')::float8), 0)::bigint AS bytes_in,
       coalesce(sum(CASE WHEN decision IN ('allow', 'would_deny') AND event::jsonb->>'activity' IS NULL THEN count END), 0)::bigint AS allowed,
       coalesce(sum(CASE WHEN decision = 'deny' THEN count END), 0)::bigint AS denied,
       coalesce(sum(CASE WHEN decision = 'would_deny' AND event::jsonb->>'activity' IS NULL THEN count END), 0)::bigint AS would_deny,
       coalesce(sum(CASE WHEN decision = 'dropped' THEN count END), 0)::bigint AS dropped,
       min(time) AS since
     FROM audit WHERE sandbox_id = $1 AND generation = $2 AND decision <> 'policy'`,
    [sandboxId, generation],
  );
  const r = rows[0]!;
  return { bytesOut: r.bytes_out, bytesIn: r.bytes_in, allowed: r.allowed, denied: r.denied, wouldDeny: r.would_deny, dropped: r.dropped, since: r.since };
}
