// What the store's table modules share: prepared statements, cached per database (each
// SQL text is prepared once per open database: preparing is the costly part of a
// query), JSON columns, and the window query the two logs (events, audit) are read by.

import type Database from "better-sqlite3";
import type { LogQuery } from "./contract.js";

const statements = new WeakMap<Database.Database, Map<string, Database.Statement>>();

/** `sql` prepared on `db`, once. */
export function stmt(db: Database.Database, sql: string): Database.Statement {
  let m = statements.get(db);
  if (!m) statements.set(db, (m = new Map<string, Database.Statement>()));
  let s = m.get(sql);
  if (!s) m.set(sql, (s = db.prepare(sql)));
  return s;
}

// eslint-disable-next-line @typescript-eslint/no-unnecessary-type-parameters -- typed JSON columns
export const parse = <T>(text: string | null): T | null => (text === null ? null : (JSON.parse(text) as T));

/** A window of a log table (events or audit) of one sandbox, oldest first (see LogQuery); `extra` narrows it with `extraParams`. */
export function logWindow<Row>(
  db: Database.Database,
  table: "events" | "audit",
  extra: string,
  sandboxId: string,
  q: LogQuery,
  extraParams: unknown[] = [],
): Row[] {
  const limit = Math.min(q.tail ?? q.limit ?? 1000, 10_000);
  const where = `sandbox_id = ? AND seq > ? AND seq < ? ${extra}`;
  const params = [sandboxId, q.afterSeq ?? 0, q.beforeSeq ?? Number.MAX_SAFE_INTEGER, ...extraParams, limit];
  if (q.tail !== undefined) {
    return stmt(db, `SELECT * FROM (SELECT * FROM ${table} WHERE ${where} ORDER BY seq DESC LIMIT ?) ORDER BY seq`).all(...params) as Row[];
  }
  return stmt(db, `SELECT * FROM ${table} WHERE ${where} ORDER BY seq LIMIT ?`).all(...params) as Row[];
}
