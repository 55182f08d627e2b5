// GET /metrics: the Prometheus text exposition, behind the API's bearer token like
// every route (an unauthenticated scrape is a 401). Prometheus sends the token with
// `authorization: { credentials_file: ~/.sandgate/token }` in its scrape config.

import type { MetricsExposition } from "../metrics/contract.js";
import { route, type RouteGroup } from "./register.js";

export const metricsRoute: RouteGroup<{ metrics: MetricsExposition }> = async (app, { metrics }) => {
  route(app, "getMetrics", async (_req, reply) => reply.type(metrics.contentType).send(await metrics.scrape()));
};
