// The columns behind --ttl and --idle-stop (migration 9): the current generation's TTL
// deadline and the last activity seen, written apart from lifecycle transitions. The
// deadline is written when a generation's launch is committed; activity is written in
// batches by the one sweeper (src/gateway/sandboxes/expiry-sweeper.ts), never per request.

import type Database from "better-sqlite3";
import { stmt } from "./statements.js";
import { LIVE_PHASES, type Phase } from "../lifecycle/phases.js";
import type { ExpiringRow } from "./contract.js";

const LIVE = LIVE_PHASES.map((p) => `'${p}'`).join(", ");

/** Every live sandbox with a TTL deadline or an idle stop (one scan of the table, once per sweep). */
export function expiringSandboxes(db: Database.Database): ExpiringRow[] {
  const rows = stmt(
    db,
    `SELECT id, name, phase, generation, ttl_deadline, last_active,
       json_extract(spec, '$.ttlSeconds') AS ttl, json_extract(spec, '$.idleStopSeconds') AS idle
     FROM sandboxes WHERE phase IN (${LIVE}) AND (ttl_deadline IS NOT NULL OR json_extract(spec, '$.idleStopSeconds') IS NOT NULL)`,
  ).all() as { id: string; name: string; phase: Phase; generation: number; ttl_deadline: string | null; last_active: string | null; ttl: number | null; idle: number | null }[];
  return rows.map((r) => ({ id: r.id, name: r.name, phase: r.phase, generation: r.generation, ttlDeadline: r.ttl_deadline, ttlSeconds: r.ttl, idleStopSeconds: r.idle, lastActive: r.last_active }));
}

/** The TTL deadline of `generation` (null: none); false when the sandbox is no longer at it. */
export function setTtlDeadline(db: Database.Database, id: string, generation: number, deadline: string | null): boolean {
  return stmt(db, `UPDATE sandboxes SET ttl_deadline = ? WHERE id = ? AND generation = ?`).run(deadline, id, generation).changes === 1;
}

/** Last activity of several sandboxes, in one transaction; a time never moves back. */
export function recordActivity(db: Database.Database, entries: Iterable<[id: string, time: string]>): void {
  const update = stmt(db, `UPDATE sandboxes SET last_active = ? WHERE id = ? AND (last_active IS NULL OR last_active < ?)`);
  db.transaction(() => {
    for (const [id, time] of entries) update.run(time, id, time);
  })();
}

export function expiryColumns(db: Database.Database, id: string): { ttlDeadline: string | null; lastActive: string | null } | null {
  const r = stmt(db, `SELECT ttl_deadline, last_active FROM sandboxes WHERE id = ?`).get(id) as { ttl_deadline: string | null; last_active: string | null } | undefined;
  return r ? { ttlDeadline: r.ttl_deadline, lastActive: r.last_active } : null;
}
