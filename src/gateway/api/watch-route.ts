// GET /v1/watch: the Server-Sent Events stream of lifecycle events (watch.ts's WatchHub
// serves it; the stream is hijacked from fastify, and api.ts has the hub end it on close).

import { ApiError } from "../errors.js";
import type { SandboxReadModel } from "../sandboxes/read-model.js";
import type { WatchHub } from "./watch.js";
import { route, type RouteGroup } from "./register.js";

export const watchRoute: RouteGroup<{ read: SandboxReadModel; hub: WatchHub }> = async (app, { read, hub }) => {
  route(app, "watch", async (req, reply, input) => {
    const q = input.query();
    // By id, a deleted sandbox whose events are still in the log can be resumed to its end.
    const only = q.sandbox === undefined ? undefined : await read.watchable(q.sandbox);
    const lastId = Number(req.headers["last-event-id"]);
    const after = q.after ?? (Number.isSafeInteger(lastId) && lastId >= 0 ? lastId : undefined);
    if (!hub.canAccept()) throw new ApiError("unavailable", `too many watch streams open (${hub.size}); close one or raise the limit`);
    reply.hijack();
    await hub.attach(req.raw, reply.raw, { only, after });
    return undefined;
  });
};
