// Policy revisions, policy proposals and secrets on PostgreSQL: the same rows and
// compare-and-sets as the SQLite modules (policies-store.ts, proposals-store.ts,
// secrets-store.ts). What a sandbox owns goes with its row by foreign keys.

import { policyHash, serializePolicy, type Policy } from "../../policy/index.js";
import type { PolicyRevision, ProposalDecision, ProposalRecord, ProposalState, SealedSecret, SecretRecord, SecretSummary } from "../contract.js";
import { toProposal, type ProposalRow } from "../rows.js";
import { sqlState, type Queryable } from "./sql.js";

// --- policy revisions ---

export async function insertPolicy(db: Queryable, sandboxId: string, revision: number, policy: Policy, time: string, source: string | null): Promise<void> {
  await db.query(`INSERT INTO policies (sandbox_id, revision, policy, hash, created_at, source) VALUES ($1, $2, $3, $4, $5, $6)`, [
    sandboxId,
    revision,
    serializePolicy(policy),
    policyHash(policy),
    time,
    source,
  ]);
}

export async function activePolicy(db: Queryable, sandboxId: string): Promise<PolicyRevision | null> {
  const { rows } = await db.query<{ revision: number; policy: string; hash: string; created_at: string; source: string | null }>(
    `SELECT revision, policy, hash, created_at, source FROM policies WHERE sandbox_id = $1 ORDER BY revision DESC LIMIT 1`,
    [sandboxId],
  );
  const r = rows[0];
  return r ? { revision: r.revision, policy: JSON.parse(r.policy) as Policy, source: r.source, hash: r.hash, createdAt: r.created_at } : null;
}

/**
 * The active revision's number (0: none), with the sandbox's row locked to the end of the
 * transaction: two revisions written at once for one sandbox are numbered one after the
 * other, and a compare-and-set on the active one sees the other's commit. Null when the
 * sandbox is gone.
 */
export async function lockActiveRevision(tx: Queryable, sandboxId: string): Promise<number | null> {
  // Two statements: under READ COMMITTED a statement that waited for the row lock still
  // reads the other tables as of its own start, so the highest revision is read after.
  const locked = await tx.query(`SELECT 1 FROM sandboxes WHERE id = $1 FOR UPDATE`, [sandboxId]);
  if (locked.rowCount !== 1) return null;
  return (await tx.query<{ r: number | null }>(`SELECT max(revision) AS r FROM policies WHERE sandbox_id = $1`, [sandboxId])).rows[0]!.r ?? 0;
}

// --- proposals ---

/** A new pending proposal; false when its sandbox is gone (also when it went between the check and the insert: the foreign key). */
export async function insertProposal(db: Queryable, p: Pick<ProposalRecord, "id" | "sandboxId" | "input" | "hash" | "baseRevision" | "proposedBy" | "reason" | "createdAt">): Promise<boolean> {
  try {
    const r = await db.query(
      `INSERT INTO policy_proposals (id, sandbox_id, input, hash, base_revision, proposed_by, reason, state, created_at)
       SELECT $1, $2, $3, $4, $5, $6, $7, 'pending', $8 WHERE EXISTS (SELECT 1 FROM sandboxes WHERE id = $2)`,
      [p.id, p.sandboxId, JSON.stringify(p.input), p.hash, p.baseRevision, p.proposedBy, p.reason, p.createdAt],
    );
    return r.rowCount === 1;
  } catch (err) {
    if (sqlState(err) === "23503") return false;
    throw err;
  }
}

export async function getProposal(db: Queryable, sandboxId: string, id: string): Promise<ProposalRecord | null> {
  const { rows } = await db.query<ProposalRow>(`SELECT * FROM policy_proposals WHERE sandbox_id = $1 AND id = $2`, [sandboxId, id]);
  return rows[0] ? toProposal(rows[0]) : null;
}

