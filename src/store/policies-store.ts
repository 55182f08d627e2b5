// The policies table (migrations 2 and 7): numbered policy revisions per sandbox, the
// active one the highest. A revision is never changed once written; a new one is
// numbered after the highest inside the Store's transaction (store.ts addPolicy), which
// is what makes its compare-and-set on the active revision hold.

import type Database from "better-sqlite3";
import { policyHash, serializePolicy, type Policy } from "../policy/index.js";
import type { PolicyRevision } from "./contract.js";
import { stmt } from "./statements.js";

export function insertPolicy(db: Database.Database, sandboxId: string, revision: number, policy: Policy, time: string, source: string | null): void {
  stmt(db, `INSERT INTO policies (sandbox_id, revision, policy, hash, created_at, source) VALUES (?, ?, ?, ?, ?, ?)`).run(
    sandboxId,
    revision,
    serializePolicy(policy),
    policyHash(policy),
    time,
    source,
  );
}

/** The active (highest) policy revision of a sandbox. */
export function activePolicy(db: Database.Database, sandboxId: string): PolicyRevision | null {
  const row = stmt(db, `SELECT revision, policy, hash, created_at, source FROM policies WHERE sandbox_id = ? ORDER BY revision DESC LIMIT 1`).get(sandboxId) as
    | { revision: number; policy: string; hash: string; created_at: string; source: string | null }
    | undefined;
  return row ? { revision: row.revision, policy: JSON.parse(row.policy) as Policy, source: row.source, hash: row.hash, createdAt: row.created_at } : null;
}

/** The active revision's number; 0 when there is none. */
export function activeRevision(db: Database.Database, sandboxId: string): number {
  return (stmt(db, `SELECT max(revision) AS r FROM policies WHERE sandbox_id = ?`).get(sandboxId) as { r: number | null }).r ?? 0;
}
