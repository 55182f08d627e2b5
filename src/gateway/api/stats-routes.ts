// GET /v1/sandboxes/:name/stats (one Ready sandbox) and GET /v1/stats (a page of the
// Ready ones, in name order: `{"stats": [...], "next": NAME|null}`).

import type { SandboxStats } from "../stats/sandbox-stats.js";
import { route, type RouteGroup } from "./register.js";
import { STATS_PAGE_MAX } from "../../api/schemas.js";

export const statsRoutes: RouteGroup<{ stats: SandboxStats }> = async (app, { stats }) => {
  route(app, "getSandboxStats", async (req) => stats.one((req.params as { name: string }).name));

  route(app, "listStats", async (_req, _reply, input) => {
    const q = input.query();
    const page = await stats.page({ after: q.after, limit: q.limit ?? STATS_PAGE_MAX });
    return { stats: page.sandboxes, next: page.next };
  });
};
