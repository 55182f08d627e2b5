// The gateway itself: GET /healthz ("ok", the one route without the token), GET /v1/status
// and GET /v1/openapi.json (the API's document, built once on first ask).

import type { StatusView } from "../../api/responses.js";
import { buildOpenApi } from "../../api/openapi.js";
import { route, type RouteGroup } from "./register.js";

export const gatewayRoutes: RouteGroup<{ status: () => Promise<StatusView> }> = async (app, { status }) => {
  route(app, "healthz", async (_req, reply) => reply.type("text/plain; charset=utf-8").send("ok\n"));
  route(app, "getStatus", async () => await status());
  let openapi: ReturnType<typeof buildOpenApi> | undefined;
  route(app, "getOpenApi", async () => (openapi ??= buildOpenApi()));
};
