// Prepared statements, cached per database: the store's helper modules prepare each
// SQL text once per open database (preparing is the costly part of a query).

import type Database from "better-sqlite3";

const statements = new WeakMap<Database.Database, Map<string, Database.Statement>>();

/** `sql` prepared on `db`, once. */
export function stmt(db: Database.Database, sql: string): Database.Statement {
  let m = statements.get(db);
  if (!m) statements.set(db, (m = new Map<string, Database.Statement>()));
  let s = m.get(sql);
  if (!s) m.set(sql, (s = db.prepare(sql)));
  return s;
}
