// A gateway that fails after its answer's headers: the body read maps as the request
// does (src/sdk/transport.ts readBody), so a connection cut mid-body is `connection_lost`,
// the request deadline mid-body is `timeout`, and an abort of the caller's own signal
// stays its AbortError; the CLI prints such a failure as one line, no stack. And a
// request that waits (`policy set --wait`, `policy approve --wait`) gets its wait on
// top of the request deadline. The "gateways" here are bare node:http servers.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { afterEach, describe, expect, it, vi } from "vitest";
import { GatewayClient } from "../../../src/cli/client.js";
import { CliError } from "../../../src/cli/errors.js";
import { EXIT } from "../../../src/sdk/errors.js";
import { SandboxFiles } from "../../../src/sdk/files.js";
import { exec } from "../../../src/sdk/exec.js";
import { readLogs } from "../../../src/sdk/logs.js";
import { SandgateError } from "../../../src/sdk/index.js";
import { SandboxPolicy } from "../../../src/sdk/policy.js";
import { Transport } from "../../../src/sdk/transport.js";
import { CLI_TEST_TIMEOUT_MS, cli } from "../../support/cli-runner.js";
import { failure } from "../../support/sdk-failure.js";
import { listenOnSocket } from "../../support/api-client.js";

vi.setConfig({ testTimeout: CLI_TEST_TIMEOUT_MS });

/** Short, so a stalled answer times out at once; generous enough that a quick answer never does. */
const SHORT_MS = 300;

const servers: Server[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    s.close();
  }
});

async function serve(handle: (req: IncomingMessage, res: ServerResponse) => void): Promise<string> {
  const s = createServer(handle);
  servers.push(s);
  return listenOnSocket(s);
}

/** Headers and the first bytes of a JSON body, then the socket destroyed. */
const cutMidBody =
  (status = 200) =>
  (_req: IncomingMessage, res: ServerResponse): void => {
    res.writeHead(status, { "content-type": "application/json", "content-length": "1000" });
    res.write('{"error":', () => res.socket?.destroy());
  };

/** Headers, then nothing (the socket stays open until the test ends). */
const stallAfterHeaders = (_req: IncomingMessage, res: ServerResponse): void => {
  res.writeHead(200, { "content-type": "application/json" });
  res.flushHeaders();
};

describe("a body read that fails", () => {
  it("a connection cut mid-body: connection_lost naming the request", async () => {
    const url = await serve(cutMidBody());
    const err = await failure(new Transport({ url, token: "t" }).request("GET", "/v1/status?x=1"));
    expect(err.code).toBe("connection_lost");
    expect(err.message).toMatch(new RegExp(`^the gateway at ${url} closed the connection during GET /v1/status \\(.+\\); see its log$`));
  });

  it("the request deadline passing mid-body: timeout", async () => {
    const url = await serve(stallAfterHeaders);
    const err = await failure(new Transport({ url, token: "t", requestTimeoutMs: SHORT_MS }).request("GET", "/v1/status"));
    expect(err.code).toBe("timeout");
    expect(err.message).toBe(`the gateway at ${url} did not answer in time`);
  });

  it("an abort of the caller's own signal mid-body stays its AbortError", async () => {
    let headersSent!: () => void;
    const sent = new Promise<void>((r) => (headersSent = r));
    const url = await serve((req, res) => {
      stallAfterHeaders(req, res);
      headersSent();
    });
    const ac = new AbortController();
    const p = new Transport({ url, token: "t" }).request("GET", "/v1/status", undefined, ac.signal);
    await sent;
    ac.abort();
    const err = await p.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).not.toBeInstanceOf(SandgateError);
    expect((err as Error).name).toBe("AbortError");
  });

  it("files: an error answer cut mid-body, and a write's answer cut mid-body: connection_lost", async () => {
    const refused = await serve(cutMidBody(404));
    const t1 = new Transport({ url: refused, token: "t" });
    const read = await failure(new SandboxFiles(t1, "sb").read("a.txt"));
    expect(read.code).toBe("connection_lost");
    expect(read.message).toMatch(/closed the connection during the read of \/sandbox\/a\.txt/);
    const written = await serve((req, res) => {
      req.resume();
      req.on("end", () => cutMidBody()(req, res));
    });
    const write = await failure(new SandboxFiles(new Transport({ url: written, token: "t" }), "sb").write("a.txt", "hi"));
    expect(write.code).toBe("connection_lost");
    expect(write.message).toMatch(/closed the connection during the write of \/sandbox\/a\.txt/);
  });

  it("the CLI prints a body cut as one line, no stack", async () => {
    const url = await serve(cutMidBody());
    const r = await cli(["--url", url, "policy", "get", "sb"], { SANDGATE_TOKEN: "t" });
    expect(r.code).toBe(EXIT.failed);
    expect(r.stderr).toMatch(/^sandgate: the gateway at .* closed the connection during GET \/v1\/sandboxes\/sb\/policy \(.+\); see its log\n$/);
    expect(r.stderr).not.toContain("    at ");
  });
});

