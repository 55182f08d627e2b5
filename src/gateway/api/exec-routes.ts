// Detached execs: POST /v1/sandboxes/:name/execs starts a command with no streams and
// answers its id; GET .../execs lists the sandbox's table, GET .../execs/:id one entry
// (running, or its exit code). Attached execs are the WebSocket (exec-ws.ts).

import { ApiError } from "../errors.js";
import { EXEC_ID_RE } from "../sandboxes/detached-execs.js";
import type { ExecService } from "../sandboxes/exec-service.js";
import { execOptions } from "./exec-options.js";
import { route, type RouteGroup } from "./register.js";

export const execRoutes: RouteGroup<{ execs: ExecService }> = async (app, { execs }) => {
  route(app, "startDetachedExec", async (req, reply, input) => {
    const view = await execs.detach((req.params as { name: string }).name, execOptions(input.body()));
    return reply.code(201).send(view);
  });

  route(app, "listDetachedExecs", async (req) => ({ execs: await execs.list((req.params as { name: string }).name) }));

  route(app, "getDetachedExec", async (req) => {
    const { name, id } = req.params as { name: string; id: string };
    if (!EXEC_ID_RE.test(id)) throw new ApiError("invalid_request", `invalid exec id ${JSON.stringify(id.slice(0, 80))}: expected ex_ and 16 hex digits, as exec --detach printed`);
    return await execs.status(name, id);
  });
};
