// The sandboxes table and its labels (migrations 1 and 8): one row per sandbox, its
// phase changed only by a compare-and-set on (id, generation, phase). These write rows
// only; the Store (store.ts) wraps each change in the transaction that also writes its
// event, so no change goes unrecorded.

import type Database from "better-sqlite3";
import type { RuntimeRecord } from "../driver/contract.js";
import type { Phase, SandboxReason } from "../lifecycle/phases.js";
import type { SandboxSpec } from "../lifecycle/spec.js";
import type { ListQuery, NewSandbox, SandboxRecord, SandboxSummary, TransitionWrite } from "./contract.js";
import { parse, stmt } from "./statements.js";

interface SandboxRow {
  id: string;
  name: string;
  phase: string;
  reason: string | null;
  generation: number;
  spec: string;
  runtime: string | null;
  teardown_owed: number | null;
  host: string;
  /** JSON object, from LABELS_COLUMN. */
  labels: string;
  created_at: string;
  updated_at: string;
}

type HeadRow = Pick<SandboxRow, "id" | "name" | "phase" | "reason" | "generation" | "host" | "labels" | "created_at" | "updated_at">;

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
    host: row.host,
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

/** The row and its labels (inside the caller's transaction); a taken name throws SQLITE_CONSTRAINT_UNIQUE. */
export function insertSandbox(db: Database.Database, input: NewSandbox, time: string): void {
  stmt(
    db,
    `INSERT INTO sandboxes (id, name, phase, reason, generation, spec, runtime, host, created_at, updated_at)
     VALUES (?, ?, 'Provisioning', NULL, 1, ?, NULL, ?, ?, ?)`,
  ).run(input.id, input.name, JSON.stringify(input.spec), input.host, time, time);
  const label = stmt(db, `INSERT INTO sandbox_labels (sandbox_id, key, value) VALUES (?, ?, ?)`);
  for (const [k, v] of Object.entries(input.labels ?? {})) label.run(input.id, k, v);
}

/** Look up by id or by name. */
export function getSandbox(db: Database.Database, idOrName: string): SandboxRecord | null {
  const row = stmt(db, `SELECT *, ${LABELS_COLUMN} FROM sandboxes WHERE id = ? OR name = ?`).get(idOrName, idOrName) as SandboxRow | undefined;
  return row ? toSandbox(row) : null;
}

export function listSandboxes(db: Database.Database): SandboxRecord[] {
  return (stmt(db, `SELECT *, ${LABELS_COLUMN} FROM sandboxes ORDER BY created_at, name`).all() as SandboxRow[]).map(toSandbox);
}

/** A page by name (the UNIQUE index on name serves the order and the cursor: no sort, no scan of earlier rows). */
export function listPage(db: Database.Database, q: ListQuery): SandboxRecord[] {
  return (page(db, `*, ${LABELS_COLUMN}`, q) as SandboxRow[]).map(toSandbox);
}

/**
 * listPage's rows with only the columns a list shows. The runtime's three values come
 * from one multi-path json_extract (SQLite parses the record once; three calls parse it
 * three times, which measured slower than the rest of the page together); no spec is read.
 */
export function listSummaries(db: Database.Database, q: ListQuery): SandboxSummary[] {
  const cols = `id, name, phase, reason, generation, host, created_at, updated_at, ${LABELS_COLUMN},
      json_extract(runtime, '$.generation', '$.workload.id', '$.supervisor.id') AS rt`;
  const rows = page(db, cols, q) as (HeadRow & { rt: string | null })[];
  return rows.map((r) => {
    const rt = parse<[number | null, string | null, string | null]>(r.rt);
    return rowHead(r, {
      runtime: rt === null || rt[0] === null || rt[1] === null || rt[2] === null ? null : { generation: rt[0], workloadId: rt[1], supervisorId: rt[2] },
    });
  });
}

function page(db: Database.Database, cols: string, q: ListQuery): unknown[] {
  const phase = q.phase === undefined ? "" : "AND phase = ?";
  // Each label through the (key, value) index; one statement per number of labels (at most LABELS_MAX + 1 kinds).
  const labels = (q.labels ?? []).map(() => "AND id IN (SELECT sandbox_id FROM sandbox_labels WHERE key = ? AND value = ?)").join(" ");
  const params = [q.after ?? "", ...(q.phase === undefined ? [] : [q.phase]), ...(q.labels ?? []).flat(), q.limit];
  return stmt(db, `SELECT ${cols} FROM sandboxes WHERE name > ? ${phase} ${labels} ORDER BY name LIMIT ?`).all(...params);
}

/** The compare-and-set of a phase change: the sandbox's name when it won, null when it is no longer at write.expect. */
export function casPhase(db: Database.Database, id: string, write: TransitionWrite, time: string): string | null {
  const runtimeSql = write.runtime === undefined ? "runtime" : "?";
  const owedSql = write.oweTeardown === undefined ? "teardown_owed" : "max(coalesce(teardown_owed, 0), ?)";
  const params: unknown[] = [write.next.phase, write.next.reason ? JSON.stringify(write.next.reason) : null];
  params.push(write.next.generation);
  if (write.runtime !== undefined) params.push(write.runtime === null ? null : JSON.stringify(write.runtime));
  if (write.oweTeardown !== undefined) params.push(write.oweTeardown);
  params.push(time, id, write.expect.generation, write.expect.phase);
  const info = stmt(
    db,
    `UPDATE sandboxes SET phase = ?, reason = ?, generation = ?, runtime = ${runtimeSql}, teardown_owed = ${owedSql}, updated_at = ?
     WHERE id = ? AND generation = ? AND phase = ?`,
  ).run(...params);
  if (info.changes !== 1) return null;
  return (stmt(db, `SELECT name FROM sandboxes WHERE id = ?`).get(id) as { name: string }).name;
}

/** Record the runtime of a generation, only while it is still that generation and phase. */
export function setRuntime(db: Database.Database, id: string, expect: { phase: Phase; generation: number }, runtime: RuntimeRecord | null, time: string): boolean {
  return (
    stmt(db, `UPDATE sandboxes SET runtime = ?, updated_at = ? WHERE id = ? AND generation = ? AND phase = ?`).run(
      runtime === null ? null : JSON.stringify(runtime),
      time,
      id,
      expect.generation,
      expect.phase,
    ).changes === 1
  );
}

/** See Store.settleTeardown. */
export function settleTeardown(db: Database.Database, id: string, generation: number, time: string): boolean {
  return (
    stmt(
      db,
      `UPDATE sandboxes SET teardown_owed = NULL,
         runtime = CASE WHEN phase IN ('Error', 'Completed') AND generation = ? THEN NULL ELSE runtime END, updated_at = ?
       WHERE id = ? AND teardown_owed IS NOT NULL AND teardown_owed <= ?`,
    ).run(generation, time, id, generation).changes === 1
  );
}

/** Remove the row of a sandbox that is Deleting at `generation` (its labels and proposals go with it: triggers); its name, or null when it is not. */
export function deleteDeleting(db: Database.Database, id: string, generation: number): string | null {
  const row = stmt(db, `SELECT name FROM sandboxes WHERE id = ? AND generation = ? AND phase = 'Deleting'`).get(id, generation) as { name: string } | undefined;
  if (!row) return null;
  stmt(db, `DELETE FROM sandboxes WHERE id = ?`).run(id);
  return row.name;
}
