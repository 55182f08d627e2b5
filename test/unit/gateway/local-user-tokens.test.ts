// A local user on the host against the gateway's tokens (issue 29, item 2). After a gateway
// crash its address file still names its TCP listener; a host account (a real one, made for
// this) binds that port, as plain TCP answering like a gateway and as TLS with a certificate
// of its own. No CLI verb, SDK call, `sandgate mcp` tool or `policy approve` may send it the
// API token or the approver token: the CLI and SDK use the home's socket, and an https
// address must present the certificate the home holds before anything is sent. `gateway
// start` on that port names the process holding it and sends it nothing.
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { issueEndpointCertificate } from "../../../src/gateway/control/tls.js";
import { Sandgate } from "../../../src/sdk/index.js";
import { CLI_ARGS, CLI_TEST_TIMEOUT_MS, cli } from "../../support/cli-runner.js";
import { eventually } from "../../support/gateway-fixture.js";
import { HostUsers, spawnAs } from "../../support/host-user.js";
import { freePort } from "../../support/net.js";
import { failure } from "../../support/sdk-failure.js";

/** The attacker: listens on 127.0.0.1:PORT, answers any bytes like a gateway would, and on SIGTERM prints what it got. */
const LISTENER = `
const [mode, port] = process.argv.slice(1);
const net = require("net"), tls = require("tls");
let connections = 0;
const got = [];
const serve = (s) => {
  s.on("error", () => {});
  s.on("data", (d) => {
    got.push(d.toString("latin1"));
    const body = '{"sandboxes":[],"next":null,"version":"0","pid":1}';
    s.end("HTTP/1.1 200 OK\\r\\ncontent-type: application/json\\r\\ncontent-length: " + body.length + "\\r\\nconnection: close\\r\\n\\r\\n" + body);
  });
};
const srv = mode === "tls" ? tls.createServer({ cert: process.env.CERT, key: process.env.KEY }, serve) : net.createServer(serve);
srv.on("connection", () => connections++);
srv.on("tlsClientError", () => {});
srv.listen(Number(port), "127.0.0.1", () => console.log("listening " + process.pid));
process.on("SIGTERM", () => { console.log(JSON.stringify({ connections, got: got.join("") })); process.exit(0); });
`;

const NO_DOCKER_DIR = mkdtempSync(join(tmpdir(), "sg-lu-"));
const NO_DOCKER = { DOCKER_HOST: `unix://${join(NO_DOCKER_DIR, "no-docker.sock")}` };
const users = new HostUsers();
let uid: number;
let home: string;
let port: number;
let token: string;
let approver: string;

interface Listener {
  proc: ChildProcess;
  pid: number;
  /** Stops it; what it received. */
  stop(): Promise<{ connections: number; got: string }>;
}

