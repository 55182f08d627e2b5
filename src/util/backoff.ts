// Bounded exponential backoff with jitter: the one used for reconnecting to
// Docker and for a supervisor's control session. Pure.

export interface BackoffPolicy {
  initialMs: number;
  factor: number;
  maxMs: number;
  /** ± fraction of the delay, e.g. 0.2 for ±20 %. */
  jitter: number;
}

// Docker: capped at 2 s, so a daemon that comes back is noticed within about 2 s,
// at a cost of one failed connect per 2 s while it is away.
export const DEFAULT_BACKOFF: BackoffPolicy = { initialMs: 200, factor: 1.6, maxMs: 2_000, jitter: 0.2 };

/** Delay before reconnect attempt `attempt` (0-based); `random` in [0, 1). */
export function backoffDelay(attempt: number, random: number, p: BackoffPolicy = DEFAULT_BACKOFF): number {
  const n = attempt > 0 ? attempt : 0; // negatives and NaN count as the first attempt
  // initialMs 0 is "no delay": 0 · factor^n would be NaN once factor^n overflows to Infinity.
  const base = p.initialMs > 0 ? Math.min(p.maxMs, p.initialMs * Math.pow(p.factor, n)) : 0;
  const spread = base * p.jitter * (2 * random - 1);
  return Math.max(0, Math.round(Math.min(p.maxMs * (1 + p.jitter), base + spread)));
}
