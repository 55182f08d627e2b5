// The table of policy proposals (migration 10): a policy change an agent proposed for a
// person to approve or reject. A proposal is decided once: its state moves from pending
// only by a compare-and-set here, so two deciders never both win. Rows go with their
// sandbox (a trigger); the caller bounds them (pending per sandbox, decided ones kept).

import type Database from "better-sqlite3";
import { stmt } from "./statements.js";
import { toProposal, type ProposalRow } from "./rows.js";

import type { ProposalDecision, ProposalRecord, ProposalState } from "./contract.js";

export type { ProposalRecord, ProposalState } from "./contract.js";

/** A new pending proposal; false when its sandbox is gone (nothing written). */
export function insertProposal(db: Database.Database, p: Pick<ProposalRecord, "id" | "sandboxId" | "input" | "hash" | "baseRevision" | "proposedBy" | "reason" | "createdAt">): boolean {
  return (
    stmt(
      db,
      `INSERT INTO policy_proposals (id, sandbox_id, input, hash, base_revision, proposed_by, reason, state, created_at)
       SELECT ?, ?, ?, ?, ?, ?, ?, 'pending', ? WHERE EXISTS (SELECT 1 FROM sandboxes WHERE id = ?)`,
    ).run(p.id, p.sandboxId, JSON.stringify(p.input), p.hash, p.baseRevision, p.proposedBy, p.reason, p.createdAt, p.sandboxId).changes === 1
  );
}

export function getProposal(db: Database.Database, sandboxId: string, id: string): ProposalRecord | null {
  const r = stmt(db, `SELECT * FROM policy_proposals WHERE sandbox_id = ? AND id = ?`).get(sandboxId, id) as ProposalRow | undefined;
  return r ? toProposal(r) : null;
}

/** A sandbox's proposals, oldest first; only those in `state` when given. */
export function listProposals(db: Database.Database, sandboxId: string, state?: ProposalState): ProposalRecord[] {
  const rows = state === undefined
    ? (stmt(db, `SELECT * FROM policy_proposals WHERE sandbox_id = ? ORDER BY seq`).all(sandboxId) as ProposalRow[])
    : (stmt(db, `SELECT * FROM policy_proposals WHERE sandbox_id = ? AND state = ? ORDER BY seq`).all(sandboxId, state) as ProposalRow[]);
  return rows.map(toProposal);
}

export function countPending(db: Database.Database, sandboxId: string): number {
  return (stmt(db, `SELECT count(*) AS n FROM policy_proposals WHERE sandbox_id = ? AND state = 'pending'`).get(sandboxId) as { n: number }).n;
}

/** Decide a pending proposal: true when it was pending and now is `state`; false when someone decided it first. */
export function decideProposal(
  db: Database.Database,
  sandboxId: string,
  id: string,
  d: ProposalDecision,
): boolean {
  return (
    stmt(
      db,
      `UPDATE policy_proposals SET state = ?, decided_at = ?, decided_by = ?, decision_note = ?, revision = ?
       WHERE sandbox_id = ? AND id = ? AND state = 'pending'`,
    ).run(d.state, d.at, d.by, d.note, d.revision, sandboxId, id).changes === 1
  );
}

/** Keep only the `keep` most recently decided proposals of a sandbox; returns how many went. */
export function pruneDecided(db: Database.Database, sandboxId: string, keep: number): number {
  return stmt(
    db,
    `DELETE FROM policy_proposals WHERE seq IN (
       SELECT seq FROM policy_proposals WHERE sandbox_id = ? AND state <> 'pending' ORDER BY decided_at DESC, seq DESC LIMIT -1 OFFSET ?)`,
  ).run(sandboxId, keep).changes;
}
