// Port forwarding without Docker: the argument parsers, the relay script run as a real
// process against a real loopback server, and the gateway's WebSocket route over real
// HTTP with LocalRelayDriver (the memory driver whose exec runs the relay on this host).

import { spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import net from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { loopbackAddress, parseForwardSpec } from "../../../src/cli/port-forward-args.js";
import { parsePortQuery, relayScript } from "../../../src/gateway/api/port-forward-relay.js";
import { DEFAULT_PORT_FORWARD_LIMITS } from "../../../src/gateway/api/port-forward-ws.js";
import { resolveSettings } from "../../../src/gateway/settings.js";

/** The forwarding limits the settings table reads from the environment. */
const portForwardLimitsFromEnv = (env: NodeJS.ProcessEnv) => {
  const s = resolveSettings({}, env);
  return { maxPerSandbox: s.portForwardMaxPerSandbox, maxTotal: s.portForwardMax };
};
import { eventually, startTestGateway, type TestGateway } from "../../support/gateway-fixture.js";
import { CLI_ARGS } from "../../support/cli-runner.js";
import { LocalRelayDriver } from "../../support/local-relay-driver.js";

const servers: net.Server[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.close();
});

/** A loopback server; `handler` gets each connection. */
async function serve(handler: (s: net.Socket) => void): Promise<number> {
  const server = net.createServer({ allowHalfOpen: true }, handler);
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return (server.address() as net.AddressInfo).port;
}
const echo = (s: net.Socket): void => void s.pipe(s);
/** A port nothing listens on (bound, then closed). */
async function closedPort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

describe("port-forward arguments", () => {
  it("parses [LOCAL:]REMOTE", () => {
    expect(parseForwardSpec("8080")).toEqual({ local: 8080, remote: 8080 });
    expect(parseForwardSpec("9000:8080")).toEqual({ local: 9000, remote: 8080 });
    expect(parseForwardSpec(":8080")).toEqual({ local: 0, remote: 8080 });
    expect(parseForwardSpec("0:8080")).toEqual({ local: 0, remote: 8080 });
    expect(parseForwardSpec("1:65535")).toEqual({ local: 1, remote: 65535 });
  });
  it("refuses every malformed or out-of-range port in one line naming it", () => {
    const cases: [string, string][] = [
      ["0", 'REMOTE must be a port from 1 to 65535; got "0"'],
      ["65536", 'REMOTE must be a port from 1 to 65535; got "65536"'],
      ["abc", 'REMOTE must be a port from 1 to 65535; got "abc"'],
      ["-1", 'REMOTE must be a port from 1 to 65535; got "-1"'],
      ["8080:", 'REMOTE must be a port from 1 to 65535; got ""'],
      ["80.5", 'REMOTE must be a port from 1 to 65535; got "80.5"'],
      [" 80", 'REMOTE must be a port from 1 to 65535; got " 80"'],
      ["x:80", 'LOCAL must be a port from 0 to 65535; got "x"'],
      ["70000:80", 'LOCAL must be a port from 0 to 65535; got "70000"'],
      ["1:2:3", 'expected [LOCAL:]REMOTE, e.g. 8080 or 9000:8080; got "1:2:3"'],
    ];
    for (const [raw, error] of cases) expect(parseForwardSpec(raw), raw).toEqual({ error });
  });
  it("listens on loopback only", () => {
    expect(loopbackAddress("127.0.0.1")).toEqual({ address: "127.0.0.1" });
    expect(loopbackAddress("127.0.0.2")).toEqual({ address: "127.0.0.2" });
    expect(loopbackAddress("::1")).toEqual({ address: "::1" });
    expect(loopbackAddress("localhost")).toEqual({ address: "127.0.0.1" });
    for (const bad of ["0.0.0.0", "::", "192.168.1.10", "10.0.0.1", "example.com", "", "127.1", "::ffff:127.0.0.1"]) {
      const r = loopbackAddress(bad);
      expect(r, bad).toEqual({ error: expect.stringContaining(`--address ${JSON.stringify(bad)} is not a loopback address`) });
    }
  });
  it("the API's port query: decimal 1-65535 only", () => {
    expect(parsePortQuery("8080")).toEqual({ port: 8080 });
    expect(parsePortQuery(null)).toEqual({ error: "port: required, a TCP port from 1 to 65535 inside the workload" });
    for (const bad of ["0", "65536", "abc", "0x50", "1e3", "", "-80", "80 "]) {
      expect(parsePortQuery(bad), bad).toEqual({ error: `port: must be a whole number from 1 to 65535; got ${JSON.stringify(bad)}` });
    }
  });
  it("limits from the environment: defaults when absent, one line when bad", () => {
    expect(portForwardLimitsFromEnv({})).toEqual({ maxPerSandbox: DEFAULT_PORT_FORWARD_LIMITS.maxPerSandbox, maxTotal: DEFAULT_PORT_FORWARD_LIMITS.maxTotal });
    expect(DEFAULT_PORT_FORWARD_LIMITS).toMatchObject({ maxPerSandbox: 32, maxTotal: 256 });
    expect(portForwardLimitsFromEnv({ SANDGATE_PORT_FORWARD_MAX_PER_SANDBOX: "4", SANDGATE_PORT_FORWARD_MAX: "9" })).toEqual({ maxPerSandbox: 4, maxTotal: 9 });
    expect(() => portForwardLimitsFromEnv({ SANDGATE_PORT_FORWARD_MAX: "lots" })).toThrow(
      'SANDGATE_PORT_FORWARD_MAX must be a whole number from 1 to 100000; got "lots"',
    );
    expect(() => portForwardLimitsFromEnv({ SANDGATE_PORT_FORWARD_MAX_PER_SANDBOX: "0" })).toThrow(/SANDGATE_PORT_FORWARD_MAX_PER_SANDBOX must be a whole number from 1/);
  });
});

