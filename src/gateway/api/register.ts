// Registers a route of the table (routes.ts) with fastify: the method and path come from
// the table, the query and body are parsed with the table's schemas (a 400 naming the
// field), and the handler's JSON answer is typed by the table's response schema. So the
// documented contract and the served one are the same objects.

import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { FastifyInstance, FastifyPluginOptions, FastifyReply, FastifyRequest } from "fastify";
import type { Logger } from "pino";
import type { z } from "zod";
import { ApiError } from "../errors.js";
import { ROUTES, fastifyPath, type HttpOperationId, type RouteContract } from "../../api/routes.js";
import { formatZodError } from "../../api/schemas.js";

type Route<Op extends HttpOperationId> = (typeof ROUTES)[Op];

/** Arrays and objects read-only all the way down: a handler may answer with read-only data. */
type DeepReadonly<T> = T extends (infer U)[] ? readonly DeepReadonly<U>[] : T extends object ? { readonly [K in keyof T]: DeepReadonly<T[K]> } : T;

/** The JSON bodies the route documents for its success statuses. */
type JsonAnswer<R> = R extends { responses: infer Rs } ? { [S in keyof Rs]: Rs[S] extends { schema: infer Z extends z.ZodType } ? z.input<Z> : never }[keyof Rs] : never;

/** What a handler may return: a documented JSON body, or the reply it answered (or hijacked) itself. */
export type Answer<R> = DeepReadonly<JsonAnswer<R>> | FastifyReply | undefined;

/** The request's query and body, parsed with the route's schemas on first use. */
export interface RouteInput<R> {
  query(): R extends { query: infer Q extends z.ZodType } ? z.output<Q> : never;
  body(): R extends { body: { schema: infer B extends z.ZodType } } ? z.output<B> : never;
}

export type RouteHandler<Op extends HttpOperationId> = (req: FastifyRequest, reply: FastifyReply, input: RouteInput<Route<Op>>) => Answer<Route<Op>> | Promise<Answer<Route<Op>>>;

/** Whether the route a request matched is answered without the token (routes.ts `public`). */
export const isPublicRoute = (req: FastifyRequest): boolean => (req.routeOptions.config as { public?: boolean } | undefined)?.public === true;

/** The part of a fastify instance (or plugin scope) registration needs. */
export type RouteTarget = Pick<FastifyInstance<Server, IncomingMessage, ServerResponse, Logger>, "route">;

/** The API's fastify instance, as a route group's plugin gets its scope of it. */
export type ApiScope = FastifyInstance<Server, IncomingMessage, ServerResponse, Logger>;

/**
 * A group of routes (a *-routes.ts module): a fastify plugin, registered with what it
 * needs as its options by api.ts, the one place every group is registered. Its own scope
 * (encapsulation): what a group sets up, a content-type parser or a preClose hook, stays
 * its own, while the API's hooks (the token check, the request log) and error handlers,
 * set on the root before any group is registered, apply to every group's routes.
 */
export type RouteGroup<Opts extends FastifyPluginOptions> = (scope: ApiScope, opts: Opts) => Promise<void>;

function parse(schema: z.ZodType | undefined, value: unknown, what: string): unknown {
  if (schema === undefined) throw new Error(`the route has no ${what} schema`);
  const r = schema.safeParse(value ?? {});
  if (!r.success) throw new ApiError("invalid_request", formatZodError(r.error));
  return r.data;
}

export function route<Op extends HttpOperationId>(app: RouteTarget, op: Op, handler: RouteHandler<Op>): void {
  const r: RouteContract = ROUTES[op];
  const body = r.body !== undefined && "schema" in r.body ? r.body.schema : undefined;
  app.route({
    method: r.method,
    url: fastifyPath(r.path),
    // Read by the token check (api.ts): only a route the table marks public skips it.
    config: { public: r.public === true },
    handler: (req, reply) =>
      handler(req, reply, {
        query: () => parse(r.query, req.query, "query"),
        body: () => parse(body, req.body, "body"),
      } as RouteInput<Route<Op>>),
  });
}
