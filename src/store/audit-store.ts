// The audit table (migration 5): egress decisions, apart from lifecycle events because
// they come in volume and have their own retention. Aggregates over it (a generation's
// egress totals) are in aggregates.ts.

import type Database from "better-sqlite3";
import type { AuditRecord, LogQuery } from "./contract.js";
import { logWindow, stmt } from "./statements.js";

/** A window of a sandbox's audit trail, oldest first; `decision` and `since` (an ISO time: records at or after it) narrow it. */
export function auditWindow(db: Database.Database, sandboxId: string, q: LogQuery & { decision?: string; since?: string }): AuditRecord[] {
  const extra = `${q.decision === undefined ? "" : "AND decision = ?"} ${q.since === undefined ? "" : "AND time >= ?"}`;
  const params = [...(q.decision === undefined ? [] : [q.decision]), ...(q.since === undefined ? [] : [q.since])];
  const rows = logWindow<{ seq: number; sandbox_id: string; generation: number; time: string; decision: string; count: number; event: string }>(db, "audit", extra, sandboxId, q, params);
  return rows.map((r) => ({ seq: r.seq, sandboxId: r.sandbox_id, generation: r.generation, time: r.time, decision: r.decision, count: r.count, event: JSON.parse(r.event) as Record<string, unknown> }));
}

/** Append audit records in one transaction. */
export function appendAudit(db: Database.Database, records: readonly Omit<AuditRecord, "seq">[]): void {
  if (records.length === 0) return;
  const insert = stmt(db, `INSERT INTO audit (sandbox_id, generation, time, decision, count, event) VALUES (?, ?, ?, ?, ?, ?)`);
  db.transaction(() => {
    for (const r of records) insert.run(r.sandboxId, r.generation, r.time, r.decision, r.count, JSON.stringify(r.event));
  })();
}

/** A deleted sandbox's trail goes with it (inside the deletion's transaction). */
export function deleteAuditOf(db: Database.Database, sandboxId: string): void {
  stmt(db, `DELETE FROM audit WHERE sandbox_id = ?`).run(sandboxId);
}

/** Retention: nothing older than `cut`, and the newest `perSandbox` records of each sandbox. Returns the rows removed. */
export function pruneAudit(db: Database.Database, cut: string, perSandbox: number): number {
  let n = stmt(db, `DELETE FROM audit WHERE time < ?`).run(cut).changes;
  // Policy records (proposals, decisions, sets) are counted apart from egress: a
  // chatty workload's traffic cannot push the record of its policy's changes out.
  n += stmt(
    db,
    `DELETE FROM audit WHERE seq IN (SELECT seq FROM (SELECT seq, row_number() OVER (PARTITION BY sandbox_id, decision = 'policy' ORDER BY seq DESC) AS n FROM audit) WHERE n > ?)`,
  ).run(perSandbox).changes;
  return n;
}
