// Checks an answer of the gateway against the route table (src/api/routes.ts),
// the source the OpenAPI document is generated from: the status must be documented for
// the route, a JSON body must validate against the route's schema for that status (error
// bodies against ApiError, with the code that status carries), and a documented media
// type must be the one sent. The gateway fixture's api() runs it on every answer.

import { API_ERRORS, ApiErrorBody } from "../../src/api/responses.js";
import { COMMON_ERRORS, pathPattern, routeList, type RouteContract } from "../../src/api/routes.js";
import { formatZodError } from "../../src/api/schemas.js";

const ROUTES = routeList()
  .filter((r) => r.websocket !== true)
  .map((r) => ({ ...r, pattern: pathPattern(r.path), paramCount: (r.path.match(/\{/g) ?? []).length }));

/** The route a request reaches: fastify prefers static segments, so the match with the fewest parameters. */
export function routeFor(method: string, url: string): (RouteContract & { operationId: string }) | null {
  const path = url.replace(/[?#].*$/, "");
  const m = method.toUpperCase() === "HEAD" ? "GET" : method.toUpperCase();
  const hits = ROUTES.filter((r) => r.method === m && r.pattern.test(path)).sort((a, b) => a.paramCount - b.paramCount);
  return hits[0] ?? null;
}

function checkError(status: number, body: unknown): string | null {
  const e = ApiErrorBody.safeParse(body);
  if (!e.success) return `the error body is not an ApiError: ${formatZodError(e.error)}`;
  const expected = API_ERRORS[e.data.error.code];
  return expected === status ? null : `error code ${e.data.error.code} is answered with ${expected}, not ${status}`;
}

/** Null when the answer is as documented, else what is wrong with it. */
export function checkAnswer(method: string, url: string, status: number, contentType: string | null, body: unknown): string | null {
  const r = routeFor(method, url);
  // No route: fastify's not-found answer (after the token check) is an ApiError.
  if (r === null) return status === 404 || status === 401 || status === 400 ? checkError(status, body) : `no documented route, yet it answered ${status}`;
  const where = `${r.operationId} (${r.method} ${r.path})`;
  if (status >= 400) {
    const allowed: readonly number[] = [...COMMON_ERRORS, ...r.errors];
    if (!allowed.includes(status)) return `${where} answered ${status}, which it does not document (it documents ${allowed.join(", ")})`;
    const bad = checkError(status, body);
    return bad && `${where}: ${bad}`;
  }
  const doc = (r.responses as Record<number, RouteContract["responses"][200]>)[status];
  if (doc === undefined) return `${where} answered ${status}, which it does not document (it documents ${Object.keys(r.responses).join(", ")})`;
  if (method.toUpperCase() === "HEAD") return null;
  const type = (contentType ?? "").split(";")[0]!.trim().toLowerCase();
  if ("schema" in doc) {
    if (type !== "application/json") return `${where} answered ${status} as ${JSON.stringify(type)}, not application/json`;
    const v = doc.schema.safeParse(body);
    return v.success ? null : `${where} answered ${status} with a body its schema refuses: ${formatZodError(v.error)}`;
  }
  if ("content" in doc && type !== doc.content) return `${where} answered ${status} as ${JSON.stringify(type)}, not ${doc.content}`;
  return null;
}
