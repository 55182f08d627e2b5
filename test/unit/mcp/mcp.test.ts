// `sandgate mcp` end to end: the official MCP SDK's client spawns the CLI (the test
// build) over stdio against a live gateway on the local-exec TEST DOUBLE (real busybox
// programs, /sandbox a temp dir) and, for logs, the scripted-logs TEST DOUBLE. Tools and
// their schemas and annotations; each tool's outcome; the bounds; hostile arguments as
// tool errors on a session that keeps working; no way to approve a proposal, and the
// approver token never read; exec's progress; every structured result declared by an
// outputSchema; the server's scope (its own sandboxes, or --all-sandboxes).
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ErrorCode, McpError, type CallToolResult, type Progress } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { APPROVER_HEADER } from "../../../src/gateway/api/proposals-routes.js";
import { CALLS_MAX, EXEC_OUTPUT_MAX_BYTES, EXEC_PROGRESS_TAIL_BYTES, FILES_WRITE_MAX_CHARS, LOGS_MAX_CHARS } from "../../../src/mcp/limits.js";
import { POLICY_EXAMPLE } from "../../../src/mcp/policy-tools.js";
import { TOOL_NAMES } from "../../../src/mcp/server.js";
import { MCP_MESSAGE_MAX_BYTES } from "../../../src/cli/mcp-command.js";
import { CLI_ARGS, CLI_TEST_TIMEOUT_MS, cli } from "../../support/cli-runner.js";
import { eventually, startTestGateway, type TestGateway } from "../../support/gateway-fixture.js";
import { LocalExecDriver } from "../../support/local-exec-driver.js";
import { LogsDriver } from "../../support/logs-driver.js";

/** Every tool's name → whether it declares an outputSchema, as the servers list them. */
const declaresOutput = new Map<string, boolean>();

async function connectMcp(home: string, flags: string[] = []): Promise<{ client: Client; stderr: () => string }> {
  const transport = new StdioClientTransport({
    command: CLI_ARGS[0]!,
    args: [...CLI_ARGS.slice(1), "mcp", "--home", home, ...flags],
    env: { PATH: process.env.PATH ?? "" },
    stderr: "pipe",
  });
  let stderr = "";
  transport.stderr?.on("data", (b: Buffer) => (stderr += b.toString()));
  const client = new Client({ name: "mcp-test", version: "1" });
  await client.connect(transport);
  // Listed, the client also checks each structured result against its tool's outputSchema.
  for (const x of (await client.listTools()).tools) declaresOutput.set(x.name, x.outputSchema !== undefined);
  return { client, stderr: () => stderr };
}

const text = (r: CallToolResult): string => r.content.map((c) => (c.type === "text" ? c.text : "")).join("");
/** One tool call; a tool that answers with structuredContent must declare an outputSchema. */
const call = async (c: Client, name: string, args: Record<string, unknown>): Promise<CallToolResult> => {
  const r = (await c.callTool({ name, arguments: args })) as CallToolResult;
  if (r.structuredContent !== undefined) expect(declaresOutput.get(name), `${name} answers with structuredContent but declares no outputSchema`).toBe(true);
  return r;
};

