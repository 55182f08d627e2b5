// Where the API listens and how a client decides it may send its token there (issue 29,
// item 2): the home's socket always (0600 in a 0700 home), more sockets and TLS-only TCP
// listeners with --listen, `--listen` values checked, a socket another user could have
// made refused before a byte is sent, an https gateway trusted only with the certificate
// the client pins (the home's, or SANDGATE_CERT), and ports fetch would refuse (6000…) usable.
import { chmodSync, chownSync, copyFileSync, mkdirSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { connect, createServer, type Server, type Socket } from "node:net";
import { connect as tlsConnect } from "node:tls";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { formatListenAddress, parseListenAddress, type ListenAddress } from "../../../src/gateway/api/listen-address.js";
import { issueEndpointCertificate } from "../../../src/gateway/control/tls.js";
import { socketTrustProblem } from "../../../src/sdk/endpoint.js";
import { Sandgate } from "../../../src/sdk/index.js";
import { CLI_TEST_TIMEOUT_MS, cli } from "../../support/cli-runner.js";
import { eventually, startTestGateway, type TestGateway } from "../../support/gateway-fixture.js";
import { MemoryDriver } from "../../support/memory-driver.js";
import { failure } from "../../support/sdk-failure.js";
import { freePort } from "../../support/net.js";

describe("--listen values", () => {
  it("takes unix:///PATH and tcp://HOST:PORT (IPv4, [IPv6], localhost), and prints them back as given", () => {
    const cases: [string, ListenAddress][] = [
      ["unix:///run/sandgate/api.sock", { kind: "unix", path: "/run/sandgate/api.sock" }],
      ["tcp://127.0.0.1:7420", { kind: "tcp", host: "127.0.0.1", port: 7420 }],
      ["tcp://0.0.0.0:0", { kind: "tcp", host: "0.0.0.0", port: 0 }],
      ["tcp://[::1]:65535", { kind: "tcp", host: "::1", port: 65535 }],
      ["tcp://localhost:6000", { kind: "tcp", host: "localhost", port: 6000 }],
    ];
    for (const [text, address] of cases) {
      expect(parseListenAddress(text)).toEqual({ ok: true, address });
      expect(formatListenAddress(address)).toBe(text);
    }
  });

  it("refuses anything else with one line naming the value and what is allowed", () => {
    const cases: [string, string][] = [
      ["http://127.0.0.1:7420", "expected unix:///PATH or tcp://HOST:PORT"],
      ["127.0.0.1:7420", "expected unix:///PATH or tcp://HOST:PORT"],
      ["unix://relative.sock", "expected unix:///ABSOLUTE/PATH"],
      [`unix:///${"x".repeat(107)}`, "a socket path is at most 107 bytes"],
      ["unix:///a\nb", "the path has a control character"],
      ["tcp://127.0.0.1", "expected tcp://HOST:PORT, e.g. tcp://127.0.0.1:7420 or tcp://[::1]:7420"],
      ["tcp://127.0.0.1:65536", "the port is 0-65535"],
      ["tcp://[127.0.0.1]:1", "127.0.0.1 is not an IPv6 address"],
      ["tcp://example.com:7420", "the host is an IP address or localhost"],
      ["tcp://127.0.0.1:74x", "expected tcp://HOST:PORT, e.g. tcp://127.0.0.1:7420 or tcp://[::1]:7420"],
    ];
    for (const [text, why] of cases) expect(parseListenAddress(text)).toEqual({ ok: false, error: `invalid listen address ${JSON.stringify(text)}: ${why}` });
  });

  it("gateway start: a bad --listen or SANDGATE_LISTEN is exit 2, one line, and nothing starts", { timeout: CLI_TEST_TIMEOUT_MS }, async () => {
    const home = mkdtempSync(join(tmpdir(), "sg-listen-bad-"));
    try {
      const flag = await cli(["--home", home, "gateway", "start", "--listen", "http://127.0.0.1:7420"]);
      expect([flag.code, flag.stderr.trim().split("\n")[0]]).toEqual([2, `sandgate: --listen: invalid listen address "http://127.0.0.1:7420": expected unix:///PATH or tcp://HOST:PORT`]);
      const env = await cli(["--home", home, "gateway", "start"], { SANDGATE_LISTEN: "unix:///ok.sock, tcp://1.2.3.4" });
      expect([env.code, env.stderr.trim().split("\n")[0]]).toEqual([2, `sandgate: SANDGATE_LISTEN: invalid listen address "tcp://1.2.3.4": expected tcp://HOST:PORT, e.g. tcp://127.0.0.1:7420 or tcp://[::1]:7420`]);
      expect(statSync(home).isDirectory()).toBe(true);
      expect(() => statSync(join(home, "gateway.json"))).toThrow();
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });
});

describe("the API's listeners", () => {
  let t: TestGateway;
  let extraSocket: string;
  let badPort: number;
  let dir: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "sg-listen-"));
    extraSocket = join(dir, "extra.sock");
    // A port fetch refuses (the WHATWG "bad ports"), where one is free: the client must not care.
    // Another process (a second copy of the suite, scripts/soak.sh) may take the port between
    // the look and the bind: then the next one.
    for (const candidates = [6000, 6665, 6666, 6667, 6668, 6669, 6697, 10080]; ; ) {
      badPort = await firstFree(candidates);
      try {
        t = await startTestGateway(new MemoryDriver(), {
          listen: [
            { kind: "unix", path: extraSocket },
            { kind: "tcp", host: "127.0.0.1", port: badPort },
          ],
        });
        break;
      } catch (err) {
        if (!/the port is in use/.test((err as Error).message) || !candidates.includes(badPort)) throw err;
        candidates.splice(0, candidates.indexOf(badPort) + 1);
      }
    }
    await t.api("POST", "/v1/sandboxes", { name: "l1" });
    await eventually(async () => ((await t.api("GET", "/v1/sandboxes/l1")).body.phase === "Ready" ? true : undefined), 10_000, "l1 Ready");
  });
  afterAll(async () => {
    await t?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("the home's socket (0600, the home 0700) first, then each --listen; gateway.json and status name them all", async () => {
    const https = `https://127.0.0.1:${badPort}`;
    expect(t.gw.listeners).toEqual([`unix://${t.home.socket}`, `unix://${extraSocket}`, https]);
    expect(statSync(t.home.socket).mode & 0o777).toBe(0o600);
    expect(statSync(extraSocket).mode & 0o777).toBe(0o600);
    expect(statSync(t.home.dir).mode & 0o777).toBe(0o700);
    const api = (await t.api("GET", "/v1/status")).body.api;
    expect(api.listeners).toEqual(t.gw.listeners);
    // Each listener's connections, bounded with the defaults.
    expect(api.connections.map((c: { url: string }) => c.url)).toEqual(t.gw.listeners);
    for (const c of api.connections) expect(c.limits).toEqual({ headerTimeoutMs: 10_000, idleTimeoutMs: 60_000, maxAuthenticated: 1024, maxUnauthenticated: 128 });
    // The API certificate is made in the home for a TCP listener; its key is the owner's only.
    expect(statSync(t.home.apiKey).mode & 0o777).toBe(0o600);
  });

  it("every listener serves the same API, upgrades included: the SDK over the extra socket and over https (a bad port for fetch)", async () => {
    for (const url of [`unix://${extraSocket}`, `https://127.0.0.1:${badPort}`]) {
      await using sg = await Sandgate.connect({ url, token: t.token, home: t.home.dir, env: {} });
      const names: string[] = [];
      for await (const s of sg.sandboxes.list()) names.push(s.name);
      expect(names).toEqual(["l1"]);
      // An upgrade route (exec, a WebSocket) through the same listener.
      expect(await (await sg.sandboxes.get("l1")).exec(["exit", "7"])).toBe(7);
    }
    // The CLI too, given the https URL (it pins the home's api-cert.pem).
    const r = await cli(["--home", t.home.dir, "--url", `https://127.0.0.1:${badPort}`, "sandbox", "list", "-q"]);
    expect([r.code, r.stdout, r.stderr]).toEqual([0, "l1\n", ""]);
  });

  it("a client away from the home pins the certificate SANDGATE_CERT names; another certificate is refused and nothing is sent", { timeout: CLI_TEST_TIMEOUT_MS }, async () => {
    const remote = mkdtempSync(join(tmpdir(), "sg-remote-"));
    try {
      const url = `https://127.0.0.1:${badPort}`;
      copyFileSync(t.home.apiCert, join(remote, "gw.pem"));
      const ok = await cli(["--home", remote, "sandbox", "list", "-q"], { SANDGATE_URL: url, SANDGATE_TOKEN: t.token, SANDGATE_CERT: join(remote, "gw.pem") });
      expect([ok.code, ok.stdout, ok.stderr]).toEqual([0, "l1\n", ""]);
      // No certificate to pin: refused before connecting.
      const none = await cli(["--home", remote, "sandbox", "list"], { SANDGATE_URL: url, SANDGATE_TOKEN: t.token });
      expect([none.code, none.stderr.trim()]).toEqual([2, `sandgate: no certificate to check ${url} against: set SANDGATE_CERT to a copy of the gateway home's api-cert.pem (a client sends its token only to the gateway that certificate names)`]);
      // The pin of another gateway: the TLS handshake fails before the request is written.
      const other = await issueEndpointCertificate();
      const wrong = await failure(Sandgate.connect({ url, token: t.token, cert: other.certPem, home: remote, env: {} }));
      expect(wrong.code).toBe("untrusted_server");
      expect(wrong.exitCode).toBe(3);
      expect(wrong.message).toMatch(new RegExp(`^what answers at ${url.replace(/\./g, "\\.")} is not the gateway \\(pinned from the cert option\\): .*; the API token was not sent$`));
      // A plain http:// address is refused outright: the token would travel in the clear.
      const plain = await failure(Sandgate.connect({ url: `http://127.0.0.1:${badPort}`, token: t.token, home: remote, env: {} }));
      expect([plain.code, plain.exitCode]).toEqual(["invalid_request", 2]);
      expect(plain.message).toMatch(/^url is plain http \(http:\/\/127\.0\.0\.1:\d+\): the API token would go in the clear/);
    } finally {
      rmSync(remote, { recursive: true, force: true });
    }
  });
});