/** Runs the relay script as a process, as the workload would. */
function runRelay(port: number, input: Buffer | null): Promise<{ code: number | null; stdout: Buffer; stderr: string }> {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, ["-e", relayScript(port)], { stdio: ["pipe", "pipe", "pipe"] });
    const out: Buffer[] = [];
    let stderr = "";
    p.stdout.on("data", (b: Buffer) => out.push(b));
    p.stderr.on("data", (b: Buffer) => (stderr += b.toString()));
    p.on("close", (code) => resolve({ code, stdout: Buffer.concat(out), stderr }));
    if (input) p.stdin.end(input);
  });
}

describe("the relay script (run by node, as in the workload)", () => {
  it("connects, says so on stderr, passes the half-close on, and ends when the server closes", async () => {
    // The server answers only after the client's EOF: the relay must pass stdin's end on as a FIN.
    const port = await serve((s) => {
      const got: Buffer[] = [];
      s.on("data", (b: Buffer) => got.push(b));
      s.on("end", () => s.end(`got ${Buffer.concat(got).length} bytes`));
    });
    const r = await runRelay(port, Buffer.alloc(100_000, 7));
    expect(r.stderr).toBe("sandgate-relay: connected\n");
    expect(r.stdout.toString()).toBe("got 100000 bytes");
    expect(r.code).toBe(0);
  });
  it("copies 8 MiB from the server intact", async () => {
    const data = randomBytes(8 << 20);
    const port = await serve((s) => s.end(data));
    const r = await runRelay(port, null);
    expect(r.code).toBe(0);
    expect(createHash("sha256").update(r.stdout).digest("hex")).toBe(createHash("sha256").update(data).digest("hex"));
  });
  it("a slow reader still gets every byte: the relay exits only once its stdout is flushed", async () => {
    const data = randomBytes(4 << 20);
    const port = await serve((s) => s.end(data));
    const p = spawn(process.execPath, ["-e", relayScript(port)], { stdio: ["pipe", "pipe", "pipe"] });
    // A reader that lags: the relay's last bytes are still queued for stdout when its socket closes.
    const out: Buffer[] = [];
    p.stdout.on("data", (b: Buffer) => {
      out.push(b);
      p.stdout.pause();
      setTimeout(() => p.stdout.resume(), 5);
    });
    const code = await new Promise<number | null>((r) => p.on("close", r));
    expect(code).toBe(0);
    expect(createHash("sha256").update(Buffer.concat(out)).digest("hex")).toBe(createHash("sha256").update(data).digest("hex"));
  });
  it("a port nothing listens on: exit 1 naming the error", async () => {
    const r = await runRelay(await closedPort(), Buffer.alloc(0));
    expect(r.code).toBe(1);
    expect(r.stdout.length).toBe(0);
    expect(r.stderr).toBe("sandgate-relay: failed ECONNREFUSED\n");
  });
  it("refuses to build a script for a port out of range", () => {
    expect(() => relayScript(0)).toThrow(RangeError);
    expect(() => relayScript(65536)).toThrow(RangeError);
    expect(() => relayScript(1.5)).toThrow(RangeError);
  });
});