describe("sandgate mcp", () => {
  let dir: string;
  let driver: LocalExecDriver;
  let t: TestGateway;
  let client: Client;
  let stderr: () => string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "sg-mcp-"));
    driver = new LocalExecDriver(join(dir, "ws"), dir);
    driver.processOptions = true;
    t = await startTestGateway(driver);
    // The approver token becomes a FIFO no one writes: a server that opened it to read
    // would block for good (even as root), and every tool call below would hang.
    rmSync(t.home.approverToken);
    execFileSync("mkfifo", [t.home.approverToken]);
    ({ client, stderr } = await connectMcp(t.home.dir, ["--progress-interval", "100ms"]));
  }, CLI_TEST_TIMEOUT_MS);

  afterAll(async () => {
    await client?.close();
    await t.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("lists every tool with its JSON schema and annotations; none approves or rejects", async () => {
    const { tools } = await client.listTools();
    expect(tools.map((x) => x.name).sort()).toEqual([...TOOL_NAMES].sort());
    expect(tools.some((x) => /approve|reject|decide/.test(x.name))).toBe(false);
    const by = Object.fromEntries(tools.map((x) => [x.name, x]));
    for (const x of tools) {
      expect(x.inputSchema.type).toBe("object");
      expect(x.description).toBeTruthy();
      // Every tool answers with structured content, so every tool declares its schema.
      expect(x.outputSchema?.type, `${x.name} declares an outputSchema`).toBe("object");
    }
    expect(by.exec!.outputSchema!.required).toEqual(["exitCode", "stdout", "stderr", "truncated", "stdoutDroppedBytes", "stderrDroppedBytes"]);
    expect(by.exec!.inputSchema.required).toEqual(["sandbox", "cmd"]);
    expect(by.exec!.inputSchema.properties!.timeout).toMatchObject({ type: "integer", minimum: 1, maximum: 1800, default: 60 });
    expect(by.exec!.inputSchema.properties!.maxOutputBytes).toMatchObject({ maximum: EXEC_OUTPUT_MAX_BYTES, default: 65536 });
    expect(by.files_write!.inputSchema.properties!.content).toMatchObject({ type: "string", maxLength: FILES_WRITE_MAX_CHARS });
    const destructive = tools.filter((x) => x.annotations?.destructiveHint === true).map((x) => x.name).sort();
    expect(destructive).toEqual(["exec", "files_write", "sandbox_delete", "sandbox_stop"]);
    const readOnly = tools.filter((x) => x.annotations?.readOnlyHint === true).map((x) => x.name).sort();
    expect(readOnly).toEqual(["files_list", "files_read", "logs_read", "policy_check", "policy_get", "policy_proposal_status", "sandbox_get", "sandbox_list"]);
    expect(by.exec!.annotations?.openWorldHint).toBe(false);
  });

  it("create, exec, files write/read/list, policy get and propose, delete: an agent's loop", async () => {
    const created = await call(client, "sandbox_create", { name: "agent" });
    expect(created.isError).toBeFalsy();
    expect(created.structuredContent).toMatchObject({ name: "agent", phase: "Ready" });
    expect((await call(client, "sandbox_list", {})).structuredContent).toMatchObject({ sandboxes: [{ name: "agent", phase: "Ready" }] });

    const w = await call(client, "files_write", { sandbox: "agent", path: "job.sh", content: "echo out:$1\necho err >&2\nexit 3\n" });
    expect(w.structuredContent).toEqual({ path: "/sandbox/job.sh", bytes: 32 });
    const run = await call(client, "exec", { sandbox: "agent", cmd: ["sh", "job.sh", "x"] });
    expect(run.isError).toBeFalsy();
    expect(run.structuredContent).toEqual({ exitCode: 3, stdout: "out:x\n", stderr: "err\n", truncated: false, stdoutDroppedBytes: 0, stderrDroppedBytes: 0 });
    expect(text(run)).toContain("exit code 3");

    await call(client, "exec", { sandbox: "agent", cmd: ["sh", "-c", "printf 'héllo' > result.txt; printf '\\377' > bin"] });
    expect((await call(client, "files_read", { sandbox: "agent", path: "/sandbox/result.txt" })).structuredContent).toMatchObject({ content: "héllo", bytes: 6 });
    expect((await call(client, "files_read", { sandbox: "agent", path: "bin", encoding: "base64" })).structuredContent).toMatchObject({ content: "/w==" });
    const notText = await call(client, "files_read", { sandbox: "agent", path: "bin" });
    expect([notText.isError, text(notText)]).toEqual([true, 'bin is not valid UTF-8 text; read it with encoding "base64" (code: invalid_request)']);
    const list = await call(client, "files_list", { sandbox: "agent" });
    expect((list.structuredContent as { entries: { path: string }[] }).entries.map((e) => e.path).sort()).toEqual(["bin", "job.sh", "result.txt"]);

    const pol = await call(client, "policy_get", { sandbox: "agent" });
    expect(pol.isError).toBeFalsy();
    expect(pol.structuredContent).toMatchObject({ revision: 1 });

    const wider = "version: 1\nnetwork:\n  rules:\n    - name: pypi\n      endpoints:\n        - host: pypi.org\n          port: 443\n          protocol: https\n";
    const prop = await call(client, "policy_propose", { sandbox: "agent", policy: wider, reason: "pip needs pypi.org" });
    expect(prop.isError, text(prop)).toBeFalsy();
    const id = (prop.structuredContent as { id: string }).id;
    expect(prop.structuredContent).toMatchObject({ state: "pending", baseRevision: 1 });
    const listed = await t.api("GET", "/v1/sandboxes/agent/policy/proposals");
    expect(listed.body.proposals).toMatchObject([{ id, state: "pending", proposedBy: "mcp", reason: "pip needs pypi.org" }]);
    // The API token alone cannot approve it: only a person with the approver token can.
    expect((await t.api("POST", `/v1/sandboxes/agent/policy/proposals/${id}/approve`, {})).status).toBe(403);
    expect((await t.api("GET", "/v1/sandboxes/agent/policy")).body.revision).toBe(1);

    expect((await call(client, "sandbox_delete", { name: "agent" })).structuredContent).toEqual({ name: "agent", deleted: true });
    expect((await t.api("GET", "/v1/sandboxes/agent")).status).toBe(404);
    // One already gone is not an error.
    expect((await call(client, "sandbox_delete", { name: "agent" })).isError).toBeFalsy();
  }, CLI_TEST_TIMEOUT_MS);

  it("exec bounds: output past maxOutputBytes is dropped and counted; the timeout ends the command with 124", async () => {
    await call(client, "sandbox_create", { name: "bounds" });
    const big = await call(client, "exec", { sandbox: "bounds", cmd: ["sh", "-c", "i=0; while [ $i -lt 300 ]; do echo 0123456789; i=$((i+1)); done; echo e >&2"], maxOutputBytes: 100 });
    expect(big.structuredContent).toMatchObject({ exitCode: 0, stdout: "0123456789\n".repeat(10).slice(0, 100), stderr: "e\n", truncated: true, stdoutDroppedBytes: 3300 - 100, stderrDroppedBytes: 0 });
    expect(text(big)).toContain("truncated: 3200 bytes dropped past 100");
    const slow = await call(client, "exec", { sandbox: "bounds", cmd: ["sleep", "600"], timeout: 1 });
    expect(slow.structuredContent).toMatchObject({ exitCode: 124 });
    await call(client, "sandbox_delete", { name: "bounds" });
  }, CLI_TEST_TIMEOUT_MS);

  it("exec sends progress while the command runs: with resetTimeoutOnProgress a command outlives the client's request timeout and its result comes; without progress the request times out", async () => {
    await call(client, "sandbox_create", { name: "long" });
    // 20 progress intervals: a loaded machine may delay one, not that many.
    const REQUEST_TIMEOUT_MS = 2000;
    const go = join(driver.workspace, "go-long");
    // 1000 numbered lines, then it waits for go-long, then one more line.
    const output = Array.from({ length: 1000 }, (_, i) => `line-${i}\n`).join("");
    const cmd = ["sh", "-c", "i=0; while [ $i -lt 1000 ]; do echo line-$i; i=$((i+1)); done; while [ ! -f go-long ]; do sleep 0.05; done; echo finished"];
    const seen: Progress[] = [];
    const r = (await client.callTool({ name: "exec", arguments: { sandbox: "long", cmd } }, undefined, {
      timeout: REQUEST_TIMEOUT_MS,
      resetTimeoutOnProgress: true,
      onprogress: (p) => {
        seen.push(p);
        // Let it end once it has run past the request timeout (its progress is the seconds
        // it has run, counted after the request was sent) and all its lines are out.
        if (p.progress * 1000 > REQUEST_TIMEOUT_MS && p.message?.endsWith("line-999\n")) writeFileSync(go, "");
      },
    })) as CallToolResult;
    expect(r.isError, text(r)).toBeFalsy();
    expect(r.structuredContent).toMatchObject({ exitCode: 0, stdout: `${output}finished\n`, truncated: false });
    expect(existsSync(go)).toBe(true);
    // Increasing progress; each message the newest output, at most EXEC_PROGRESS_TAIL_BYTES.
    const values = seen.map((p) => p.progress);
    expect(values).toEqual([...values].sort((a, b) => a - b));
    expect(new Set(values).size).toBe(values.length);
    for (const p of seen) expect(p.message?.length ?? 0).toBeLessThanOrEqual(EXEC_PROGRESS_TAIL_BYTES);
    expect(seen.some((p) => p.message === output.slice(-EXEC_PROGRESS_TAIL_BYTES))).toBe(true);

    // The same without asking for progress: the client gives up at its timeout (and its
    // cancellation ends the command, which would wait for go-never for good).
    const never = await client
      .callTool({ name: "exec", arguments: { sandbox: "long", cmd: ["sh", "-c", "while [ ! -f go-never ]; do sleep 0.05; done"] } }, undefined, { timeout: REQUEST_TIMEOUT_MS })
      .then(
        () => "answered",
        (e: unknown) => e,
      );
    expect(never).toBeInstanceOf(McpError);
    expect((never as McpError).code).toBe(ErrorCode.RequestTimeout);
    expect((await call(client, "exec", { sandbox: "long", cmd: ["sh", "-c", "echo after"] })).structuredContent).toMatchObject({ exitCode: 0, stdout: "after\n" });
    await call(client, "sandbox_delete", { name: "long" });
  }, CLI_TEST_TIMEOUT_MS);

  it("sandbox_get, policy_check, policy_proposal_status, sandbox_stop: a proposal (policy_propose's own example) followed to approved and rejected, its URL checked before and after", async () => {
    await call(client, "sandbox_create", { name: "follow" });
    const got = await call(client, "sandbox_get", { name: "follow" });
    expect(got.structuredContent).toMatchObject({ name: "follow", phase: "Ready", generation: 1, reason: null, labels: { "created-by": "mcp" } });
    expect(text(got)).toMatch(/^sandbox follow \(\S+\) is Ready; generation 1$/);

    const url = "https://pypi.org/simple/requests/";
    const before = await call(client, "policy_check", { sandbox: "follow", url });
    expect(before.isError, text(before)).toBeFalsy();
    expect(before.structuredContent).toMatchObject({ revision: 1, allow: false, rule: null, reason: expect.any(String) });
    expect(text(before)).toMatch(/^deny \(.+, revision 1\)$/);

    // The example in policy_propose's description is a whole policy the gateway takes.
    const { tools } = await client.listTools();
    expect(tools.find((x) => x.name === "policy_propose")!.description).toContain(POLICY_EXAMPLE);
    const prop = await call(client, "policy_propose", { sandbox: "follow", policy: POLICY_EXAMPLE, reason: "pip install" });
    expect(prop.isError, text(prop)).toBeFalsy();
    const id = (prop.structuredContent as { id: string }).id;
    const pending = await call(client, "policy_proposal_status", { sandbox: "follow", id });
    expect(pending.structuredContent).toMatchObject({ id, state: "pending", stale: false, baseRevision: 1, revision: null, proposedBy: "mcp", reason: "pip install", decidedAt: null, decidedBy: null });
    expect(text(pending)).toBe(`proposal ${id} is pending against revision 1; a person decides it`);

    const approver = { [APPROVER_HEADER]: t.approverToken };
    expect((await t.api("POST", `/v1/sandboxes/follow/policy/proposals/${id}/approve`, { by: "alice" }, undefined, approver)).status).toBe(200);
    const approved = await call(client, "policy_proposal_status", { sandbox: "follow", id });
    expect(approved.structuredContent).toMatchObject({ id, state: "approved", revision: 2, decidedBy: "alice" });
    expect(text(approved)).toMatch(new RegExp(`^proposal ${id} was approved by alice at \\S+: it made revision 2$`));
    expect((await call(client, "policy_check", { sandbox: "follow", url })).structuredContent).toEqual({ revision: 2, allow: true, rule: "pypi", reason: null });
    expect(text(await call(client, "policy_check", { sandbox: "follow", url }))).toBe("allow (rule pypi, revision 2)");

    const second = (await call(client, "policy_propose", { sandbox: "follow", policy: "version: 1\n" })).structuredContent as { id: string };
    expect((await t.api("POST", `/v1/sandboxes/follow/policy/proposals/${second.id}/reject`, { by: "alice", reason: "not now" }, undefined, approver)).status).toBe(200);
    const rejected = await call(client, "policy_proposal_status", { sandbox: "follow", id: second.id });
    expect(rejected.structuredContent).toMatchObject({ state: "rejected", decidedBy: "alice", decisionNote: "not now" });
    expect(text(rejected)).toMatch(/: not now$/);
    const missing = await call(client, "policy_proposal_status", { sandbox: "follow", id: "pp_0000000000000000" });
    expect([missing.isError, text(missing)]).toEqual([true, expect.stringMatching(/^no policy proposal pp_0000000000000000 for sandbox follow .*\(code: not_found\)$/)]);

    const stopped = await call(client, "sandbox_stop", { name: "follow" });
    expect(stopped.isError, text(stopped)).toBeFalsy();
    expect(stopped.structuredContent).toMatchObject({ name: "follow", phase: "Stopped" });
    expect((await call(client, "sandbox_get", { name: "follow" })).structuredContent).toMatchObject({ phase: "Stopped" });
    // One already stopped is not an error.
    expect((await call(client, "sandbox_stop", { name: "follow" })).structuredContent).toMatchObject({ phase: "Stopped" });
    await call(client, "sandbox_delete", { name: "follow" });
  }, CLI_TEST_TIMEOUT_MS);

  it("hostile arguments are tool errors, the session keeps working, and nothing on stdout but the protocol", async () => {
    await call(client, "sandbox_create", { name: "hostile" });
    const cases: [string, Record<string, unknown>, RegExp][] = [
      ["files_read", { sandbox: "hostile", path: "../../etc/passwd" }, /^.*outside \/sandbox.*\(code: invalid_request\)$|invalid_request/],
      ["files_read", { sandbox: "hostile", path: "/etc/passwd" }, /\(code: invalid_request\)$/],
      ["files_write", { sandbox: "hostile", path: "a", content: "x".repeat(FILES_WRITE_MAX_CHARS + 1) }, /Input validation error/],
      ["exec", { sandbox: "hostile", cmd: ["sh"], timeout: 99_999 }, /Input validation error/],
      ["exec", { sandbox: "hostile", cmd: ["sh"], maxOutputBytes: EXEC_OUTPUT_MAX_BYTES + 1 }, /Input validation error/],
      ["exec", { sandbox: "hostile", cmd: [] }, /Input validation error/],
      ["exec", { sandbox: "nope\u0000\n\u001b[2J", cmd: ["true"] }, /\(code: (not_found|invalid_request)\)$/],
      ["exec", { sandbox: "hostile", cmd: ["true"], env: { "BAD=NAME": "x" } }, /\(code: invalid_request\)$/],
      ["files_write", { sandbox: "hostile", path: "a", content: "!!", encoding: "base64" }, /not base64/],
      ["logs_read", { sandbox: "hostile", tail: 10_001 }, /Input validation error/],
      ["policy_propose", { sandbox: "hostile", policy: "egress: [[[" }, /\(code: invalid_request\)$/],
      ["sandbox_create", { name: "Bad Name!" }, /\(code: invalid_request\)$/],
      // No policy at create (egress only through a proposal), and no argument the schema lacks.
      ["sandbox_create", { name: "wide", policy: "version: 1\nnetwork:\n  rules: []\n" }, /Input validation error/],
      ["exec", { sandbox: "hostile", cmd: ["true"], user: "0" }, /Input validation error/],
      ["no_such_tool", {}, /not found/],
    ];
    for (const [name, args, want] of cases) {
      const r = await call(client, name, args);
      expect(r.isError, `${name} ${JSON.stringify(args).slice(0, 80)}`).toBe(true);
      expect(text(r)).toMatch(want);
      expect(text(r)).not.toMatch(/\n|\s+at\s.+\(.*:\d+:\d+\)/);
    }
    const good = await call(client, "exec", { sandbox: "hostile", cmd: ["sh", "-c", "echo fine"] });
    expect(good.structuredContent).toMatchObject({ exitCode: 0, stdout: "fine\n" });
    await call(client, "sandbox_delete", { name: "hostile" });
    expect(stderr()).not.toMatch(/TypeError|ReferenceError|unhandled/i);
  }, CLI_TEST_TIMEOUT_MS);

  it("files_read refuses a file past maxBytes (too_large) rather than cut it; at maxBytes it is read whole", async () => {
    await call(client, "sandbox_create", { name: "big" });
    await call(client, "files_write", { sandbox: "big", path: "f", content: "x".repeat(100) });
    const over = await call(client, "files_read", { sandbox: "big", path: "f", maxBytes: 99 });
    expect([over.isError, text(over)]).toEqual([true, expect.stringMatching(/100 bytes; the limit is 99 .*\(code: too_large\)$/)]);
    expect((await call(client, "files_read", { sandbox: "big", path: "f", maxBytes: 100 })).structuredContent).toMatchObject({ bytes: 100 });
    await call(client, "sandbox_delete", { name: "big" });
  }, CLI_TEST_TIMEOUT_MS);

  it("deletes only sandboxes it created (labelled created-by=mcp): a person's sandbox is refused and stays", async () => {
    expect((await call(client, "sandbox_create", { name: "mine", labels: { "created-by": "someone-else", team: "a" } })).isError).toBeFalsy();
    expect((await t.api("GET", "/v1/sandboxes/mine")).body.labels).toEqual({ "created-by": "mcp", team: "a" });
    expect((await t.api("POST", "/v1/sandboxes", { name: "persons" })).status).toBe(201);
    const refused = await call(client, "sandbox_delete", { name: "persons" });
    expect([refused.isError, text(refused)]).toEqual([true, "sandbox persons was not created through sandgate mcp (no label created-by=mcp); only a person deletes it, with: sandgate sandbox delete persons (code: forbidden)"]);
    expect((await t.api("GET", "/v1/sandboxes/persons")).status).toBe(200);
    expect((await call(client, "sandbox_delete", { name: "mine" })).structuredContent).toEqual({ name: "mine", deleted: true });
    expect((await t.api("GET", "/v1/sandboxes/mine")).status).toBe(404);
    await t.api("DELETE", "/v1/sandboxes/persons");
  }, CLI_TEST_TIMEOUT_MS);

  it(`at most CALLS_MAX (${CALLS_MAX}) tool calls at once: the next is refused (unavailable), not queued; cancelled ones free their places`, async () => {
    await call(client, "sandbox_create", { name: "busy" });
    const ac = new AbortController();
    const running = Array.from({ length: CALLS_MAX }, () =>
      client.callTool({ name: "exec", arguments: { sandbox: "busy", cmd: ["sleep", "601"], timeout: 600 } }, undefined, { signal: ac.signal }).catch((e: unknown) => e),
    );
    await eventually(async () => (driver.argvs.filter((a) => a.includes("601")).length === CALLS_MAX ? true : undefined), 120_000, `${CALLS_MAX} execs running`);
    const refused = await call(client, "sandbox_list", {});
    expect([refused.isError, text(refused)]).toEqual([true, `busy: ${CALLS_MAX} tool calls are running, at most ${CALLS_MAX} at once; wait for one to end (code: unavailable)`]);
    ac.abort();
    await Promise.all(running);
    await eventually(async () => ((await call(client, "sandbox_list", {})).isError ? undefined : true), 120_000, "a place free again");
    await call(client, "sandbox_delete", { name: "busy" });
  }, CLI_TEST_TIMEOUT_MS);

  it("never reads the approver token: it is a FIFO no one writes, and the server still answers", async () => {
    expect(statSync(t.home.approverToken).isFIFO()).toBe(true);
    expect((await call(client, "sandbox_list", {})).isError).toBeFalsy();
  });
});

