// The secrets table (migration 6): each secret's value sealed with AES-256-GCM by the
// gateway (src/gateway/secrets/secret-store.ts). The store sees only the sealed parts
// (nonce, ciphertext, tag), never a key or a value: the encryption stays the gateway's,
// the SQL stays here.

import type Database from "better-sqlite3";
import type { SealedSecret, SecretRecord, SecretSummary } from "./contract.js";
import { stmt } from "./statements.js";

/** Create or replace, in one transaction (the version read and the write cannot interleave); returns the new version. */
export function putSecret(db: Database.Database, name: string, sealed: SealedSecret, time: string): number {
  return db.transaction(() => {
    const prev = stmt(db, `SELECT version FROM secrets WHERE name = ?`).get(name) as { version: number } | undefined;
    const version = (prev?.version ?? 0) + 1;
    stmt(
      db,
      `INSERT INTO secrets (name, version, nonce, ciphertext, tag, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT(name) DO UPDATE SET version = excluded.version, nonce = excluded.nonce, ciphertext = excluded.ciphertext, tag = excluded.tag, updated_at = excluded.updated_at`,
    ).run(name, version, sealed.nonce, sealed.ciphertext, sealed.tag, time, time);
    return version;
  })();
}

export function getSecret(db: Database.Database, name: string): SecretRecord | null {
  const r = stmt(db, `SELECT * FROM secrets WHERE name = ?`).get(name) as
    | { name: string; version: number; nonce: Buffer; ciphertext: Buffer; tag: Buffer; created_at: string; updated_at: string }
    | undefined;
  return r ? { name: r.name, version: r.version, nonce: r.nonce, ciphertext: r.ciphertext, tag: r.tag, createdAt: r.created_at, updatedAt: r.updated_at } : null;
}

/** Every secret, by name. */
export function listSecrets(db: Database.Database): SecretSummary[] {
  const rows = stmt(db, `SELECT name, version, length(ciphertext) AS bytes, created_at, updated_at FROM secrets ORDER BY name`).all() as {
    name: string;
    version: number;
    bytes: number;
    created_at: string;
    updated_at: string;
  }[];
  return rows.map((r) => ({ name: r.name, version: r.version, bytes: r.bytes, createdAt: r.created_at, updatedAt: r.updated_at }));
}

/** True when there was one. */
export function deleteSecret(db: Database.Database, name: string): boolean {
  return stmt(db, `DELETE FROM secrets WHERE name = ?`).run(name).changes === 1;
}
