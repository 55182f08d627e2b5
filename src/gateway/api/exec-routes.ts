// Detached execs: POST /v1/sandboxes/:name/execs starts a command with no streams and
// answers its id; GET .../execs lists the sandbox's table, GET .../execs/:id one entry
// (running, or its exit code). Attached execs are the WebSocket (exec-ws.ts).

import type { FastifyReply, FastifyRequest } from "fastify";
import { ApiError } from "../errors.js";
import { EXEC_ID_RE } from "../sandboxes/detached-execs.js";
import type { ExecService } from "../sandboxes/exec-service.js";
import { execOptions } from "./exec-options.js";
import { DetachedExecBody, formatZodError } from "./schemas.js";

type Handler = (req: FastifyRequest, reply: FastifyReply) => Promise<unknown>;
/** The part of a fastify instance these routes need. */
interface Routes {
  post(path: string, handler: Handler): unknown;
  get(path: string, handler: Handler): unknown;
}

export function registerExecRoutes(app: Routes, execs: ExecService): void {
  app.post("/v1/sandboxes/:name/execs", async (req, reply) => {
    const body = DetachedExecBody.safeParse(req.body ?? {});
    if (!body.success) throw new ApiError("invalid_request", formatZodError(body.error));
    const view = await execs.detach((req.params as { name: string }).name, execOptions(body.data));
    return reply.code(201).send(view);
  });

  app.get("/v1/sandboxes/:name/execs", async (req) => ({ execs: execs.list((req.params as { name: string }).name) }));

  app.get("/v1/sandboxes/:name/execs/:id", async (req) => {
    const { name, id } = req.params as { name: string; id: string };
    if (!EXEC_ID_RE.test(id)) throw new ApiError("invalid_request", `invalid exec id ${JSON.stringify(id.slice(0, 80))}: expected ex_ and 16 hex digits, as exec --detach printed`);
    return execs.status(name, id);
  });
}