describe("sandgate mcp scope: its own sandboxes, or --all-sandboxes", () => {
  let dir: string;
  let driver: LocalExecDriver;
  let t: TestGateway;
  let own: Client;
  let all: Client;
  let personsId: string;

  /** Each tool that takes a sandbox, with what else it needs; a new one must be added here. */
  const ARGS: Record<string, (sandbox: string) => Record<string, unknown>> = {
    sandbox_get: (name) => ({ name }),
    sandbox_stop: (name) => ({ name }),
    sandbox_delete: (name) => ({ name }),
    exec: (sandbox) => ({ sandbox, cmd: ["sh", "-c", "echo ran > scope-probe"] }),
    files_read: (sandbox) => ({ sandbox, path: "readable" }),
    files_write: (sandbox) => ({ sandbox, path: "written", content: "x" }),
    files_list: (sandbox) => ({ sandbox }),
    logs_read: (sandbox) => ({ sandbox }),
    policy_get: (sandbox) => ({ sandbox }),
    policy_check: (sandbox) => ({ sandbox, url: "https://pypi.org/" }),
    policy_propose: (sandbox) => ({ sandbox, policy: POLICY_EXAMPLE }),
    policy_proposal_status: (sandbox) => ({ sandbox, id: "pp_0000000000000000" }),
  };
  // Stop last: the others want it Ready.
  const ORDER = [...Object.keys(ARGS).filter((n) => n !== "sandbox_stop" && n !== "sandbox_delete"), "sandbox_stop", "sandbox_delete"];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "sg-mcp-scope-"));
    driver = new LocalExecDriver(join(dir, "ws"), dir);
    driver.processOptions = true;
    t = await startTestGateway(driver);
    writeFileSync(join(driver.workspace, "readable"), "r");
    ({ client: own } = await connectMcp(t.home.dir));
    ({ client: all } = await connectMcp(t.home.dir, ["--all-sandboxes"]));
  }, CLI_TEST_TIMEOUT_MS);

  afterAll(async () => {
    await own?.close();
    await all?.close();
    await t.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("every tool that takes a sandbox is in ARGS: those with a sandbox argument, and sandbox_* with a name but create", async () => {
    const { tools } = await own.listTools();
    const taking = tools.filter((x) => "sandbox" in (x.inputSchema.properties ?? {}) || (x.name !== "sandbox_create" && "name" in (x.inputSchema.properties ?? {}))).map((x) => x.name);
    expect(taking.sort()).toEqual(Object.keys(ARGS).sort());
  });

  it("by default: a sandbox created outside sandgate mcp is refused by every tool that takes one (by name or id), nothing happens to it, and the list leaves it out", async () => {
    expect((await call(own, "sandbox_create", { name: "mine" })).isError).toBeFalsy();
    const created = await t.api("POST", "/v1/sandboxes", { name: "persons", labels: { team: "a" } });
    expect(created.status).toBe(201);
    personsId = created.body.id;
    await eventually(async () => ((await t.api("GET", "/v1/sandboxes/persons")).body.phase === "Ready" ? true : undefined), 30_000, "persons Ready");
    const execsBefore = driver.argvs.length;
    for (const ref of ["persons", personsId]) {
      for (const tool of ORDER) {
        const r = await call(own, tool, ARGS[tool]!(ref));
        expect(r.isError, `${tool} ${ref}`).toBe(true);
        expect(text(r), tool).toBe(
          tool === "sandbox_delete"
            ? `sandbox ${ref} was not created through sandgate mcp (no label created-by=mcp); only a person deletes it, with: sandgate sandbox delete ${ref} (code: forbidden)`
            : "sandbox persons was not created through sandgate mcp (no label created-by=mcp): this server acts only on its own sandboxes; a person who wants it to act on every sandbox starts it with sandgate mcp --all-sandboxes (code: forbidden)",
        );
      }
    }
    // Nothing ran, was written, proposed or stopped.
    expect(driver.argvs.length).toBe(execsBefore);
    expect(existsSync(join(driver.workspace, "scope-probe"))).toBe(false);
    expect(existsSync(join(driver.workspace, "written"))).toBe(false);
    expect((await t.api("GET", "/v1/sandboxes/persons/policy/proposals")).body.proposals).toEqual([]);
    expect((await t.api("GET", "/v1/sandboxes/persons")).body.phase).toBe("Ready");
    // Its own sandbox is listed, the person's is not.
    const listed = (await call(own, "sandbox_list", {})).structuredContent as { sandboxes: { name: string }[] };
    expect(listed.sandboxes.map((x) => x.name)).toEqual(["mine"]);
    // Its own: every tool acts on it.
    expect((await call(own, "exec", ARGS.exec!("mine"))).structuredContent).toMatchObject({ exitCode: 0 });
    expect((await call(own, "policy_get", { sandbox: "mine" })).isError).toBeFalsy();
  }, CLI_TEST_TIMEOUT_MS);

  it("--all-sandboxes: every tool acts on the person's sandbox (but sandbox_delete, which deletes only its own), and the list shows it", async () => {
    const listed = (await call(all, "sandbox_list", {})).structuredContent as { sandboxes: { name: string }[] };
    expect(listed.sandboxes.map((x) => x.name)).toEqual(["mine", "persons"]);
    const answers: Record<string, CallToolResult> = {};
    for (const tool of ORDER) answers[tool] = await call(all, tool, ARGS[tool]!("persons"));
    for (const tool of ORDER) {
      if (tool === "sandbox_delete" || tool === "policy_proposal_status" || tool === "logs_read") continue;
      expect(answers[tool]!.isError, `${tool}: ${text(answers[tool]!)}`).toBeFalsy();
    }
    // Reached the gateway, whose answers are their own: the proposal id was made up, and
    // this runtime (the test double) keeps no logs.
    expect(text(answers.policy_proposal_status!)).toMatch(/^no policy proposal pp_0000000000000000 for sandbox persons .*\(code: not_found\)$/);
    expect(text(answers.logs_read!)).toBe("the memory (test double) runtime keeps no logs (code: unavailable)");
    expect(text(answers.sandbox_delete!)).toMatch(/only a person deletes it.*\(code: forbidden\)$/);
    expect(answers.files_read!.structuredContent).toMatchObject({ content: "r" });
    expect(existsSync(join(driver.workspace, "scope-probe"))).toBe(true);
    expect((await t.api("GET", "/v1/sandboxes/persons/policy/proposals")).body.proposals).toMatchObject([{ proposedBy: "mcp" }]);
    expect((await t.api("GET", "/v1/sandboxes/persons")).body.phase).toBe("Stopped");
  }, CLI_TEST_TIMEOUT_MS);
});

