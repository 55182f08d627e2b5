// When a running sandbox is stopped on its own: its --ttl has run out, or it has been
// idle (no exec, no connect, no egress) for its --idle-stop. Pure: the clock is a
// parameter, so every case is tested without waiting.
//
// A TTL counts from the launch of each generation (create, start): a sandbox stopped
// at its TTL can be started again for another TTL. Stopping (never deleting) keeps
// the workspace; `sandbox delete` is always the user's decision.

import type { StopReason } from "./phases.js";
import { formatDuration } from "./process-input.js";

export interface ExpiryInput {
  /** When the current generation's TTL runs out (ms since the epoch), or null. */
  ttlDeadlineMs: number | null;
  /** The TTL it was given (seconds), for the message. */
  ttlSeconds?: number;
  /** --idle-stop in seconds, or null. */
  idleStopSeconds: number | null;
  /** The last exec, connect or egress seen (ms since the epoch), or the generation's launch. */
  lastActiveMs: number;
  /** Exec and connect sessions open now: a sandbox is never idle while one is. */
  openSessions: number;
}

export type ExpiryVerdict = { stop: StopReason } | { stop: null; nextMs: number | null };

const iso = (ms: number): string => new Date(ms).toISOString();

/** The idle deadline, or null when the sandbox cannot go idle now (no --idle-stop, or a session is open). */
export function idleDeadline(i: ExpiryInput): number | null {
  if (i.idleStopSeconds === null || i.openSessions > 0) return null;
  return i.lastActiveMs + i.idleStopSeconds * 1000;
}

/** Stop now (and why), or when to look again (null: nothing to wait for until something changes). */
export function expiryVerdict(nowMs: number, i: ExpiryInput): ExpiryVerdict {
  if (i.ttlDeadlineMs !== null && nowMs >= i.ttlDeadlineMs) {
    const ttl = i.ttlSeconds === undefined ? "its TTL" : `its TTL of ${formatDuration(i.ttlSeconds)}`;
    return { stop: { code: "TtlExpired", detail: `${ttl} ran out at ${iso(i.ttlDeadlineMs)}` } };
  }
  const idle = idleDeadline(i);
  if (idle !== null && nowMs >= idle) {
    return { stop: { code: "IdleTimeout", detail: `no exec, connect or egress for ${formatDuration(i.idleStopSeconds!)} (last activity ${iso(i.lastActiveMs)})` } };
  }
  const next = [i.ttlDeadlineMs, idle].filter((t): t is number => t !== null);
  return { stop: null, nextMs: next.length > 0 ? Math.min(...next) : null };
}
