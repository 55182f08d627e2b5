// The shape of a route contract: what an entry of the route table (routes.ts) says about
// an operation (method, path, parameters, body, answers, errors), the tags that group
// them, and the two ways a path is matched (fastify's form, a request URL). Split from
// the table so the table is only entries; routes.ts re-exports all of it. Contract
// only: zod and pure vocabulary.

import { z } from "zod";
import { NAME_RULE } from "../lifecycle/spec.js";

export type HttpMethod = "GET" | "PUT" | "POST" | "DELETE";
export const TAGS = ["gateway", "sandboxes", "policy", "audit", "execs", "files", "logs", "secrets", "stats"] as const;
export type Tag = (typeof TAGS)[number];

/** A JSON answer, validated against `schema` in the API tests. */
export interface JsonResponse {
  description: string;
  schema: z.ZodType;
}
/** A streamed or non-JSON answer: its media type and what it carries. */
export interface StreamResponse {
  description: string;
  content: string;
}
/** 101: the connection becomes a WebSocket. */
export interface UpgradeResponse {
  description: string;
  upgrade: true;
}
export type ResponseContract = JsonResponse | StreamResponse | UpgradeResponse;

/** Error statuses a route may answer besides those every route may (COMMON_ERRORS); the body is an ApiError. */
export type ErrorStatus = 403 | 404 | 409 | 413 | 503;
/**
 * Error statuses every route may answer: a malformed request, a missing or wrong token, a
 * failure of the gateway's own, and a listener that holds as many authenticated connections
 * as it may (`gateway start --max-connections`).
 */
export const COMMON_ERRORS = [400, 401, 500, 503] as const;

export interface RouteContract {
  method: HttpMethod;
  /** OpenAPI form: `/v1/sandboxes/{name}`. */
  path: string;
  summary: string;
  description?: string;
  tag: Tag;
  /** One schema per `{param}` of the path. */
  params: Record<string, z.ZodType>;
  query?: z.ZodType;
  /** A JSON body (`schema`), or raw bodies by media type (`content`: what each carries). */
  body?: { schema: z.ZodType; required?: boolean } | { content: Record<string, string> };
  responses: Partial<Record<100 | 101 | 200 | 201 | 202, ResponseContract>>;
  errors: readonly ErrorStatus[];
  /** A WebSocket upgrade, answered by the server's upgrade handler (src/gateway/api/exec-ws.ts, port-forward-ws.ts), not a fastify route. */
  websocket?: true;
  /** Answered without the token: it says nothing but that the gateway answers. */
  public?: true;
}

/** The path parameter `{name}`: a sandbox, by name or id (every table names it). */
export const sandboxName = { name: z.string().min(1).describe(`The sandbox's name (${NAME_RULE}) or id.`) };

/** An answer entry: its description and JSON schema, the schema's own type kept. */
export const json = <S extends z.ZodType>(description: string, schema: S): { description: string; schema: S } => ({ description, schema });

/** `/v1/sandboxes/{name}` → `/v1/sandboxes/:name` (fastify's form). */
export const fastifyPath = (path: string): string => path.replace(/\{(\w+)\}/g, ":$1");

/** A request URL (query allowed) matching the path: each `{param}` one segment, captured in order. */
export function pathPattern(path: string): RegExp {
  const parts = path.split(/\{\w+\}/).map((s) => s.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&"));
  return new RegExp(`^${parts.join("([^/?]+)")}(?:\\?|$)`);
}