describe("sandgate mcp logs_read", () => {
  let driver: LogsDriver;
  let t: TestGateway;
  let client: Client;

  beforeAll(async () => {
    driver = new LogsDriver();
    t = await startTestGateway(driver);
    rmSync(t.home.approverToken);
    ({ client } = await connectMcp(t.home.dir));
  }, CLI_TEST_TIMEOUT_MS);

  afterAll(async () => {
    await client?.close();
    await t.close();
  });

  it("the last lines of the sandbox's output, in order, stdout and stderr marked", async () => {
    expect((await call(client, "sandbox_create", { name: "lg" })).isError).toBeFalsy();
    const T = (s: number): string => `2025-01-01T00:00:0${s}.000000000Z`;
    driver.append(1, [
      { t: T(1), s: "out", l: "one" },
      { t: T(2), s: "err", l: "two" },
      { t: T(3), s: "out", l: "three" },
    ]);
    driver.end();
    const r = await call(client, "logs_read", { sandbox: "lg", tail: 2 });
    expect(r.isError, text(r)).toBeFalsy();
    expect(text(r)).toBe("err  two\nout  three");
    expect(r.structuredContent).toMatchObject({ lines: [{ stream: "err", text: "two" }, { stream: "out", text: "three" }], droppedLines: 0 });
    // Past LOGS_MAX_CHARS of text the oldest lines are dropped and counted (lines of
    // 16 KiB: the gateway sends a longer line as several partial records).
    const width = 16 * 1024;
    const n = LOGS_MAX_CHARS / width + 6;
    const line = (i: number): string => `${i}:`.padEnd(width, "x");
    driver.append(1, Array.from({ length: n }, (_, i) => ({ t: T(4), s: "out" as const, l: line(i) })));
    const cut = await call(client, "logs_read", { sandbox: "lg", tail: n });
    const sc = cut.structuredContent as { droppedLines: number; lines: { text: string }[] };
    expect([sc.droppedLines, sc.lines.length, sc.lines[0]?.text, sc.lines.at(-1)?.text]).toEqual([6, n - 6, line(6), line(n - 1)]);
    expect(text(cut).split("\n")[0]).toBe(`(6 older lines dropped past ${LOGS_MAX_CHARS} characters)`);
    const missing = await call(client, "logs_read", { sandbox: "nope" });
    expect([missing.isError, text(missing)]).toEqual([true, expect.stringMatching(/\(code: not_found\)$/)]);
  }, CLI_TEST_TIMEOUT_MS);
});

