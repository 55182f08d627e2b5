// `sandgate mcp`: the MCP server (src/mcp) on stdio, for an agent's MCP client to spawn.
// stdout is the protocol: nothing else may be written to it (console output goes to
// stderr). It holds only the API token: it never reads the approver token, so the agent
// can propose a policy change but never approve one. It acts only on the sandboxes it
// created unless started with --all-sandboxes.

import { Option, type Command } from "commander";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { Sandgate } from "../sdk/index.js";
import { createMcpServer } from "../mcp/server.js";
import { EXEC_PROGRESS_INTERVAL_DEFAULT_MS } from "../mcp/limits.js";
import { secondsArg } from "./args.js";

/** The largest protocol message buffered from stdin (a files_write of 4 MiB fits); past it the session ends. */
export const MCP_MESSAGE_MAX_BYTES = 8 * 1024 * 1024;

export function mcpCommand(program: Command, global: () => { home?: string; url?: string }): void {
  program
    .command("mcp")
    .description("serve the Model Context Protocol on stdin/stdout for an agent: sandboxes, exec, files, logs, policy proposals (docs/mcp.md)")
    .option("--home <dir>", "gateway state directory (as the global --home)")
    .option("--url <url>", "gateway API address (as the global --url)")
    .option("--all-sandboxes", "act on every sandbox of the gateway, not only those created through sandgate mcp (labelled created-by=mcp); sandbox_delete still deletes only those")
    .addOption(
      new Option("--progress-interval <duration>", "how often exec sends progress (its newest output) to a client that asks for it, 0.1s-30s, e.g. 500ms")
        .argParser(secondsArg("--progress-interval", { minS: 0.1, maxS: 30 }))
        .default(EXEC_PROGRESS_INTERVAL_DEFAULT_MS / 1000, `${EXEC_PROGRESS_INTERVAL_DEFAULT_MS / 1000}s`),
    )
    .addHelpText(
      "after",
      '\nE.g. in an MCP client\'s configuration: {"command": "sandgate", "args": ["mcp"]}\nstdout carries the protocol; messages go to stderr.\nBy default the tools act only on sandboxes this server created (sandbox_create labels them created-by=mcp): any other is refused (forbidden), and sandbox_list shows only those.',
    )
    .action(async (o: { home?: string; url?: string; allSandboxes?: boolean; progressInterval: number }) => {
      // Anything printed to stdout would corrupt the protocol.
      console.log = console.info = console.debug = console.error;
      const g = global();
      const home = o.home ?? g.home;
      const url = o.url ?? g.url;
      const server = createMcpServer(() => Sandgate.connect({ ...(home === undefined ? {} : { home }), ...(url === undefined ? {} : { url }) }), {
        allSandboxes: o.allSandboxes === true,
        progressIntervalMs: Math.round(o.progressInterval * 1000),
      });
      const transport = new StdioServerTransport(process.stdin, process.stdout, { maxBufferSize: MCP_MESSAGE_MAX_BYTES });
      const closed = new Promise<void>((resolve) => (server.server.onclose = resolve));
      transport.onerror = (err) => process.stderr.write(`sandgate mcp: ${err.message}\n`);
      await server.connect(transport);
      // The client closed stdin: the session is over.
      process.stdin.once("end", () => void server.close());
      await closed;
    });
}
