// A sandbox's policy: read it, set it (optionally waiting until the supervisor enforces
// it), check a request against it, and review a change before making it (diff, replay,
// suggest; nothing of those writes).

import type { FastifyRequest } from "fastify";
import { PolicyTools } from "../sandboxes/policy-tools.js";
import { POLICY_MAX_BYTES, tooLarge } from "../errors.js";
import type { SandboxReadModel } from "../sandboxes/read-model.js";
import type { SandboxService } from "../sandboxes/service.js";
import { route, type RouteGroup } from "./register.js";

const nameParam = (req: FastifyRequest): string => (req.params as { name: string }).name;

export const policyRoutes: RouteGroup<{ service: SandboxService; read: SandboxReadModel }> = async (app, { service, read }) => {
  route(app, "getPolicy", async (req) => {
    const p = await read.policyOf(nameParam(req));
    return { sandbox: p.sandbox.name, revision: p.revision, hash: p.hash, createdAt: p.createdAt, policy: p.policy, source: p.source, boundary: p.boundary };
  });

  route(app, "setPolicy", async (req, _reply, input) => {
    const body = input.body();
    checkPolicySize(body.policy);
    const { revision, pushed, phase } = await service.setPolicy(nameParam(req), body.policy);
    const s = await read.get(nameParam(req));
    if (!body.wait) return { revision, pushed, phase, enforced: null, connectionsClosed: null, boundary: read.boundaryOf(s.id) };
    const w = await service.waitForPolicy(s.id, revision, body.wait * 1000);
    return { revision, pushed, phase, enforced: w.enforced, connectionsClosed: w.connectionsClosed, boundary: w.boundary };
  });

  route(app, "checkPolicy", async (req, _reply, input) => {
    const body = input.body();
    return await service.checkPolicy(nameParam(req), body.url, body.method);
  });

  // Reviewing a change before making it; nothing here writes.
  const tools = new PolicyTools(read);
  route(app, "diffPolicy", async (req, _reply, input) => await tools.diff(nameParam(req), input.body().policy));
  route(app, "replayPolicy", async (req, _reply, input) => {
    const body = input.body();
    return await tools.replay(nameParam(req), body.policy, body.since);
  });
  route(app, "suggestPolicy", async (req, _reply, input) => await tools.suggest(nameParam(req), input.query().since));
};

/** A policy (YAML text, or an object as JSON) is at most POLICY_MAX_BYTES: 413 naming its size. */
export function checkPolicySize(policy: string | Record<string, unknown> | undefined): void {
  if (policy === undefined) return;
  const bytes = Buffer.byteLength(typeof policy === "string" ? policy : JSON.stringify(policy));
  if (bytes > POLICY_MAX_BYTES) throw tooLarge("policy", bytes, "1 MiB");
}
