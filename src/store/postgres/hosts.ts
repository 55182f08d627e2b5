// The fleet's hosts as the database knows them: every host with a lease row or a sandbox,
// whether a gateway drives it now, and its sandboxes. "Drives now" is the lease's session
// advisory lock being held (lease.ts): PostgreSQL drops it the moment the holder's session
// ends, so a killed gateway's host stops counting at once, whatever its row still says.

import { LIVE_PHASES } from "../../lifecycle/phases.js";
import type { HostRecord } from "../contract.js";
import { LOCKS } from "./schema.js";
import type { Queryable } from "./sql.js";

export async function listHosts(db: Queryable): Promise<HostRecord[]> {
  const { rows } = await db.query<{ host: string; owner: string | null; pid: number | null; epoch: number | null; acquired_at: string | null; driven: boolean; live: number; total: number }>(
    `WITH hosts AS (SELECT host FROM host_leases UNION SELECT DISTINCT host FROM sandboxes WHERE host <> '')
     SELECT h.host, l.owner, l.pid, l.epoch, l.acquired_at,
       EXISTS (SELECT 1 FROM pg_locks k
               WHERE k.locktype = 'advisory' AND k.granted AND k.objsubid = 2
                 AND k.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                 AND k.classid = $1::bigint::oid AND k.objid = (hashtext(h.host)::bigint & 4294967295)::oid) AS driven,
       (SELECT count(*) FROM sandboxes s WHERE s.host = h.host AND s.phase = ANY($2))::int AS live,
       (SELECT count(*) FROM sandboxes s WHERE s.host = h.host)::int AS total
     FROM hosts h LEFT JOIN host_leases l ON l.host = h.host ORDER BY h.host`,
    [LOCKS.namespace, LIVE_PHASES],
  );
  return rows.map((r) => ({
    host: r.host,
    driven: r.driven,
    live: r.live,
    total: r.total,
    lease: r.owner === null ? null : { gatewayId: r.owner, pid: r.pid!, epoch: r.epoch!, since: r.acquired_at! },
  }));
}
