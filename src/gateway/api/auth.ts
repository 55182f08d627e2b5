// Bearer-token check for the API, constant-time.

import { timingSafeEqual } from "node:crypto";
import type { Duplex } from "node:stream";
import type { AuthenticatedResult } from "../../util/connection-bounds.js";
import { ApiError } from "../errors.js";

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

/**
 * The API's one auth hook, for HTTP requests (api.ts's onRequest) and WebSocket upgrades
 * (upgrades.ts) alike: null when the request may go on, else its refusal: 401 for a missing
 * or wrong token, 503 when its connection cannot join the authenticated pool.
 */
export function authorize(header: string | undefined, socket: Duplex, token: string, authenticated: Authenticated | undefined): ApiError | null {
  if (!tokenMatches(header, token)) return new ApiError("unauthorized", "missing or wrong bearer token");
  const admitted = authenticated?.(socket) ?? { ok: true };
  return admitted.ok ? null : new ApiError("unavailable", admitted.reason);
}
