// The PostgreSQL store's schema, versioned in a one-row table. Append only, like the
// SQLite migrations (src/store/migrations.ts): a released migration is never edited.
// The first one is the SQLite schema as it stands at its version 10, written for
// PostgreSQL: names compare bytewise (COLLATE "C", as SQLite's TEXT does, so a page's
// order and cursor are the same on both), rows a sandbox owns go with it by foreign
// keys, and times are ISO text (the same strings the API shows, ordered as text).
// Several gateways may start at once on one database: the migration runs under an
// advisory lock, and a database newer than this sandgate is refused.

import type { Queryable } from "./sql.js";

const MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE sandboxes (
    id             TEXT PRIMARY KEY,
    name           TEXT COLLATE "C" NOT NULL UNIQUE,
    phase          TEXT NOT NULL,
    reason         TEXT,
    generation     INTEGER NOT NULL,
    spec           TEXT NOT NULL,
    runtime        TEXT,
    teardown_owed  INTEGER,
    ttl_deadline   TEXT,
    last_active    TEXT,
    created_at     TEXT NOT NULL,
    updated_at     TEXT NOT NULL
  );
  CREATE TABLE sandbox_labels (
    sandbox_id  TEXT NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,
    key         TEXT COLLATE "C" NOT NULL,
    value       TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (sandbox_id, key)
  );
  CREATE INDEX sandbox_labels_by_label ON sandbox_labels (key, value);
  -- seq is taken under the events lock (events.ts), so sequence numbers become visible in commit order
  CREATE TABLE events (
    seq           BIGSERIAL PRIMARY KEY,
    sandbox_id    TEXT NOT NULL,
    sandbox_name  TEXT NOT NULL,
    generation    INTEGER NOT NULL,
    kind          TEXT NOT NULL,
    old_phase     TEXT,
    new_phase     TEXT,
    reason        TEXT,
    message       TEXT,
    data          TEXT,
    time          TEXT NOT NULL
  );
  CREATE INDEX events_by_sandbox ON events (sandbox_id, seq);
  CREATE TABLE policies (
    sandbox_id  TEXT NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,
    revision    INTEGER NOT NULL,
    policy      TEXT NOT NULL,
    hash        TEXT NOT NULL,
    source      TEXT,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (sandbox_id, revision)
  );
  CREATE TABLE audit (
    seq         BIGSERIAL PRIMARY KEY,
    sandbox_id  TEXT NOT NULL,
    generation  INTEGER NOT NULL,
    time        TEXT NOT NULL,
    decision    TEXT NOT NULL,
    count       INTEGER NOT NULL,
    event       TEXT NOT NULL
  );
  CREATE INDEX audit_by_sandbox ON audit (sandbox_id, seq);
  CREATE TABLE secrets (
    name        TEXT PRIMARY KEY,
    version     INTEGER NOT NULL,
    nonce       BYTEA NOT NULL,
    ciphertext  BYTEA NOT NULL,
    tag         BYTEA NOT NULL,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
  );
  CREATE TABLE policy_proposals (
    seq            BIGSERIAL PRIMARY KEY,
    id             TEXT NOT NULL UNIQUE,
    sandbox_id     TEXT NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,
    input          TEXT NOT NULL,
    hash           TEXT NOT NULL,
    base_revision  INTEGER NOT NULL,
    proposed_by    TEXT NOT NULL,
    reason         TEXT,
    state          TEXT NOT NULL,
    created_at     TEXT NOT NULL,
    decided_at     TEXT,
    decided_by     TEXT,
    decision_note  TEXT,
    revision       INTEGER
  );
  CREATE INDEX policy_proposals_by_sandbox ON policy_proposals (sandbox_id, state, seq);
  -- which gateway drives each host's Docker daemon (lease.ts); its epoch fences every state write
  CREATE TABLE host_leases (
    host         TEXT PRIMARY KEY,
    owner        TEXT NOT NULL,
    pid          INTEGER NOT NULL,
    epoch        BIGINT NOT NULL,
    acquired_at  TEXT NOT NULL
  );
  `,
  // 2: the host whose Docker daemon runs each sandbox; its gateway alone drives it. Rows
  // from before were made under "one host per database": they are that host's.
  `
  ALTER TABLE sandboxes ADD COLUMN host TEXT COLLATE "C" NOT NULL DEFAULT '';
  UPDATE sandboxes SET host = (SELECT min(host) FROM host_leases) WHERE host = '' AND (SELECT count(*) FROM host_leases) = 1;
  CREATE INDEX sandboxes_by_host ON sandboxes (host, phase);
  `,
];

export const PG_SCHEMA_VERSION = MIGRATIONS.length;

/** The advisory lock keys this store takes (one namespace: the first key). */
export const LOCKS = { namespace: 0x5a4e4447, migrate: 1, events: 2 } as const;

/** Bring the database to the current schema, under the migration lock (another gateway starting at once waits, then finds it done). */
export async function migrate(db: Queryable & { query(sql: string): Promise<unknown> }): Promise<{ from: number; to: number }> {
  await db.query("BEGIN");
  try {
    await db.query("SELECT pg_advisory_xact_lock($1, $2)", [LOCKS.namespace, LOCKS.migrate]);
    await db.query("CREATE TABLE IF NOT EXISTS sandgate_schema (version INTEGER NOT NULL)");
    const row = (await db.query<{ version: number }>("SELECT version FROM sandgate_schema")).rows[0];
    const from = row?.version ?? 0;
    if (from > MIGRATIONS.length) {
      throw new Error(`the PostgreSQL database is at Sandgate schema version ${from}, newer than this sandgate (${MIGRATIONS.length}); upgrade sandgate`);
    }
    for (let v = from; v < MIGRATIONS.length; v++) await db.query(MIGRATIONS[v]!);
    if (row === undefined) await db.query("INSERT INTO sandgate_schema (version) VALUES ($1)", [MIGRATIONS.length]);
    else await db.query("UPDATE sandgate_schema SET version = $1", [Math.max(from, MIGRATIONS.length)]);
    await db.query("COMMIT");
    return { from, to: Math.max(from, MIGRATIONS.length) };
  } catch (err) {
    await db.query("ROLLBACK").catch(() => undefined);
    throw err;
  }
}
