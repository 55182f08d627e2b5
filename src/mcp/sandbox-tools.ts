// sandbox_create, sandbox_list, sandbox_get, sandbox_stop, sandbox_delete. A sandbox the
// agent creates starts with the default policy (no egress): its egress comes only through
// a proposal a person approves, never from the create call. It is labelled created-by=mcp,
// and by default the server acts only on sandboxes so labelled (context.ts); whatever its
// scope, it deletes only those: not a person's sandbox, not to make it again wider.

import { z } from "zod";
import { PHASES } from "../lifecycle/phases.js";
import { SandgateError, type Sandbox, type SandboxView } from "../sdk/index.js";
import { MCP_OWNER_LABEL, createdByMcp, sandbox, type ToolContext } from "./context.js";
import { NAME_MAX_CHARS, VALUE_MAX_CHARS } from "./limits.js";
import { ok } from "./results.js";

const LIST_DEFAULT = 100;
const LIST_MAX = 1000;
const name = z.string().min(1).max(NAME_MAX_CHARS).describe("the sandbox's name (or id)");
const stringMap = z.record(z.string().max(NAME_MAX_CHARS), z.string().max(VALUE_MAX_CHARS));
const phase = z.enum(PHASES);

const summarySchema = {
  name: z.string(),
  id: z.string(),
  phase,
  generation: z.number().int(),
  reason: z.string().nullable().describe("why it is in this phase (Error, Completed, Stopped), or null"),
  labels: z.record(z.string(), z.string()),
  createdAt: z.string(),
  updatedAt: z.string(),
};
type Summary = { [K in keyof typeof summarySchema]: z.infer<(typeof summarySchema)[K]> };
const summary = (s: Pick<SandboxView, "name" | "id" | "phase" | "generation" | "reasonText" | "labels" | "createdAt" | "updatedAt">): Summary => ({ name: s.name, id: s.id, phase: s.phase, generation: s.generation, reason: s.reasonText, labels: s.labels, createdAt: s.createdAt, updatedAt: s.updatedAt });
const state = z.strictObject({ name: z.string(), id: z.string(), phase });
const scopeText = `labelled ${MCP_OWNER_LABEL.key}=${MCP_OWNER_LABEL.value}, unless the server was started with --all-sandboxes`;