describe("a socket the client cannot trust", () => {
  it("one in a directory others may write to, or owned by another user, gets no byte: untrusted_server, exit 3", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sg-untrusted-"));
    const open = join(dir, "open");
    mkdirSync(open, { mode: 0o777 });
    chmodSync(open, 0o1777); // like /tmp: anyone may create a socket here
    const got: string[] = [];
    const srv: Server = createServer((s) => s.on("data", (d) => got.push(d.toString())));
    await new Promise<void>((r) => srv.listen(join(open, "api.sock"), r));
    try {
      const err = await failure(Sandgate.connect({ url: `unix://${join(open, "api.sock")}`, token: "secret-token", env: {} }));
      expect([err.code, err.exitCode]).toEqual(["untrusted_server", 3]);
      expect(err.message).toBe(`refusing to send the API token to ${join(open, "api.sock")}: its directory ${open} is writable by other users (mode 1777), so another local user could have put a listener there; nothing was sent`);
      // A socket another user owns, in a directory of ours.
      const theirs = join(dir, "theirs");
      mkdirSync(theirs, { mode: 0o700 });
      const srv2 = createServer((s) => s.on("data", (d) => got.push(d.toString())));
      await new Promise<void>((r) => srv2.listen(join(theirs, "api.sock"), r));
      chownSync(join(theirs, "api.sock"), 4242, 4242);
      try {
        expect(socketTrustProblem(join(theirs, "api.sock"))).toBe("it belongs to uid 4242, not to root or to this user (uid 0)");
        expect((await failure(Sandgate.connect({ url: `unix://${join(theirs, "api.sock")}`, token: "secret-token", env: {} }))).code).toBe("untrusted_server");
      } finally {
        srv2.close();
      }
      expect(got).toEqual([]);
      // The directory of a user who is not root nor us.
      chownSync(theirs, 4242, 4242);
      expect(socketTrustProblem(join(theirs, "api.sock"))).toBe(`its directory ${theirs} belongs to uid 4242, not to root or to this user (uid 0)`);
    } finally {
      srv.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

async function firstFree(ports: number[]): Promise<number> {
  for (const port of ports) {
    const free = await new Promise<boolean>((resolve) => {
      const s = createServer();
      s.once("error", () => resolve(false));
      s.listen({ port, host: "127.0.0.1", exclusive: true }, () => s.close(() => resolve(true)));
    });
    if (free) return port;
  }
  return freePort();
}

describe("the API's listeners are bounded (issue 29, item 3)", () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway(new MemoryDriver(), {
      listen: [{ kind: "tcp", host: "127.0.0.1", port: 0 }],
      connections: { headerTimeoutMs: 600, idleTimeoutMs: 60_000, maxUnauthenticated: 4, maxAuthenticated: 2 },
    });
  });
  afterAll(async () => {
    await t?.close();
  });
  const tcp = (): URL => new URL(t.gw.listeners[1]!);
  const stats = async (url: string): Promise<{ open: { unauthenticated: number; authenticated: number }; closed: Record<string, number> }> =>
    ((await t.api("GET", "/v1/status")).body.api.connections as { url: string }[]).find((c) => c.url === url) as never;

  it("slow connections (a TLS handshake never finished, a head never finished) are closed; the oldest makes room for a client that authenticates", async () => {
    const url = tcp();
    const slow: Socket[] = [];
    const closed: boolean[] = [];
    for (let i = 0; i < 4; i++) {
      const s = i % 2 === 0 ? connect({ host: url.hostname, port: Number(url.port) }, () => s.write(Buffer.from([0x16, 0x03, 0x01]))) : tlsConnect({ host: url.hostname, port: Number(url.port), rejectUnauthorized: false }, () => s.write("GET /v1/status HTTP/1.1\r\nX-Slow: "));
      s.on("error", () => undefined);
      const k = closed.push(false) - 1;
      s.on("close", () => (closed[k] = true));
      slow.push(s);
    }
    await eventually(async () => ((await stats(url.origin)).open.unauthenticated === 4 ? true : undefined), 10_000, "4 slow connections held");
    // The pool of the unauthenticated is full: a client with the token still gets in (the oldest goes).
    await using sg = await Sandgate.connect({ url: url.origin, token: t.token, home: t.home.dir, env: {} });
    expect((await sg.status()).version).toBeDefined();
    // And the slow ones are all closed by the bounds, none by us.
    await eventually(() => (closed.every(Boolean) ? true : undefined), 10_000, "every slow connection closed");
    const s = await stats(url.origin);
    expect(s.closed.evicted).toBeGreaterThanOrEqual(1);
    expect(s.closed.evicted! + s.closed.header_timeout! + s.closed.handshake_timeout!).toBeGreaterThanOrEqual(4);
  });

  it("past --max-connections authenticated connections a request is 503 naming the limit; the socket's clients are bounded too", async () => {
    // Two watch streams hold the two authenticated slots of the socket listener.
    const held = [new AbortController(), new AbortController()];
    const streams = await Promise.all(held.map((ac) => t.fetch("/v1/watch", { headers: { authorization: `Bearer ${t.token}` }, signal: ac.signal })));
    try {
      expect(streams.map((r) => r.status)).toEqual([200, 200]);
      const refused = await t.fetch("/v1/status", { headers: { authorization: `Bearer ${t.token}` } });
      expect(refused.status).toBe(503);
      expect(refused.headers.get("connection")).toBe("close");
      expect(((await refused.json()) as { error: { message: string } }).error.message).toBe("the listener holds its 2 authenticated connections (connections_full)");
    } finally {
      for (const ac of held) ac.abort();
    }
    // Slots free again once the streams end.
    await eventually(async () => ((await t.fetch("/v1/status", { headers: { authorization: `Bearer ${t.token}` } })).status === 200 ? true : undefined), 10_000, "a slot again");
  });
});
