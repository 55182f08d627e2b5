// What every tool needs: the gateway, reached through the SDK (the MCP server is a client
// of the gateway like the CLI), connected at the first call and again after a failure,
// so the server starts (and lists its tools) while the gateway is still starting; and the
// server's scope: the sandboxes it may act on.

import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { SandgateError, type Sandgate, type Sandbox } from "../sdk/index.js";

/**
 * The label every sandbox the MCP server creates carries. By default the server acts
 * only on sandboxes that carry it (`sandgate mcp --all-sandboxes`: on every one), and it
 * deletes only those whatever its scope. One label for every MCP server of a gateway, not
 * an id per server: an agent's client restarts its server often, and its sandboxes must
 * outlive that; what the scope keeps out of an agent's reach is a person's sandboxes.
 */
export const MCP_OWNER_LABEL = { key: "created-by", value: "mcp" } as const;

export interface ToolContext {
  server: McpServer;
  gateway: () => Promise<Sandgate>;
  /** Runs a tool's body: failures as tool errors, a bound on calls at once (results.ts). */
  run: (body: () => Promise<CallToolResult>) => Promise<CallToolResult>;
  /** Every sandbox (`--all-sandboxes`), or only those labelled MCP_OWNER_LABEL. */
  allSandboxes: boolean;
  /** exec: milliseconds between progress notifications. */
  progressIntervalMs: number;
}

/** Connects once; a failed attempt is forgotten, so the next call tries again. */
export function lazyGateway(connect: () => Promise<Sandgate>): () => Promise<Sandgate> {
  let current: Promise<Sandgate> | undefined;
  return () => {
    current ??= connect().catch((err: unknown) => {
      current = undefined;
      throw err;
    });
    return current;
  };
}

/** Whether a sandbox with these labels was created through sandgate mcp. */
export const createdByMcp = (labels: Record<string, string>): boolean => labels[MCP_OWNER_LABEL.key] === MCP_OWNER_LABEL.value;

/**
 * A sandbox by name or id (`not_found` when there is none) that is in the server's scope
 * (`forbidden` when it is not); nothing happens to it when done with. Every tool that
 * takes a sandbox reaches it through here, and acts on it by its id: a sandbox made
 * again under the same name meanwhile is never reached by mistake.
 */
export async function sandbox(ctx: ToolContext, name: string): Promise<Sandbox> {
  const sb = await (await ctx.gateway()).sandboxes.get(name, { dispose: "none" });
  if (!ctx.allSandboxes && !createdByMcp(sb.view.labels)) {
    throw new SandgateError(
      `sandbox ${sb.name} was not created through sandgate mcp (no label ${MCP_OWNER_LABEL.key}=${MCP_OWNER_LABEL.value}): this server acts only on its own sandboxes; a person who wants it to act on every sandbox starts it with sandgate mcp --all-sandboxes`,
      "forbidden",
    );
  }
  return sb;
}
