// The MCP server: sandboxes, exec, files, logs and policy as tools, each a call to the
// gateway through the SDK (docs/mcp.md). Transport-free: `sandgate mcp` connects it to
// stdio.

import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { Sandgate } from "../sdk/index.js";
import { VERSION } from "../version.js";
import { lazyGateway } from "./context.js";
import { CALLS_MAX, EXEC_PROGRESS_INTERVAL_DEFAULT_MS } from "./limits.js";
import { boundedCalls } from "./results.js";
import { registerExecTool } from "./exec-tool.js";
import { registerFilesTools } from "./files-tools.js";
import { registerLogsTool } from "./logs-tool.js";
import { registerPolicyTools } from "./policy-tools.js";
import { registerSandboxTools } from "./sandbox-tools.js";

/** The server's tools, by name. */
export const TOOL_NAMES = [
  "sandbox_create",
  "sandbox_list",
  "sandbox_get",
  "sandbox_stop",
  "sandbox_delete",
  "exec",
  "files_read",
  "files_write",
  "files_list",
  "logs_read",
  "policy_get",
  "policy_check",
  "policy_propose",
  "policy_proposal_status",
] as const;

export interface McpServerOptions {
  /** Act on every sandbox, not only those created through sandgate mcp (default false). */
  allSandboxes?: boolean;
  /** exec: milliseconds between progress notifications (default EXEC_PROGRESS_INTERVAL_DEFAULT_MS). */
  progressIntervalMs?: number;
}

/** `connect` reaches the gateway (Sandgate.connect); called at the first tool call, and again after a failure. */
export function createMcpServer(connect: () => Promise<Sandgate>, o: McpServerOptions = {}): McpServer {
  const server = new McpServer(
    { name: "sandgate", version: VERSION },
    {
      instructions:
        "Sandgate runs commands in isolated sandboxes: create one, write files into /sandbox, exec commands, read the results. Network egress is what the sandbox's policy allows; to need more, propose a policy change (a person approves it) and follow it with policy_proposal_status.",
    },
  );
  const ctx = {
    server,
    gateway: lazyGateway(connect),
    run: boundedCalls(CALLS_MAX),
    allSandboxes: o.allSandboxes ?? false,
    progressIntervalMs: o.progressIntervalMs ?? EXEC_PROGRESS_INTERVAL_DEFAULT_MS,
  };
  registerSandboxTools(ctx);
  registerExecTool(ctx);
  registerFilesTools(ctx);
  registerLogsTool(ctx);
  registerPolicyTools(ctx);
  return server;
}
