// GET /v1/sandboxes/:name/stats (one Ready sandbox) and GET /v1/stats (a page of the
// Ready ones, in name order: `{"stats": [...], "next": NAME|null}`).

import type { FastifyRequest } from "fastify";
import { ApiError } from "../errors.js";
import type { SandboxStats } from "../stats/sandbox-stats.js";
import { STATS_PAGE_MAX, StatsQuery, formatZodError } from "./schemas.js";

type Handler = (req: FastifyRequest) => Promise<unknown>;
/** The part of a fastify instance these routes need. */
interface Routes {
  get(path: string, handler: Handler): unknown;
}

export function registerStatsRoutes(app: Routes, stats: SandboxStats): void {
  app.get("/v1/sandboxes/:name/stats", async (req) => stats.one((req.params as { name: string }).name));

  app.get("/v1/stats", async (req) => {
    const q = StatsQuery.safeParse(req.query ?? {});
    if (!q.success) throw new ApiError("invalid_request", formatZodError(q.error));
    const page = await stats.page({ after: q.data.after, limit: q.data.limit ?? STATS_PAGE_MAX });
    return { stats: page.sandboxes, next: page.next };
  });
}