describe("a request that waits gets its wait on top of the deadline", () => {
  /** Answers a PUT/POST only after the short deadline has certainly passed (3 × SHORT_MS); a GET at once. */
  async function slowGateway(): Promise<string> {
    return serve((req, res) => {
      req.resume();
      const answer = (): void => {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify(req.method === "GET" ? { version: "test" } : { revision: 2, pushed: true, enforced: true, connectionsClosed: 0, boundary: null }));
      };
      if (req.method === "GET") answer();
      else setTimeout(answer, 3 * SHORT_MS);
    });
  }

  it("SDK: policy.set({ wait }) outlasts the request timeout; without wait it times out", async () => {
    const url = await slowGateway();
    const t = new Transport({ url, token: "t", requestTimeoutMs: SHORT_MS });
    expect((await new SandboxPolicy(t, "sb").set("version: 1\n", { wait: 60 })).revision).toBe(2);
    expect((await failure(new SandboxPolicy(t, "sb").set("version: 1\n"))).code).toBe("timeout");
  });

  it("CLI client: a request with waitS (policy set/approve --wait) outlasts the request timeout; without it times out", async () => {
    const url = await slowGateway();
    const c = new GatewayClient({ url, token: "t", requestTimeoutMs: SHORT_MS }, {});
    expect((await c.request<{ revision: number }>("PUT", "/v1/sandboxes/sb/policy", { policy: "", wait: 60 }, undefined, 60)).revision).toBe(2);
    const err = await c.request("PUT", "/v1/sandboxes/sb/policy", { policy: "" }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(CliError);
    expect((err as CliError).exitCode).toBe(EXIT.timeout);
  });

  it("requestTimeoutMs must be a whole number of milliseconds above 0", () => {
    for (const bad of [0, -1, 1.5, Number.NaN]) {
      expect(() => new Transport({ url: "unix:///nonexistent/api.sock", token: "t", requestTimeoutMs: bad })).toThrow(/^requestTimeoutMs must be a whole number of milliseconds above 0; got /);
    }
  });
});

describe("a log read without follow", () => {
  it("ends when the gateway answers and cuts every time with no record: not_running once the window passes (it looped for good)", async () => {
    let answers = 0;
    const url = await serve((_req, res) => {
      answers++;
      res.writeHead(200, { "content-type": "application/x-ndjson", "x-sandgate-generation": "1" });
      res.write("\n", () => res.socket?.destroy());
    });
    const got: unknown[] = [];
    const read = async (): Promise<unknown> => {
      for await (const r of readLogs(() => new Transport({ url, token: "t" }), "sb", { resumeWindowMs: SHORT_MS })) got.push(r);
      return "ended";
    };
    const err = await read().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SandgateError);
    expect((err as SandgateError).code).toBe("not_running");
    expect((err as SandgateError).message).toMatch(/^the log stream broke and the gateway did not come back within 0\.3 s: /);
    expect([answers > 1, got]).toEqual([true, []]);
  });
});

describe("an exec whose upgrade is never answered", () => {
  it("fails with connection_lost once the request deadline passes (it waited for good)", async () => {
    const s = createServer();
    servers.push(s);
    s.on("upgrade", () => undefined); // holds the socket, answers nothing
    const url = await listenOnSocket(s);
    const err = await failure(exec(new Transport({ url, token: "t", requestTimeoutMs: SHORT_MS }), "sb", ["true"]));
    expect(err.code).toBe("connection_lost");
    expect(err.message).toMatch(/handshake has timed out/);
  });
});