// --- The API ---

let t: TestGateway | undefined;
let driver: LocalRelayDriver;
afterEach(async () => {
  await t?.close();
  t = undefined;
});

async function gateway(limits: { maxPerSandbox?: number; maxTotal?: number } = {}): Promise<TestGateway> {
  driver = new LocalRelayDriver();
  t = await startTestGateway(driver, { portForward: limits });
  return t;
}
async function ready(g: TestGateway, name: string): Promise<void> {
  expect((await g.api("POST", "/v1/sandboxes", { name })).status).toBe(201);
  await eventually(async () => ((await g.api("GET", `/v1/sandboxes/${name}`)).body.phase === "Ready" ? true : undefined), 30_000, `${name} Ready`);
}

interface Opened {
  ws: WebSocket;
  /** Binary bytes received, in order. */
  data: Buffer[];
  /** Text frames received. */
  texts: string[];
  closed: Promise<number>;
}
type Refused = { status: number; body: { error: { code: string; message: string } } };

function open(g: TestGateway, name: string, port: string, token = g.token): Promise<Opened | Refused> {
  const ws = new WebSocket(g.wsUrl(`/v1/sandboxes/${name}/port-forward?port=${port}`), {
    headers: { authorization: `Bearer ${token}` },
    perMessageDeflate: false,
  });
  const data: Buffer[] = [];
  const texts: string[] = [];
  const closed = new Promise<number>((r) => ws.on("close", (code) => r(code)));
  ws.on("message", (d: Buffer, binary: boolean) => (binary ? data.push(d) : texts.push(d.toString())));
  return new Promise((resolve, reject) => {
    ws.on("open", () => resolve({ ws, data, texts, closed }));
    ws.on("unexpected-response", (_req, res) => {
      let body = "";
      res.on("data", (b: Buffer) => (body += b.toString()));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(body) }));
    });
    ws.on("error", reject);
  });
}
const opened = (r: Opened | Refused): Opened => {
  if ("status" in r) throw new Error(`refused: ${r.status} ${JSON.stringify(r.body)}`);
  return r;
};
const refused = (r: Opened | Refused): Refused => {
  if (!("status" in r)) throw new Error("expected a refusal, got an open WebSocket");
  return r;
};