describe("sandgate mcp message bound", () => {
  it("--help names --all-sandboxes and --progress-interval; an interval outside 0.1s-30s is a usage error", async () => {
    const help = await cli(["mcp", "--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/--all-sandboxes[\s\S]*--progress-interval <duration>[\s\S]*\(default: 1s\)[\s\S]*act only on sandboxes this server created/);
    const r = await cli(["mcp", "--progress-interval", "10ms"]);
    expect([r.code, r.stdout]).toEqual([2, ""]);
    expect(r.stderr).toContain("--progress-interval must be a duration from");
  }, CLI_TEST_TIMEOUT_MS);

  it("a message past MCP_MESSAGE_MAX_BYTES ends the session with a line on stderr; nothing after it is answered", async () => {
    const home = mkdtempSync(join(tmpdir(), "sg-mcp-bound-"));
    try {
      const init = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } } });
      // Under the SDK's own default bound (10 MiB), so only ours refuses it.
      const r = await cli(["mcp", "--home", home], {}, `${"x".repeat(MCP_MESSAGE_MAX_BYTES + 1024)}\n${init}\n`);
      expect(r.stderr).toContain(`exceeded maximum size of ${MCP_MESSAGE_MAX_BYTES} bytes`);
      expect(r.stdout).toBe("");
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  }, CLI_TEST_TIMEOUT_MS);
});
