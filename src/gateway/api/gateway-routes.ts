// The gateway itself: GET /healthz ("ok", the one route without the token), GET /v1/status,
// GET /v1/fleet and GET /v1/openapi.json (the API's document, built once on first ask).

import type { FleetView, StatusView } from "../../api/responses.js";
import { buildOpenApi } from "../../api/openapi.js";
import { route, type RouteGroup } from "./register.js";

export const gatewayRoutes: RouteGroup<{ status: () => Promise<StatusView>; fleet: () => Promise<FleetView> }> = async (app, { status, fleet }) => {
  route(app, "healthz", async (_req, reply) => reply.type("text/plain; charset=utf-8").send("ok\n"));
  route(app, "getStatus", async () => await status());
  route(app, "getFleet", async () => await fleet());
  let openapi: ReturnType<typeof buildOpenApi> | undefined;
  route(app, "getOpenApi", async () => (openapi ??= buildOpenApi()));
};
