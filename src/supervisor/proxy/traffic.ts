// What one exchange moved on the workload's connection, for its audit record: the
// socket's own counters read at the start and at the end (no per-chunk work on the
// relay path). Headers count; a connection that carries several requests one after
// another gives each its share.
import type { Duplex } from "node:stream";

export interface Traffic {
  /** Workload → origin. */
  bytesOut: number;
  /** Origin → workload. */
  bytesIn: number;
  durationMs: number;
}

interface Counted {
  bytesRead?: number;
  bytesWritten?: number;
}

/**
 * Starts measuring `socket` now; the returned function reads what moved since. `facing`: whose
 * socket it is — the workload's connection (what it reads went out) or the one to the origin
 * (what it writes goes out).
 */
export function meter(socket: Duplex | undefined, facing: "workload" | "origin", now: () => number = Date.now): () => Traffic {
  const s = socket as Counted | undefined;
  const read0 = s?.bytesRead ?? 0;
  const written0 = s?.bytesWritten ?? 0;
  const t0 = now();
  return () => {
    const read = Math.max(0, (s?.bytesRead ?? 0) - read0);
    const written = Math.max(0, (s?.bytesWritten ?? 0) - written0);
    const durationMs = Math.max(0, Math.round(now() - t0));
    return facing === "workload" ? { bytesOut: read, bytesIn: written, durationMs } : { bytesOut: written, bytesIn: read, durationMs };
  };
}
