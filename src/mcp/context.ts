// What every tool needs: the gateway, reached through the SDK (the MCP server is a client
// of the gateway like the CLI). Connected at the first call and again after a failure,
// so the server starts (and lists its tools) while the gateway is still starting.

import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import type { Sandgate, Sandbox } from "../sdk/index.js";

export interface ToolContext {
  server: McpServer;
  gateway: () => Promise<Sandgate>;
  /** Runs a tool's body: failures as tool errors, a bound on calls at once (results.ts). */
  run: (body: () => Promise<CallToolResult>) => Promise<CallToolResult>;
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

/** A sandbox by name or id (`not_found` when there is none); nothing happens to it when done with. */
export async function sandbox(ctx: ToolContext, name: string): Promise<Sandbox> {
  return (await ctx.gateway()).sandboxes.get(name, { dispose: "none" });
}