describe("the port-forward API", () => {
  it("relays both ways, passes the client's half-close on, and closes 1000 when the server's side ends", async () => {
    const g = await gateway();
    await ready(g, "pf");
    const port = await serve((s) => {
      const got: Buffer[] = [];
      s.on("data", (b: Buffer) => got.push(b));
      s.on("end", () => s.end(`echo:${Buffer.concat(got).toString()}`));
    });
    const c = opened(await open(g, "pf", String(port)));
    c.ws.send(Buffer.from("hello "), { binary: true });
    c.ws.send(Buffer.from("world"), { binary: true });
    c.ws.send(JSON.stringify({ type: "eof" }));
    expect(await c.closed).toBe(1000);
    expect(Buffer.concat(c.data).toString()).toBe("echo:hello world");
    expect(c.texts).toEqual([]);
    await eventually(async () => ((await g.api("GET", "/v1/status")).body.portForward.open === 0 ? true : undefined), 30_000, "slot released");
  });

  it("an open forwarded connection is a session (--idle-stop waits for it) until it closes", async () => {
    const g = await gateway();
    await ready(g, "pf-idle");
    const sessions = async (): Promise<number> => (await g.api("GET", "/v1/sandboxes/pf-idle")).body.expiry.openSessions as number;
    expect(await sessions()).toBe(0);
    const c = opened(await open(g, "pf-idle", String(await serve(echo))));
    expect(await sessions()).toBe(1);
    c.ws.close();
    await c.closed;
    await eventually(async () => ((await sessions()) === 0 ? true : undefined), 30_000, "the session ended with the connection");
  });

  it("8 MiB from the workload's server arrive intact, and 8 MiB to it", async () => {
    const g = await gateway();
    await ready(g, "big");
    const down = randomBytes(8 << 20);
    const p1 = await serve((s) => s.end(down));
    const c = opened(await open(g, "big", String(p1)));
    expect(await c.closed).toBe(1000);
    expect(createHash("sha256").update(Buffer.concat(c.data)).digest("hex")).toBe(createHash("sha256").update(down).digest("hex"));

    const up = randomBytes(8 << 20);
    const p2 = await serve((s) => {
      const h = createHash("sha256");
      s.on("data", (b: Buffer) => h.update(b));
      s.on("end", () => s.end(h.digest("hex")));
    });
    const d = opened(await open(g, "big", String(p2)));
    for (let i = 0; i < up.length; i += 256 * 1024) d.ws.send(up.subarray(i, i + 256 * 1024), { binary: true });
    d.ws.send(JSON.stringify({ type: "eof" }));
    expect(await d.closed).toBe(1000);
    expect(Buffer.concat(d.data).toString()).toBe(createHash("sha256").update(up).digest("hex"));
  });

  it("several connections at once, each its own stream", async () => {
    const g = await gateway();
    await ready(g, "many");
    const port = await serve(echo);
    const conns = await Promise.all([1, 2, 3, 4, 5].map(async () => opened(await open(g, "many", String(port)))));
    conns.forEach((c, i) => c.ws.send(Buffer.from(`conn-${i}`), { binary: true }));
    await eventually(() => (conns.every((c, i) => Buffer.concat(c.data).toString() === `conn-${i}`) ? true : undefined), 30_000, "each echo");
    expect((await g.api("GET", "/v1/status")).body.portForward.open).toBe(5);
    for (const c of conns) c.ws.close();
    await eventually(async () => ((await g.api("GET", "/v1/status")).body.portForward.open === 0 ? true : undefined), 30_000, "slots released");
    await eventually(() => (driver.relays.size === 0 ? true : undefined), 30_000, "relays exited");
  });

  it("a port nothing listens on is refused before the upgrade, naming it", async () => {
    const g = await gateway();
    await ready(g, "shut");
    const port = await closedPort();
    const r = refused(await open(g, "shut", String(port)));
    expect(r.status).toBe(503);
    expect(r.body.error.message).toBe(`cannot connect to 127.0.0.1:${port} inside sandbox "shut": nothing is listening there (ECONNREFUSED)`);
    expect((await g.api("GET", "/v1/status")).body.portForward.open).toBe(0);
  });

  it("an image without the relay binary: a clear refusal naming what is missing", async () => {
    const g = await gateway();
    await ready(g, "bare");
    driver.missingRelay = true;
    const r = refused(await open(g, "bare", "8080"));
    expect(r.status).toBe(503);
    expect(r.body.error.message).toMatch(/^the workload image of sandbox "bare" has no "node" on its PATH: port-forward runs node inside the workload to reach 127\.0\.0\.1:8080/);
  });

  it("refuses bad ports, a missing or wrong token, an unknown sandbox and one not Ready — and starts no relay", async () => {
    const g = await gateway();
    await ready(g, "r");
    for (const bad of ["0", "65536", "abc", "-1", "1e3"]) {
      const r = refused(await open(g, "r", bad));
      expect(r.status, bad).toBe(400);
      expect(r.body.error.message).toBe(`port: must be a whole number from 1 to 65535; got ${JSON.stringify(bad)}`);
    }
    expect(refused(await open(g, "r", "80", "wrong-token")).status).toBe(401);
    expect(refused(await open(g, "nope", "80")).body.error).toEqual({ code: "not_found", message: 'no sandbox named "nope"' });
    expect((await g.api("POST", "/v1/sandboxes/r/stop")).status).toBe(202);
    await eventually(async () => ((await g.api("GET", "/v1/sandboxes/r")).body.phase === "Stopped" ? true : undefined), 30_000, "Stopped");
    const stopped = refused(await open(g, "r", "80"));
    expect(stopped.body.error.code).toBe("not_allowed");
    expect(driver.execs).toBe(0);
    // The exec route still answers its own upgrades (both share the server's upgrade event).
    const exec = refused(await open(g, "r", "80").then(() => openExec(g)));
    expect(exec.body.error.code).toBe("not_allowed");
  });

  it("bounds connections per sandbox and per gateway; a freed slot is usable again", async () => {
    const g = await gateway({ maxPerSandbox: 2, maxTotal: 3 });
    await ready(g, "a");
    await ready(g, "b");
    const port = await serve(echo);
    const a1 = opened(await open(g, "a", String(port)));
    opened(await open(g, "a", String(port)));
    const a3 = refused(await open(g, "a", String(port)));
    expect(a3.status).toBe(503);
    expect(a3.body.error.message).toBe(
      'sandbox "a" has 2 forwarded connections open, the most allowed (SANDGATE_PORT_FORWARD_MAX_PER_SANDBOX=2); close one and retry',
    );
    opened(await open(g, "b", String(port)));
    const b2 = refused(await open(g, "b", String(port)));
    expect(b2.body.error.message).toBe("the gateway has 3 forwarded connections open, the most allowed (SANDGATE_PORT_FORWARD_MAX=3); close one and retry");
    a1.ws.close();
    await a1.closed;
    await eventually(async () => ("ws" in (await open(g, "a", String(port))) ? true : undefined), 30_000, "a slot again");
    expect((await g.api("GET", "/v1/status")).body.portForward.refusedAtLimit).toBeGreaterThanOrEqual(2);
  });

  it("stopping the sandbox closes its open connections with a message", async () => {
    const g = await gateway();
    await ready(g, "st");
    const port = await serve(() => undefined); // holds the connection open, says nothing
    const c = opened(await open(g, "st", String(port)));
    expect((await g.api("POST", "/v1/sandboxes/st/stop")).status).toBe(202);
    expect(await c.closed).toBe(1011);
    expect(c.texts.map((x) => JSON.parse(x))).toEqual([{ type: "error", message: expect.stringMatching(/^sandbox "st" is (Stopping|Stopped): the forwarded connection was closed$/) }]);
  });

  it("a client that sends garbage text frames gets an error frame; the connection keeps working", async () => {
    const g = await gateway();
    await ready(g, "g");
    const port = await serve(echo);
    const c = opened(await open(g, "g", String(port)));
    c.ws.send("not json");
    c.ws.send(Buffer.from("still"), { binary: true });
    await eventually(() => (Buffer.concat(c.data).toString() === "still" ? true : undefined), 30_000, "echo after garbage");
    expect(c.texts.map((x) => JSON.parse(x).message)).toEqual(['bad control frame: only {"type":"eof"} is accepted']);
    c.ws.close();
  });
});