export async function listProposals(db: Queryable, sandboxId: string, state?: ProposalState): Promise<ProposalRecord[]> {
  const { rows } =
    state === undefined
      ? await db.query<ProposalRow>(`SELECT * FROM policy_proposals WHERE sandbox_id = $1 ORDER BY seq`, [sandboxId])
      : await db.query<ProposalRow>(`SELECT * FROM policy_proposals WHERE sandbox_id = $1 AND state = $2 ORDER BY seq`, [sandboxId, state]);
  return rows.map(toProposal);
}

export async function countPending(db: Queryable, sandboxId: string): Promise<number> {
  return (await db.query<{ n: number }>(`SELECT count(*) AS n FROM policy_proposals WHERE sandbox_id = $1 AND state = 'pending'`, [sandboxId])).rows[0]!.n;
}

/** Decide a pending proposal: true when this call moved it from pending. */
export async function decideProposal(db: Queryable, sandboxId: string, id: string, d: ProposalDecision): Promise<boolean> {
  const r = await db.query(
    `UPDATE policy_proposals SET state = $1, decided_at = $2, decided_by = $3, decision_note = $4, revision = $5 WHERE sandbox_id = $6 AND id = $7 AND state = 'pending'`,
    [d.state, d.at, d.by, d.note, d.revision, sandboxId, id],
  );
  return r.rowCount === 1;
}

export async function pruneDecided(db: Queryable, sandboxId: string, keep: number): Promise<number> {
  const r = await db.query(
    `DELETE FROM policy_proposals WHERE seq IN (
       SELECT seq FROM policy_proposals WHERE sandbox_id = $1 AND state <> 'pending' ORDER BY decided_at DESC, seq DESC OFFSET $2)`,
    [sandboxId, keep],
  );
  return r.rowCount ?? 0;
}

// --- secrets ---

/** Create or replace in one statement (the version is read and written by it, atomically); the new version. */
/** Where a change of a secret is announced (its name), at its commit: every gateway's SecretStore reads it again. */
export const SECRETS_CHANNEL = "sandgate_secrets";

export async function putSecret(db: Queryable, name: string, sealed: SealedSecret, time: string): Promise<number> {
  const { rows } = await db.query<{ version: number }>(
    `WITH w AS (
       INSERT INTO secrets (name, version, nonce, ciphertext, tag, created_at, updated_at) VALUES ($1, 1, $2, $3, $4, $5, $5)
       ON CONFLICT (name) DO UPDATE SET version = secrets.version + 1, nonce = excluded.nonce, ciphertext = excluded.ciphertext, tag = excluded.tag, updated_at = excluded.updated_at
       RETURNING version)
     SELECT version, pg_notify($6, $1) FROM w`,
    [name, sealed.nonce, sealed.ciphertext, sealed.tag, time, SECRETS_CHANNEL],
  );
  return rows[0]!.version;
}

export async function getSecret(db: Queryable, name: string): Promise<SecretRecord | null> {
  const { rows } = await db.query<{ name: string; version: number; nonce: Buffer; ciphertext: Buffer; tag: Buffer; created_at: string; updated_at: string }>(
    `SELECT * FROM secrets WHERE name = $1`,
    [name],
  );
  const r = rows[0];
  return r ? { name: r.name, version: r.version, nonce: r.nonce, ciphertext: r.ciphertext, tag: r.tag, createdAt: r.created_at, updatedAt: r.updated_at } : null;
}

export async function listSecrets(db: Queryable): Promise<SecretSummary[]> {
  const { rows } = await db.query<{ name: string; version: number; bytes: number; created_at: string; updated_at: string }>(
    `SELECT name, version, octet_length(ciphertext) AS bytes, created_at, updated_at FROM secrets ORDER BY name COLLATE "C"`,
  );
  return rows.map((r) => ({ name: r.name, version: r.version, bytes: r.bytes, createdAt: r.created_at, updatedAt: r.updated_at }));
}

export async function deleteSecret(db: Queryable, name: string): Promise<boolean> {
  const r = await db.query(`WITH d AS (DELETE FROM secrets WHERE name = $1 RETURNING name) SELECT pg_notify($2, name) FROM d`, [name, SECRETS_CHANNEL]);
  return r.rowCount === 1;
}