export function registerSandboxTools(ctx: ToolContext): void {
  ctx.server.registerTool(
    "sandbox_create",
    {
      title: "Create a sandbox",
      description:
        "Creates an isolated sandbox (a workload container with no route out but what its network policy allows) and waits until it is Ready. Its workspace is /sandbox. It starts with no egress: to reach a host, propose a policy (policy_propose) for a person to approve.",
      inputSchema: z.strictObject({
        name: z.string().min(1).max(63).describe("1-63 lowercase letters, digits and '-', starting and ending with a letter or digit"),
        image: z.string().min(1).max(NAME_MAX_CHARS).optional().describe("the workload image (default: the gateway's)"),
        env: stringMap.optional().describe("the workload's environment"),
        labels: stringMap.optional().describe(`labels; ${MCP_OWNER_LABEL.key}=${MCP_OWNER_LABEL.value} is always set`),
        ttl: z.string().max(32).optional().describe('stop each run this long after it began: "90s", "30m", "8h"'),
        timeout: z.number().int().min(1).max(1800).default(180).describe("seconds to wait for Ready (default 180)"),
      }),
      outputSchema: state,
      annotations: { title: "Create a sandbox", readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
    },
    (a) =>
      ctx.run(async () => {
        const sg = await ctx.gateway();
        const sb = await sg.sandboxes.create(
          { name: a.name, ...(a.image === undefined ? {} : { image: a.image }), ...(a.env === undefined ? {} : { env: a.env }), labels: { ...a.labels, [MCP_OWNER_LABEL.key]: MCP_OWNER_LABEL.value }, ...(a.ttl === undefined ? {} : { ttl: a.ttl }) },
          // A sandbox whose wait fails is deleted: no sandbox is left without an owner.
          { timeout: a.timeout, dispose: "delete" },
        );
        sb.dispose = "none";
        return ok(`sandbox ${sb.name} (${sb.id}) is ${sb.phase}; its workspace is /sandbox`, { name: sb.name, id: sb.id, phase: sb.phase });
      }),
  );

  ctx.server.registerTool(
    "sandbox_list",
    {
      title: "List sandboxes",
      description: `Lists the sandboxes this server may act on (${scopeText}) in name order: name, id, phase, labels.`,
      inputSchema: z.strictObject({
        phase: phase.optional(),
        limit: z.number().int().min(1).max(LIST_MAX).default(LIST_DEFAULT).describe(`at most this many (default ${LIST_DEFAULT}, max ${LIST_MAX})`),
      }),
      outputSchema: z.strictObject({ sandboxes: z.array(z.strictObject(summarySchema)) }),
      annotations: { title: "List sandboxes", readOnlyHint: true, openWorldHint: false },
    },
    (a) =>
      ctx.run(async () => {
        const sg = await ctx.gateway();
        const out: Summary[] = [];
        const labels = ctx.allSandboxes ? {} : { labels: { [MCP_OWNER_LABEL.key]: MCP_OWNER_LABEL.value } };
        for await (const s of sg.sandboxes.list({ limit: a.limit, ...labels, ...(a.phase === undefined ? {} : { phase: a.phase }) })) out.push(summary(s));
        const text = out.length === 0 ? "no sandboxes" : out.map((s) => `${s.name}  ${s.phase}  ${s.id}`).join("\n");
        return ok(text, { sandboxes: out });
      }),
  );

  ctx.server.registerTool(
    "sandbox_get",
    {
      title: "Get a sandbox",
      description: `One sandbox (${scopeText}): its phase (and why, when it ended or failed), generation, labels and image.`,
      inputSchema: z.strictObject({ name }),
      outputSchema: z.strictObject({ ...summarySchema, image: z.string().nullable().describe("the workload image; null: the gateway's default") }),
      annotations: { title: "Get a sandbox", readOnlyHint: true, openWorldHint: false },
    },
    (a) =>
      ctx.run(async () => {
        const v = (await sandbox(ctx, a.name)).view;
        const s = { ...summary(v), image: v.spec.image ?? null };
        return ok(`sandbox ${s.name} (${s.id}) is ${s.phase}${s.reason ? ` (${s.reason})` : ""}; generation ${s.generation}`, s);
      }),
  );

  ctx.server.registerTool(
    "sandbox_stop",
    {
      title: "Stop a sandbox",
      description: `Stops a sandbox (${scopeText}) and waits until it is Stopped: its processes end, its workspace /sandbox stays. One already stopped is not an error.`,
      inputSchema: z.strictObject({ name, timeout: z.number().int().min(1).max(1800).default(120).describe("seconds to wait for Stopped (default 120)") }),
      outputSchema: state,
      // It ends whatever runs in the sandbox: a client should ask first.
      annotations: { title: "Stop a sandbox", readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
    },
    (a) =>
      ctx.run(async () => {
        const sb = await sandbox(ctx, a.name);
        const v = await sb.stop({ timeout: a.timeout });
        return ok(`sandbox ${v.name} is ${v.phase}; its workspace is kept`, { name: v.name, id: v.id, phase: v.phase });
      }),
  );

  ctx.server.registerTool(
    "sandbox_delete",
    {
      title: "Delete a sandbox",
      description: `Deletes a sandbox this server created (labelled ${MCP_OWNER_LABEL.key}=${MCP_OWNER_LABEL.value}, even with --all-sandboxes) and its workspace, for good, and waits until it is gone. One already gone is not an error.`,
      inputSchema: z.strictObject({ name }),
      outputSchema: z.strictObject({ name: z.string(), deleted: z.boolean() }),
      annotations: { title: "Delete a sandbox", readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
    },
    (a) =>
      ctx.run(async () => {
        const sg = await ctx.gateway();
        let sb: Sandbox;
        try {
          sb = await sg.sandboxes.get(a.name);
        } catch (err) {
          if (err instanceof SandgateError && err.code === "not_found") return ok(`sandbox ${a.name} is deleted`, { name: a.name, deleted: true });
          throw err;
        }
        if (!createdByMcp(sb.view.labels)) {
          throw new SandgateError(`sandbox ${a.name} was not created through sandgate mcp (no label ${MCP_OWNER_LABEL.key}=${MCP_OWNER_LABEL.value}); only a person deletes it, with: sandgate sandbox delete ${a.name}`, "forbidden");
        }
        // By its id: not another sandbox made under the same name meanwhile.
        await sb.delete();
        return ok(`sandbox ${a.name} is deleted`, { name: a.name, deleted: true });
      }),
  );
}
