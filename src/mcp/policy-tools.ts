// policy_get and policy_propose. The agent may propose a policy change; only a person
// approves it (`sandgate policy approve`, which needs the approver token). This server
// never reads that token and offers no tool to approve or reject.

import { z } from "zod";
import { PROPOSAL_STATES } from "../policy/proposals.js";
import { sandbox, type ToolContext } from "./context.js";
import { NAME_MAX_CHARS, POLICY_MAX_CHARS, REASON_MAX_CHARS } from "./limits.js";
import { ok } from "./results.js";

const name = z.string().min(1).max(NAME_MAX_CHARS).describe("the sandbox's name (or id)");
const revision = z.number().int();

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
    "policy_propose",
    {
      title: "Propose a network policy change",
      description:
        "Proposes a new network policy (the whole policy, as YAML) for a person to review and approve; nothing changes until they do. Say why in reason. The answer is the proposal's id; its state stays pending until a person decides.",
      inputSchema: z.strictObject({
        sandbox: name,
        policy: z.string().min(1).max(POLICY_MAX_CHARS).describe("the whole proposed policy as YAML (docs/policy.md)"),
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
}
