// docs/mcp.md's complete example, as written: compiled by TypeScript and run by node,
// its MCP client spawning `sandgate mcp` (the test build) against a live gateway on the
// local-exec TEST DOUBLE (real busybox programs, /sandbox a temp dir); it must print what
// the page says and leave no sandbox behind.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { PROJECT_ROOT } from "../../support/cli-build.js";
import { CLI_ARGS, CLI_TEST_TIMEOUT_MS, runNode } from "../../support/cli-runner.js";
import { docExample, exampleModule } from "../../support/doc-example.js";
import { docGateway } from "../../support/doc-gateway.js";

const MCP_SDK = join(PROJECT_ROOT, "node_modules", "@modelcontextprotocol", "sdk", "dist", "esm");

describe("docs/mcp.md", () => {
  const g = docGateway("sg-mcp-docs-");
  const example = docExample(readFileSync(join(PROJECT_ROOT, "docs", "mcp.md"), "utf8"), "mcp-agent-loop");


  it("runs as written: it prints what the page says, and its sandbox is gone when it ends", async () => {
    let js = exampleModule(example.code);
    for (const m of ["client/index.js", "client/stdio.js"]) {
      const spec = `"@modelcontextprotocol/sdk/${m}"`;
      expect(js).toContain(spec);
      js = js.replace(spec, JSON.stringify(pathToFileURL(join(MCP_SDK, m)).href));
    }
    // `sandgate mcp` is the test build, pointed at the test gateway's home.
    const launch = `{ command: "sandgate", args: ["mcp"] }`;
    expect(js).toContain(launch);
    js = js.replace(launch, JSON.stringify({ command: CLI_ARGS[0], args: [...CLI_ARGS.slice(1), "mcp", "--home", g.t.home.dir] }));
    const file = join(g.dir, "example.mjs");
    writeFileSync(file, js);
    const run = await runNode([file], { cwd: g.dir, env: { PATH: process.env.PATH ?? "" } });
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(run.stdout).toBe(example.prints);
    expect((await g.t.api("GET", "/v1/sandboxes/mcp-example")).status).toBe(404);
  }, CLI_TEST_TIMEOUT_MS);
});
