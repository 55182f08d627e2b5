// The sandboxes table on PostgreSQL, with its labels and its expiry columns: the same
// rows and compare-and-sets as the SQLite modules (src/store/sandboxes-store.ts,
// expiry-store.ts). A compare-and-set is one UPDATE whose WHERE names the state it
// expects: under READ COMMITTED a second writer waits for the first's row lock, then
// checks the WHERE again against the committed row, so of two exactly one wins.

import type { RuntimeRecord } from "../../driver/contract.js";
import { LIVE_PHASES, PHASES, type Phase, type SandboxReason } from "../../lifecycle/phases.js";
import type { SandboxSpec } from "../../lifecycle/spec.js";
import type { ExpiringRow, ListQuery, NewSandbox, SandboxRecord, SandboxSummary, TransitionWrite } from "../contract.js";
import type { Queryable } from "./sql.js";

interface HeadRow {
  id: string;
  name: string;
  phase: string;
  reason: string | null;
  generation: number;
  host: string;
  labels: Record<string, string>;
  created_at: string;
  updated_at: string;
}

interface SandboxRow extends HeadRow {
  spec: string;
  runtime: string | null;
  teardown_owed: number | null;
}

/** A row's labels as one object (json: the driver parses it), in key order. */
const LABELS = `(SELECT coalesce(json_object_agg(key, value ORDER BY key), '{}'::json) FROM sandbox_labels WHERE sandbox_id = s.id) AS labels`;

