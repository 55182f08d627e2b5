// policy_get, policy_check, policy_propose and policy_proposal_status. The agent may
// propose a policy change and follow it; only a person approves it (`sandgate policy
// approve`, which needs the approver token). This server never reads that token and
// offers no tool to approve or reject.

import { z } from "zod";
import { PROPOSAL_STATES } from "../policy/proposals.js";
import { SandgateError, type ProposalView } from "../sdk/index.js";
import { sandbox, type ToolContext } from "./context.js";
import { NAME_MAX_CHARS, POLICY_MAX_CHARS, REASON_MAX_CHARS, URL_MAX_CHARS } from "./limits.js";
import { ok } from "./results.js";

const name = z.string().min(1).max(NAME_MAX_CHARS).describe("the sandbox's name (or id)");
const revision = z.number().int();

/** policy_propose's example: a whole policy (docs/policy.md) that allows HTTPS to PyPI and nothing else. */
export const POLICY_EXAMPLE = `version: 1
network:
  rules:
    - name: pypi
      endpoints:
        - host: pypi.org
          port: 443
          protocol: https
        - host: files.pythonhosted.org
          port: 443
          protocol: https
`;

/** policy_proposal_status's answer: a proposal as the gateway lists it, but for its sandbox and hash. */
const proposalStatus = {
  id: z.string(),
  state: z.enum(PROPOSAL_STATES),
  stale: z.boolean().describe("pending, but the active revision is no longer its base: approving it would be refused"),
  baseRevision: revision,
  revision: revision.nullable().describe("the revision its approval made"),
  proposedBy: z.string(),
  reason: z.string().nullable(),
  createdAt: z.string(),
  decidedAt: z.string().nullable(),
  decidedBy: z.string().nullable(),
  decisionNote: z.string().nullable().describe("why it was rejected or superseded"),
};

