// GET /metrics: the Prometheus text exposition, behind the API's bearer token like
// every route (an unauthenticated scrape is a 401). Prometheus sends the token with
// `authorization: { credentials_file: ~/.sandgate/token }` in its scrape config.

import type { FastifyReply, FastifyRequest } from "fastify";
import type { MetricsExposition } from "../metrics/contract.js";

/** The part of a fastify instance this route needs. */
interface Routes {
  get(path: string, handler: (req: FastifyRequest, reply: FastifyReply) => Promise<unknown>): unknown;
}

export function registerMetricsRoute(app: Routes, metrics: MetricsExposition): void {
  app.get("/metrics", async (_req, reply) => reply.type(metrics.contentType).send(await metrics.scrape()));
}
