// The events table (migration 1): every sandbox's lifecycle log, numbered by `seq`
// across sandboxes so a watch stream resumes from one number. Written only inside the
// Store's transactions (store.ts), together with the change each event records; the
// Store emits an event to its listeners once that transaction commits.

import type Database from "better-sqlite3";
import type { Phase } from "../lifecycle/phases.js";
import type { EventRecord, LogQuery } from "./contract.js";
import { logWindow, stmt } from "./statements.js";
import { toEvent, type EventRow } from "./rows.js";

/** Append one event; returns it with its sequence number. */
export function insertEvent(db: Database.Database, e: Omit<EventRecord, "seq">): EventRecord {
  const info = stmt(
    db,
    `INSERT INTO events (sandbox_id, sandbox_name, generation, kind, old_phase, new_phase, reason, message, data, time)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  ).run(
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

/** When the sandbox last entered `phase` from another phase (ISO time), or null. */
export function enteredPhaseAt(db: Database.Database, sandboxId: string, phase: Phase): string | null {
  const row = stmt(
    db,
    `SELECT time FROM events WHERE sandbox_id = ? AND kind = 'phase' AND new_phase = ? AND (old_phase IS NULL OR old_phase <> new_phase)
     ORDER BY seq DESC LIMIT 1`,
  ).get(sandboxId, phase) as { time: string } | undefined;
  return row?.time ?? null;
}

/** A window of a sandbox's event log, oldest first (see LogQuery). */
export function eventWindow(db: Database.Database, sandboxId: string, q: LogQuery): EventRecord[] {
  return logWindow<EventRow>(db, "events", "", sandboxId, q).map(toEvent);
}

/** Events of every sandbox after a sequence number, oldest first (watch streams resuming). */
export function eventsAfter(db: Database.Database, afterSeq: number, limit: number): EventRecord[] {
  return (stmt(db, `SELECT * FROM events WHERE seq > ? ORDER BY seq LIMIT ?`).all(afterSeq, Math.min(limit, 10_000)) as EventRow[]).map(toEvent);
}

/**
 * Retention: the newest `perSandbox` events of each sandbox, and of a sandbox that is
 * gone nothing older than `cut` (a live sandbox's events are its history, whatever
 * their age). Returns the rows removed.
 */
export function pruneEvents(db: Database.Database, cut: string, perSandbox: number): number {
  let n = stmt(db, `DELETE FROM events WHERE time < ? AND sandbox_id NOT IN (SELECT id FROM sandboxes)`).run(cut).changes;
  n += stmt(db, `DELETE FROM events WHERE seq IN (SELECT seq FROM (SELECT seq, row_number() OVER (PARTITION BY sandbox_id ORDER BY seq DESC) AS n FROM events) WHERE n > ?)`).run(
    perSandbox,
  ).changes;
  return n;
}