describe("sandgate sandbox port-forward (the CLI)", () => {
  it("a port nothing listens on: one line per connection naming the port, nothing after it; the forward keeps serving", async () => {
    const g = await gateway();
    await ready(g, "shut");
    const port = await closedPort();
    const p = spawn(CLI_ARGS[0]!, [...CLI_ARGS.slice(1), "--home", g.home.dir, "sandbox", "port-forward", "shut", `0:${port}`], { env: { ...process.env, SANDGATE_URL: undefined, SANDGATE_TOKEN: undefined } });
    let out = "";
    let err = "";
    p.stdout.on("data", (b: Buffer) => (out += b.toString()));
    p.stderr.on("data", (b: Buffer) => (err += b.toString()));
    const exit = new Promise<number | null>((r) => p.on("close", (code) => r(code)));
    const local = await eventually(() => Number(/^Forwarding from 127\.0\.0\.1:(\d+) -> \d+\n/.exec(out)?.[1] ?? NaN) || undefined, 60_000, "Forwarding from ...");
    const line = (peer: number): string => `sandgate: connection from 127.0.0.1:${peer}: cannot connect to 127.0.0.1:${port} inside sandbox "shut": nothing is listening there (ECONNREFUSED)`;
    const peers: number[] = [];
    // One connection after another: whatever the first made the CLI print came before the second's line.
    for (let i = 0; i < 2; i++) {
      const c = net.connect(local, "127.0.0.1");
      c.on("error", () => undefined);
      await new Promise<void>((r) => c.once("connect", () => r()));
      peers.push(c.localPort!);
      await new Promise<void>((r) => c.once("close", () => r()));
      await eventually(() => (err.includes(line(peers[i]!)) ? true : undefined), 60_000, `the refusal of connection ${i + 1}; stderr so far:\n${err}`);
    }
    expect(err.split("\n").slice(0, 2)).toEqual(peers.map(line));
    p.kill("SIGINT");
    expect(await exit).toBe(0);
    expect(err).toBe(peers.map((x) => `${line(x)}\n`).join(""));
  });
});

function openExec(g: TestGateway): Promise<Opened | Refused> {
  const ws = new WebSocket(g.wsUrl(`/v1/sandboxes/r/exec?cmd=true`), { headers: { authorization: `Bearer ${g.token}` } });
  return new Promise((resolve, reject) => {
    ws.on("open", () => resolve({ ws, data: [], texts: [], closed: Promise.resolve(0) }));
    ws.on("unexpected-response", (_req, res) => {
      let body = "";
      res.on("data", (b: Buffer) => (body += b.toString()));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(body) }));
    });
    ws.on("error", reject);
  });
}
