// Aggregates over the store's tables, each one query: sandboxes by phase (a metrics
// scrape) and one generation's egress totals from its audit trail (`sandbox stats`).

import { PHASES, type Phase } from "../lifecycle/phases.js";
import type Database from "better-sqlite3";
import type { EgressTotals } from "./contract.js";
import { stmt } from "./statements.js";

/** How many sandboxes are in each phase; every phase is present (0 when none). */
export function countByPhase(db: Database.Database): Record<Phase, number> {
  const counts = Object.fromEntries(PHASES.map((p) => [p, 0])) as Record<Phase, number>;
  const rows = stmt(db, `SELECT phase, count(*) AS n FROM sandboxes GROUP BY phase`).all() as { phase: string; n: number }[];
  for (const r of rows) if (r.phase in counts) counts[r.phase as Phase] = r.n;
  return counts;
}

export function egressTotals(db: Database.Database, sandboxId: string, generation: number): EgressTotals {
  const row = stmt(
      db,
      `SELECT
         coalesce(sum(json_extract(event, '$.bytesOut')), 0) AS bytes_out,
         coalesce(sum(json_extract(event, '$.bytesIn')), 0) AS bytes_in,
         coalesce(sum(CASE WHEN decision IN ('allow', 'would_deny') AND json_extract(event, '$.activity') IS NULL THEN count END), 0) AS allowed,
         coalesce(sum(CASE WHEN decision = 'deny' THEN count END), 0) AS denied,
         coalesce(sum(CASE WHEN decision = 'would_deny' AND json_extract(event, '$.activity') IS NULL THEN count END), 0) AS would_deny,
         coalesce(sum(CASE WHEN decision = 'dropped' THEN count END), 0) AS dropped,
         min(time) AS since
       FROM audit WHERE sandbox_id = ? AND generation = ? AND decision <> 'policy'`,
    ).get(sandboxId, generation) as { bytes_out: number; bytes_in: number; allowed: number; denied: number; would_deny: number; dropped: number; since: string | null };
  return { bytesOut: row.bytes_out, bytesIn: row.bytes_in, allowed: row.allowed, denied: row.denied, wouldDeny: row.would_deny, dropped: row.dropped, since: row.since };
}
