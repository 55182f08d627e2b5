// Policy proposals over the API: an agent's client proposes a policy change with the API
// token; only a person decides it. Approving or rejecting needs, besides the API token, the
// approver token (header X-Sandgate-Approver, the file <home>/approver-token that only
// `sandgate policy approve|reject` reads): an agent's client holding the API token only (the
// MCP server) can propose and read, never decide. Without an approver token configured
// nothing can be decided (fail closed). Threat model: docs/security.md, *Policy proposals*.
//
//   POST /v1/sandboxes/:name/policy/proposals               {policy, reason?, by?} → 201
//   GET  /v1/sandboxes/:name/policy/proposals[?state=S]
//   GET  /v1/sandboxes/:name/policy/proposals/:id[?since=T]  with diff and replay
//   POST /v1/sandboxes/:name/policy/proposals/:id/approve   {by?, wait?}  (approver token)
//   POST /v1/sandboxes/:name/policy/proposals/:id/reject    {by?, reason?} (approver token)

import { timingSafeEqual } from "node:crypto";
import type { FastifyRequest } from "fastify";
import { ApiError, POLICY_MAX_BYTES, tooLarge } from "../errors.js";
import type { PolicyProposals } from "../sandboxes/policy-proposals.js";
import type { SandboxService } from "../sandboxes/service.js";
import type { SandboxReadModel } from "../sandboxes/read-model.js";
import { route, type RouteGroup } from "./register.js";

/** The header that carries the approver token. */
export const APPROVER_HEADER = "x-sandgate-approver";

/** Constant-time: the header carries exactly the approver token. */
export function approverMatches(header: string | string[] | undefined, token: string | null): boolean {
  if (token === null || typeof header !== "string") return false;
  const given = Buffer.from(header);
  const want = Buffer.from(token);
  return given.length === want.length && timingSafeEqual(given, want);
}

export interface ProposalRouteDeps {
  proposals: PolicyProposals;
  service: SandboxService;
  read: SandboxReadModel;
  /** The approver token; null: nothing can be approved or rejected. */
  approverToken: string | null;
}

const params = (req: FastifyRequest): { name: string; id: string } => req.params as { name: string; id: string };

export const proposalRoutes: RouteGroup<ProposalRouteDeps> = async (app, d) => {
  route(app, "proposePolicy", async (req, reply, input) => {
    const body = input.body();
    const bytes = Buffer.byteLength(typeof body.policy === "string" ? body.policy : JSON.stringify(body.policy));
    if (bytes > POLICY_MAX_BYTES) throw tooLarge("policy", bytes, "1 MiB");
    return reply.code(201).send(await d.proposals.propose(params(req).name, body.policy, { by: body.by, reason: body.reason }));
  });

  route(app, "listProposals", async (req, _reply, input) => ({ proposals: await d.proposals.list(params(req).name, input.query().state) }));

  route(app, "getProposal", async (req, _reply, input) => await d.proposals.show(params(req).name, params(req).id, input.query().since));

  // Deciding needs the approver token as well as the API token.
  const approver = (req: FastifyRequest): void => {
    if (approverMatches(req.headers[APPROVER_HEADER], d.approverToken)) return;
    throw new ApiError(
      "forbidden",
      "deciding a policy proposal needs the approver token (header X-Sandgate-Approver: the gateway home's approver-token file, which `sandgate policy approve|reject` reads); the API token alone cannot approve or reject",
    );
  };

  route(app, "approveProposal", async (req, _reply, input) => {
    approver(req);
    const body = input.body();
    const { name, id } = params(req);
    const r = await d.proposals.approve(name, id, body.by);
    const s = await d.read.get(name);
    if (!body.wait) return { ...r, enforced: null, connectionsClosed: null, boundary: d.read.boundaryOf(s.id) };
    const w = await d.service.waitForPolicy(s.id, r.revision, body.wait * 1000);
    return { ...r, enforced: w.enforced, connectionsClosed: w.connectionsClosed, boundary: w.boundary };
  });

  route(app, "rejectProposal", async (req, _reply, input) => {
    approver(req);
    const body = input.body();
    const { name, id } = params(req);
    return await d.proposals.reject(name, id, body.by, body.reason);
  });
};