function head(row: HeadRow) {
  return {
    id: row.id,
    name: row.name,
    phase: row.phase as Phase,
    reason: row.reason === null ? null : (JSON.parse(row.reason) as SandboxReason),
    generation: row.generation,
    host: row.host,
    labels: row.labels,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

const toSandbox = (row: SandboxRow): SandboxRecord =>
  Object.assign(head(row), { spec: JSON.parse(row.spec) as SandboxSpec, runtime: row.runtime === null ? null : (JSON.parse(row.runtime) as RuntimeRecord), teardownOwed: row.teardown_owed });

/** The row and its labels, inside the caller's transaction; a taken name fails with 23505 (unique_violation). */
export async function insertSandbox(db: Queryable, input: NewSandbox, time: string): Promise<void> {
  await db.query(
    `INSERT INTO sandboxes (id, name, phase, reason, generation, spec, runtime, host, created_at, updated_at) VALUES ($1, $2, 'Provisioning', NULL, 1, $3, NULL, $5, $4, $4)`,
    [input.id, input.name, JSON.stringify(input.spec), time, input.host],
  );
  const labels = Object.entries(input.labels ?? {});
  if (labels.length > 0) {
    await db.query(`INSERT INTO sandbox_labels (sandbox_id, key, value) SELECT $1, k, v FROM unnest($2::text[], $3::text[]) AS l(k, v)`, [
      input.id,
      labels.map(([k]) => k),
      labels.map(([, v]) => v),
    ]);
  }
}

export async function getSandbox(db: Queryable, idOrName: string): Promise<SandboxRecord | null> {
  const { rows } = await db.query<SandboxRow>(`SELECT s.*, ${LABELS} FROM sandboxes s WHERE id = $1 OR name = $1`, [idOrName]);
  return rows[0] ? toSandbox(rows[0]) : null;
}

export async function listSandboxes(db: Queryable): Promise<SandboxRecord[]> {
  return (await db.query<SandboxRow>(`SELECT s.*, ${LABELS} FROM sandboxes s ORDER BY created_at, name`)).rows.map(toSandbox);
}

function page(cols: string, q: ListQuery): { sql: string; params: unknown[] } {
  const params: unknown[] = [q.after ?? ""];
  let where = "name > $1";
  if (q.phase !== undefined) {
    params.push(q.phase);
    where += ` AND phase = $${params.length}`;
  }
  for (const [k, v] of q.labels ?? []) {
    params.push(k, v);
    where += ` AND id IN (SELECT sandbox_id FROM sandbox_labels WHERE key = $${params.length - 1} AND value = $${params.length})`;
  }
  params.push(q.limit);
  return { sql: `SELECT ${cols} FROM sandboxes s WHERE ${where} ORDER BY name LIMIT $${params.length}`, params };
}

export async function listPage(db: Queryable, q: ListQuery): Promise<SandboxRecord[]> {
  const { sql, params } = page(`s.*, ${LABELS}`, q);
  return (await db.query<SandboxRow>(sql, params)).rows.map(toSandbox);
}

export async function listSummaries(db: Queryable, q: ListQuery): Promise<SandboxSummary[]> {
  const cols = `id, name, phase, reason, generation, host, created_at, updated_at, ${LABELS},
    (runtime::jsonb->>'generation')::int AS rt_gen, runtime::jsonb->'workload'->>'id' AS rt_w, runtime::jsonb->'supervisor'->>'id' AS rt_s`;
  const { sql, params } = page(cols, q);
  const rows = (await db.query<HeadRow & { rt_gen: number | null; rt_w: string | null; rt_s: string | null }>(sql, params)).rows;
  return rows.map((r) =>
    Object.assign(head(r), { runtime: r.rt_gen === null || r.rt_w === null || r.rt_s === null ? null : { generation: r.rt_gen, workloadId: r.rt_w, supervisorId: r.rt_s } }),
  );
}

/** The compare-and-set of a phase change: the sandbox's name when it won, null when it is no longer at write.expect. */
export async function casPhase(db: Queryable, id: string, write: TransitionWrite, time: string): Promise<string | null> {
  const params: unknown[] = [write.next.phase, write.next.reason ? JSON.stringify(write.next.reason) : null, write.next.generation, time, id, write.expect.generation, write.expect.phase];
  let runtime = "runtime";
  if (write.runtime !== undefined) {
    params.push(write.runtime === null ? null : JSON.stringify(write.runtime));
    runtime = `$${params.length}`;
  }
  let owed = "teardown_owed";
  if (write.oweTeardown !== undefined) {
    params.push(write.oweTeardown);
    owed = `greatest(coalesce(teardown_owed, 0), $${params.length}::int)`;
  }
  const { rows } = await db.query<{ name: string }>(
    `UPDATE sandboxes SET phase = $1, reason = $2, generation = $3, runtime = ${runtime}, teardown_owed = ${owed}, updated_at = $4
     WHERE id = $5 AND generation = $6 AND phase = $7 RETURNING name`,
    params,
  );
  return rows[0]?.name ?? null;
}

export async function setRuntime(db: Queryable, id: string, expect: { phase: Phase; generation: number }, runtime: RuntimeRecord | null, time: string): Promise<boolean> {
  const r = await db.query(`UPDATE sandboxes SET runtime = $1, updated_at = $2 WHERE id = $3 AND generation = $4 AND phase = $5`, [
    runtime === null ? null : JSON.stringify(runtime),
    time,
    id,
    expect.generation,
    expect.phase,
  ]);
  return r.rowCount === 1;
}

export async function settleTeardown(db: Queryable, id: string, generation: number, time: string): Promise<boolean> {
  const r = await db.query(
    `UPDATE sandboxes SET teardown_owed = NULL,
       runtime = CASE WHEN phase IN ('Error', 'Completed') AND generation = $1 THEN NULL ELSE runtime END, updated_at = $2
     WHERE id = $3 AND teardown_owed IS NOT NULL AND teardown_owed <= $1`,
    [generation, time, id],
  );
  return r.rowCount === 1;
}

/** Remove the row of a sandbox Deleting at `generation` (labels, revisions and proposals go with it: foreign keys); its name, or null. */
export async function deleteDeleting(db: Queryable, id: string, generation: number): Promise<string | null> {
  const { rows } = await db.query<{ name: string }>(`DELETE FROM sandboxes WHERE id = $1 AND generation = $2 AND phase = 'Deleting' RETURNING name`, [id, generation]);
  return rows[0]?.name ?? null;
}

export async function countByPhase(db: Queryable): Promise<Record<Phase, number>> {
  const counts = Object.fromEntries(PHASES.map((p) => [p, 0])) as Record<Phase, number>;
  const { rows } = await db.query<{ phase: string; n: number }>(`SELECT phase, count(*) AS n FROM sandboxes GROUP BY phase`);
  for (const r of rows) if (r.phase in counts) counts[r.phase as Phase] = r.n;
  return counts;
}

// --- the expiry columns (--ttl, --idle-stop) ---

export async function expiringSandboxes(db: Queryable): Promise<ExpiringRow[]> {
  const { rows } = await db.query<{ id: string; name: string; phase: Phase; generation: number; ttl_deadline: string | null; last_active: string | null; ttl: number | null; idle: number | null }>(
    `SELECT id, name, phase, generation, ttl_deadline, last_active, (spec::jsonb->>'ttlSeconds')::float8 AS ttl, (spec::jsonb->>'idleStopSeconds')::float8 AS idle
     FROM sandboxes WHERE phase = ANY($1) AND (ttl_deadline IS NOT NULL OR spec::jsonb->>'idleStopSeconds' IS NOT NULL)`,
    [LIVE_PHASES],
  );
  return rows.map((r) => ({ id: r.id, name: r.name, phase: r.phase, generation: r.generation, ttlDeadline: r.ttl_deadline, ttlSeconds: r.ttl, idleStopSeconds: r.idle, lastActive: r.last_active }));
}

export async function setTtlDeadline(db: Queryable, id: string, generation: number, deadline: string | null): Promise<boolean> {
  return (await db.query(`UPDATE sandboxes SET ttl_deadline = $1 WHERE id = $2 AND generation = $3`, [deadline, id, generation])).rowCount === 1;
}

/** Last activity of several sandboxes in one statement; a time never moves back. */
export async function recordActivity(db: Queryable, entries: Iterable<[id: string, time: string]>): Promise<void> {
  const ids: string[] = [];
  const times: string[] = [];
  for (const [id, time] of entries) {
    ids.push(id);
    times.push(time);
  }
  if (ids.length === 0) return;
  await db.query(
    `UPDATE sandboxes s SET last_active = a.t FROM (SELECT id, max(t) AS t FROM unnest($1::text[], $2::text[]) AS x(id, t) GROUP BY id) a
     WHERE s.id = a.id AND (s.last_active IS NULL OR s.last_active < a.t)`,
    [ids, times],
  );
}

export async function expiryColumns(db: Queryable, id: string): Promise<{ ttlDeadline: string | null; lastActive: string | null } | null> {
  const { rows } = await db.query<{ ttl_deadline: string | null; last_active: string | null }>(`SELECT ttl_deadline, last_active FROM sandboxes WHERE id = $1`, [id]);
  return rows[0] ? { ttlDeadline: rows[0].ttl_deadline, lastActive: rows[0].last_active } : null;
}