export function registerPolicyTools(ctx: ToolContext): void {
  ctx.server.registerTool(
    "policy_get",
    {
      title: "Get a sandbox's network policy",
      description: "The sandbox's active network policy (the egress it allows), its revision and whether the supervisor enforces it.",
      inputSchema: z.strictObject({ sandbox: name }),
      outputSchema: z.strictObject({
        revision,
        hash: z.string(),
        policy: z.string().describe("the policy as the YAML it was given in (as JSON when it was given as an object)"),
        enforcedRevision: revision.nullable().describe("the revision the supervisor enforces; null: none running"),
      }),
      annotations: { title: "Get a sandbox's network policy", readOnlyHint: true, openWorldHint: false },
    },
    (a) =>
      ctx.run(async () => {
        const p = await (await sandbox(ctx, a.sandbox)).policy.get();
        const text = p.source ?? JSON.stringify(p.policy, null, 2);
        const enforced = p.boundary ? `enforced revision ${p.boundary.enforcedRevision ?? "-"}` : "no supervisor";
        return ok(`revision ${p.revision} (${enforced}):\n${text}`, { revision: p.revision, hash: p.hash, policy: text, enforcedRevision: p.boundary?.enforcedRevision ?? null });
      }),
  );

  ctx.server.registerTool(
    "policy_check",
    {
      title: "Check a URL against a sandbox's policy",
      description: "A dry run: what the sandbox's active network policy decides for a request to url (allow, and by which rule, or deny, and why). Nothing is sent. A deny is an answer, not an error.",
      inputSchema: z.strictObject({
        sandbox: name,
        url: z.string().min(1).max(URL_MAX_CHARS).describe("e.g. https://pypi.org/simple/requests/"),
        method: z.string().min(1).max(32).regex(/^[A-Za-z]+$/).default("GET").describe("the HTTP method (default GET; it matters for http:// URLs)"),
      }),
      outputSchema: z.strictObject({
        revision,
        allow: z.boolean(),
        rule: z.string().nullable().describe("the rule that decided, when one did"),
        reason: z.string().nullable().describe("why it is denied"),
      }),
      annotations: { title: "Check a URL against a sandbox's policy", readOnlyHint: true, openWorldHint: false },
    },
    (a) =>
      ctx.run(async () => {
        const r = await (await sandbox(ctx, a.sandbox)).policy.check(a.url, { method: a.method });
        const d = r.decision;
        const text = d.allow ? `allow (rule ${d.rule ?? "?"}, revision ${r.revision})` : `deny (${d.reason ?? "?"}${d.rule ? `, rule ${d.rule}` : ""}, revision ${r.revision})`;
        return ok(text, { revision: r.revision, allow: d.allow, rule: d.rule ?? null, reason: d.reason ?? null });
      }),
  );

  ctx.server.registerTool(
    "policy_propose",
    {
      title: "Propose a network policy change",
      description: `Proposes a new network policy (the whole policy, as YAML: start from policy_get's) for a person to review and approve; nothing changes until they do. Say why in reason. The answer is the proposal's id; its state stays pending until a person decides (policy_proposal_status). E.g. a policy that allows HTTPS to PyPI and nothing else:\n\n${POLICY_EXAMPLE}`,
      inputSchema: z.strictObject({
        sandbox: name,
        policy: z.string().min(1).max(POLICY_MAX_CHARS).describe("the whole proposed policy as YAML (docs/policy.md), e.g. version: 1, then network.rules, each a name and its endpoints (host, port, protocol)"),
        reason: z.string().max(REASON_MAX_CHARS).optional().describe(`why, for the person who decides (one line, at most ${REASON_MAX_CHARS} characters)`),
      }),
      outputSchema: z.strictObject({ id: z.string(), state: z.enum(PROPOSAL_STATES), baseRevision: revision }),
      // Only a proposal: nothing is changed.
      annotations: { title: "Propose a network policy change", readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
    },
    (a) =>
      ctx.run(async () => {
        const sb = await sandbox(ctx, a.sandbox);
        const p = await sb.policy.propose(a.policy, { by: "mcp", ...(a.reason === undefined ? {} : { reason: a.reason }) });
        return ok(`proposal ${p.id} is ${p.state} against revision ${p.baseRevision}; a person decides it (sandgate policy approve|reject ${sb.name} ${p.id})`, {
          id: p.id,
          state: p.state,
          baseRevision: p.baseRevision,
        });
      }),
  );

  ctx.server.registerTool(
    "policy_proposal_status",
    {
      title: "Get a policy proposal's status",
      description:
        "A policy proposal's state, by its id (policy_propose's answer): pending (stale when the policy changed since: it cannot be approved; propose again), approved (the revision it made), rejected (the person's note) or superseded.",
      inputSchema: z.strictObject({ sandbox: name, id: z.string().min(1).max(NAME_MAX_CHARS).describe("the proposal's id, e.g. pp_3f2a9c0e51d27b84") }),
      outputSchema: z.strictObject(proposalStatus),
      annotations: { title: "Get a policy proposal's status", readOnlyHint: true, openWorldHint: false },
    },
    (a) =>
      ctx.run(async () => {
        const sb = await sandbox(ctx, a.sandbox);
        // The list, not the proposal's own route: that one also replays the audit trail under it.
        const p = (await sb.policy.proposals()).find((x) => x.id === a.id);
        if (!p) throw new SandgateError(`no policy proposal ${a.id} for sandbox ${sb.name} (decided ones are kept up to a limit, then removed)`, "not_found");
        // Its fields the status names (not the sandbox, not the hash).
        const s = z.object(proposalStatus).parse(p);
        return ok(proposalText(s), s);
      }),
  );
}

function proposalText(p: Pick<ProposalView, "id" | "state" | "stale" | "baseRevision" | "revision" | "decidedAt" | "decidedBy" | "decisionNote">): string {
  const note = p.decisionNote ? `: ${p.decisionNote}` : "";
  switch (p.state) {
    case "pending":
      return `proposal ${p.id} is pending against revision ${p.baseRevision}${p.stale ? "; it is stale (the policy changed since): it cannot be approved, propose the change again against the active policy" : "; a person decides it"}`;
    case "approved":
      return `proposal ${p.id} was approved by ${p.decidedBy ?? "?"} at ${p.decidedAt ?? "?"}: it made revision ${p.revision ?? "?"}`;
    case "rejected":
      return `proposal ${p.id} was rejected by ${p.decidedBy ?? "?"} at ${p.decidedAt ?? "?"}${note}`;
    case "superseded":
      return `proposal ${p.id} was superseded at ${p.decidedAt ?? "?"}${note}`;
  }
}
