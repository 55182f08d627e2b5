// Versioned schema migrations, tracked in SQLite's `user_version`. Append only:
// a released migration is never edited, a change is a new entry.

import type Database from "better-sqlite3";

const MIGRATIONS: readonly string[] = [
  // 1: sandboxes and their append-only event log
  `
  CREATE TABLE sandboxes (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    phase       TEXT NOT NULL,
    reason      TEXT,              -- JSON ErrorReason, set only in Error
    generation  INTEGER NOT NULL,
    spec        TEXT NOT NULL,     -- JSON SandboxSpec
    runtime     TEXT,              -- JSON RuntimeRecord of the current generation
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
  );
  CREATE TABLE events (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    sandbox_id   TEXT NOT NULL,
    sandbox_name TEXT NOT NULL,
    generation   INTEGER NOT NULL,
    kind         TEXT NOT NULL,    -- phase | deleted | info | audit
    old_phase    TEXT,
    new_phase    TEXT,
    reason       TEXT,
    message      TEXT,
    data         TEXT,
    time         TEXT NOT NULL
  );
  CREATE INDEX events_by_sandbox ON events (sandbox_id, seq);
  `,
  // 2: numbered policy revisions per sandbox (the active one is the highest)
  `
  CREATE TABLE policies (
    sandbox_id  TEXT NOT NULL,
    revision    INTEGER NOT NULL,
    policy      TEXT NOT NULL,     -- canonical JSON of the validated policy
    hash        TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (sandbox_id, revision)
  );
  INSERT INTO policies (sandbox_id, revision, policy, hash, created_at)
    SELECT id, 1, json_extract(spec, '$.policy'), '', created_at FROM sandboxes WHERE json_extract(spec, '$.policy') IS NOT NULL;
  `,
  // 3: the policy lives only in its revisions (it went stale in the spec after a change)
  `
  UPDATE sandboxes SET spec = json_remove(spec, '$.policy') WHERE json_extract(spec, '$.policy') IS NOT NULL;
  `,
  // 4: a failed or completed generation owes the removal of its containers (and any
  // older ones) until a teardown succeeds, whatever step its launch reached
  `
  ALTER TABLE sandboxes ADD COLUMN teardown_owed INTEGER;
  UPDATE sandboxes SET teardown_owed = generation WHERE phase IN ('Error', 'Completed') AND runtime IS NOT NULL;
  `,
  // 5: egress decisions live apart from lifecycle events, with their own retention
  `
  CREATE TABLE audit (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    sandbox_id  TEXT NOT NULL,
    generation  INTEGER NOT NULL,
    time        TEXT NOT NULL,
    decision    TEXT NOT NULL,     -- allow | deny
    count       INTEGER NOT NULL,  -- decisions this record stands for (repeats are aggregated)
    event       TEXT NOT NULL      -- JSON of the supervisor's audit event
  );
  CREATE INDEX audit_by_sandbox ON audit (sandbox_id, seq);
  INSERT INTO audit (sandbox_id, generation, time, decision, count, event)
    SELECT sandbox_id, generation, time, coalesce(json_extract(data, '$.decision'), 'allow'), 1, coalesce(data, '{}') FROM events WHERE kind = 'audit' ORDER BY seq;
  DELETE FROM events WHERE kind = 'audit';
  `,
  // 6: secrets, encrypted (AES-256-GCM) with a key kept outside this database
  `
  CREATE TABLE secrets (
    name        TEXT PRIMARY KEY,
    version     INTEGER NOT NULL,
    nonce       BLOB NOT NULL,
    ciphertext  BLOB NOT NULL,
    tag         BLOB NOT NULL,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
  );
  `,
  // 7: a policy revision keeps the text the user wrote (YAML), to show it back as written
  `
  ALTER TABLE policies ADD COLUMN source TEXT;
  `,
  // 8: a sandbox's labels (src/lifecycle/labels.ts), one row each: a list filters on them
  // in SQL through the (key, value) index; they go with the sandbox's row
  `
  CREATE TABLE sandbox_labels (
    sandbox_id  TEXT NOT NULL,
    key         TEXT NOT NULL,
    value       TEXT NOT NULL,
    PRIMARY KEY (sandbox_id, key)
  ) WITHOUT ROWID;
  CREATE INDEX sandbox_labels_by_label ON sandbox_labels (key, value);
  CREATE TRIGGER sandbox_labels_go_with_sandbox AFTER DELETE ON sandboxes
  BEGIN
    DELETE FROM sandbox_labels WHERE sandbox_id = OLD.id;
  END;
  `,
  // 9: when the current generation's --ttl runs out, and the last exec, connect or egress
  // seen (written coalesced, for --idle-stop), so both survive a gateway restart
  `
  ALTER TABLE sandboxes ADD COLUMN ttl_deadline TEXT;
  ALTER TABLE sandboxes ADD COLUMN last_active TEXT;
  `,
  // 10: policy changes proposed (by an agent, through the API) for a person to approve or
  // reject (src/store/proposals-store.ts); bounded per sandbox, they go with its row
  `
  CREATE TABLE policy_proposals (
    seq            INTEGER PRIMARY KEY AUTOINCREMENT,
    id             TEXT NOT NULL UNIQUE,  -- pp_ and 16 hex digits
    sandbox_id     TEXT NOT NULL,
    input          TEXT NOT NULL,         -- JSON of the policy as given: YAML text or an object
    hash           TEXT NOT NULL,         -- policyHash of the parsed policy
    base_revision  INTEGER NOT NULL,      -- the active revision it was proposed against
    proposed_by    TEXT NOT NULL,
    reason         TEXT,
    state          TEXT NOT NULL,         -- pending | approved | rejected | superseded
    created_at     TEXT NOT NULL,
    decided_at     TEXT,
    decided_by     TEXT,
    decision_note  TEXT,
    revision       INTEGER                -- the revision an approval made
  );
  CREATE INDEX policy_proposals_by_sandbox ON policy_proposals (sandbox_id, state, seq);
  CREATE TRIGGER policy_proposals_go_with_sandbox AFTER DELETE ON sandboxes
  BEGIN
    DELETE FROM policy_proposals WHERE sandbox_id = OLD.id;
  END;
  `,
  // 11: the host whose Docker daemon runs the sandbox (--host-name). The embedded store has
  // one host, so its gateway drives every row whatever it says; '' is a row from before.
  `
  ALTER TABLE sandboxes ADD COLUMN host TEXT NOT NULL DEFAULT '';
  `,
];

export const SCHEMA_VERSION = MIGRATIONS.length;

/** Bring the schema to `to` (default: the current version); tests use `to` to build older files. */
export function migrate(db: Database.Database, to = MIGRATIONS.length): { from: number; to: number } {
  const from = db.pragma("user_version", { simple: true }) as number;
  if (from > MIGRATIONS.length) {
    throw new Error(
      `state database is at schema version ${from}, newer than this sandgate (${MIGRATIONS.length}); upgrade sandgate`,
    );
  }
  for (let v = from; v < to; v++) {
    db.transaction(() => {
      db.exec(MIGRATIONS[v]!);
      db.pragma(`user_version = ${v + 1}`);
    })();
  }
  return { from, to: Math.max(from, to) };
}