async function listenAs(mode: "tcp" | "tls"): Promise<Listener> {
  const env: Record<string, string> = { PATH: process.env.PATH ?? "" };
  if (mode === "tls") {
    const own = await issueEndpointCertificate({ commonName: "not the gateway" });
    Object.assign(env, { CERT: own.certPem, KEY: own.keyPem });
  }
  const proc = spawnAs(uid, [process.execPath, "-e", LISTENER, mode, String(port)], { env, stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  proc.stdout!.on("data", (b: Buffer) => (out += b.toString()));
  const pid = await eventually(() => (/listening (\d+)/.exec(out) ? Number(/listening (\d+)/.exec(out)![1]) : undefined), 30_000, "the host user's listener");
  return {
    proc,
    pid,
    stop: async () => {
      proc.kill("SIGTERM");
      const line = await eventually(() => out.split("\n").find((l) => l.startsWith("{")), 30_000, "what the listener got");
      return JSON.parse(line) as { connections: number; got: string };
    },
  };
}

/** CLI verbs that read the token (and approve/reject the approver token too); the sandbox need not exist. */
const VERBS: string[][] = [
  ["gateway", "status"],
  ["gateway", "stop"],
  ["sandbox", "list"],
  ["sandbox", "get", "x"],
  ["sandbox", "create", "x"],
  ["sandbox", "delete", "x"],
  ["sandbox", "exec", "x", "--", "true"],
  ["sandbox", "logs", "x"],
  ["sandbox", "cp", "x:/sandbox/a", join(NO_DOCKER_DIR, "a")],
  ["policy", "get", "x"],
  ["policy", "approve", "x", "p-1"],
  ["policy", "reject", "x", "p-1"],
  ["secret", "list"],
  ["audit", "x"],
];

/** The process whose pid the home's address file names, if any. */
function recordedPid(): number | null {
  try {
    return (JSON.parse(readFileSync(join(home, "gateway.json"), "utf8")) as { pid: number }).pid;
  } catch {
    return null;
  }
}

function gone(pid: number): true | undefined {
  try {
    process.kill(pid, 0);
    return undefined;
  } catch {
    return true;
  }
}

beforeAll(async () => {
  uid = await users.make("api");
  home = mkdtempSync(join(tmpdir(), "sg-lu-home-"));
});

// Each test starts from a crash: a gateway with a TCP listener (TLS) besides its socket (no
// Docker daemon needed for this) is SIGKILLed, and its address file stays, naming both.
beforeEach(async () => {
  port = await freePort();
  const started = await cli(["--home", home, "gateway", "start", "--port", String(port), "--detach"], NO_DOCKER);
  expect(started.code, started.stderr).toBe(0);
  token = readFileSync(join(home, "token"), "utf8").trim();
  approver = readFileSync(join(home, "approver-token"), "utf8").trim();
  const pid = recordedPid()!;
  process.kill(pid, "SIGKILL");
  await eventually(() => gone(pid), 30_000, "the gateway gone");
}, CLI_TEST_TIMEOUT_MS);

afterAll(async () => {
  const pid = recordedPid();
  if (pid !== null && gone(pid) === undefined) process.kill(pid, "SIGKILL");
  await users.removeAll();
  rmSync(home, { recursive: true, force: true });
  rmSync(NO_DOCKER_DIR, { recursive: true, force: true });
});

describe("a host user on the port a crashed gateway recorded", () => {
  for (const mode of ["tcp", "tls"] as const) {
    it(`gets no token from any CLI verb, the SDK, sandgate mcp or policy approve (${mode === "tcp" ? "plain TCP" : "TLS with its own certificate"})`, { timeout: CLI_TEST_TIMEOUT_MS }, async () => {
      const recorded = (JSON.parse(readFileSync(join(home, "gateway.json"), "utf8")) as { url: string; listeners?: string[] });
      const tcpUrl = (recorded.listeners ?? [recorded.url]).find((u) => u.includes(`:${port}`))!;
      expect(tcpUrl).toBeDefined();
      const listener = await listenAs(mode);
      const refusals: string[] = [];
      try {
        // The home as it is (its socket), and the recorded TCP listener given by --url.
        for (const args of VERBS) {
          for (const via of [[], ["--url", tcpUrl]]) {
            const r = await cli(["--home", home, ...via, ...args], NO_DOCKER);
            expect(r.code, `${[...via, ...args].join(" ")}: ${r.stderr}`).not.toBe(0);
            refusals.push(r.stderr.trim());
          }
        }
        // The SDK, given the URL, or SANDGATE_URL.
        for (const opts of [{ home, url: tcpUrl }, { home, env: { SANDGATE_URL: tcpUrl } }]) {
          const err = await failure(Sandgate.connect(opts));
          expect(err.code).toMatch(/^(not_running|untrusted_server)$/);
        }
        // An agent's MCP server pointed at it.
        const transport = new StdioClientTransport({ command: CLI_ARGS[0]!, args: [...CLI_ARGS.slice(1), "mcp"], env: { PATH: process.env.PATH ?? "", SANDGATE_HOME: home, SANDGATE_URL: tcpUrl }, stderr: "pipe" });
        const client = new Client({ name: "local-user-test", version: "1" });
        await client.connect(transport);
        try {
          const r = (await client.callTool({ name: "sandbox_list", arguments: {} })) as { isError?: boolean };
          expect(r.isError).toBe(true);
        } finally {
          await client.close();
        }
      } finally {
        const heard = await listener.stop();
        // What the host user got: never a token, never an Authorization header.
        expect(heard.got).not.toContain(token);
        expect(heard.got).not.toContain(approver);
        expect(heard.got.toLowerCase()).not.toContain("authorization");
        // The control that the clients did dial it (the test is not vacuous): over --url.
        expect(heard.connections).toBeGreaterThan(0);
      }
      // Each refusal is one line that says why.
      for (const line of refusals) expect(line.split("\n"), line).toHaveLength(1);
      expect(refusals).toContainEqual(expect.stringMatching(mode === "tls" ? /is not the gateway \(pinned from .*api-cert\.pem\).*the API token was not sent/ : /is not the gateway .*the API token was not sent/));
    });
  }

  it("gateway start on that port names the process holding it and sends it nothing; without the port it starts on the home's socket", { timeout: CLI_TEST_TIMEOUT_MS }, async () => {
    const listener = await listenAs("tcp");
    try {
      const r = await cli(["--home", home, "gateway", "start", "--port", String(port)], NO_DOCKER);
      expect(r.code).toBe(2);
      // One line: the other user's command line (which has line ends) is shown escaped.
      expect(r.stderr.trim()).toMatch(new RegExp(`^sandgate: cannot listen on 127\\.0\\.0\\.1:${port} \\(the API\\): the port is in use; it is held by pid ${listener.pid} \\(\\S*node -e \\\\u\\{a\\}const .*\\); stop that process or choose another port$`));
      const started = await cli(["--home", home, "gateway", "start", "--detach"], NO_DOCKER);
      expect(started.code, started.stderr).toBe(0);
      expect(started.stdout).toBe(`gateway listening on unix://${join(home, "api.sock")} (pid ${(JSON.parse(readFileSync(join(home, "gateway.json"), "utf8")) as { pid: number }).pid})\n`);
      const list = await cli(["--home", home, "sandbox", "list", "--json"], NO_DOCKER);
      expect(list.code, list.stderr).toBe(0);
      expect(JSON.parse(list.stdout)).toEqual([]);
      const stopped = await cli(["--home", home, "gateway", "stop"]);
      expect(stopped.code, stopped.stderr).toBe(0);
    } finally {
      const heard = await listener.stop();
      expect(heard).toEqual({ connections: 0, got: "" });
    }
  });
});
