// Bearer-token check for the API, constant-time.

import { timingSafeEqual } from "node:crypto";
import type { Duplex } from "node:stream";
import type { AuthenticatedResult } from "../../util/connection-bounds.js";

/**
 * Told of a connection whose request passed the token check (connection-bounds.ts moves it to
 * the authenticated pool); `ok: false` when that pool is full: the request is refused (503).
 */
export type Authenticated = (socket: Duplex) => AuthenticatedResult;

export function tokenMatches(header: string | undefined, token: string): boolean {
  const m = /^Bearer (.+)$/.exec(header ?? "");
  if (!m) return false;
  const given = Buffer.from(m[1]!);
  const want = Buffer.from(token);
  return given.length === want.length && timingSafeEqual(given, want);
}
