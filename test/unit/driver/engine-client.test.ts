// EngineClient against a FAKE engine (test/support/fake-engine.ts) on a Unix socket:
// every failure mode must come back as a typed result, promptly, never as a throw or hang.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import fc from "fast-check";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { EngineClient } from "../../../src/driver/docker/engine/client.js";
import { createDemuxer, encodeFrame } from "../../../src/driver/docker/engine/demux.js";
import { socketPathFromDockerHost } from "../../../src/driver/docker/engine/host.js";
import { TransportCode, describe as describeResult, type EngineResult } from "../../../src/driver/docker/engine/result.js";
import { encodeQuery, type StreamEnd } from "../../../src/driver/docker/engine/transport.js";
import type { DockerEvent } from "../../../src/driver/docker/engine/types.js";
import { createJsonLineSplitter } from "../../../src/driver/docker/engine/lines.js";
import { FakeEngine, UPGRADED, reply, staleSocket } from "../../support/fake-engine.js";
import { collectDemuxed } from "../../support/demux.js";

/** Bounds below only catch a hang; no test measures how long anything took. */
const HANG_MS = 20_000;
/** The client's own timeout where a test does not exercise it: never reached by a slow machine. */
const CLIENT_TIMEOUT_MS = 60_000;
/** A client timeout a test does exercise (or shows is not applied). */
const SHORT_TIMEOUT_MS = 400;
/**
 * A marker call's timeout, to show SHORT_TIMEOUT_MS is not applied to a stream: longer
 * than it plus undici's body-timer resolution (about 1 s), twice over.
 */
const MARKER_TIMEOUT_MS = SHORT_TIMEOUT_MS + 2_500;

let fake: FakeEngine;
let client: EngineClient;
let pipesBefore = 0;
const extraClients: EngineClient[] = [];

/** A client on the fake with a short timeout of its own, closed after the test. */
function shortClient(): EngineClient {
  const c = new EngineClient({ socketPath: fake.socketPath, timeoutMs: SHORT_TIMEOUT_MS });
  extraClients.push(c);
  return c;
}

function pipeCount(): number {
  return process.getActiveResourcesInfo().filter((r) => r === "PipeWrap" || r === "PipeConnectWrap").length;
}

beforeEach(async () => {
  pipesBefore = pipeCount();
  fake = await FakeEngine.start();
  client = new EngineClient({ socketPath: fake.socketPath, timeoutMs: CLIENT_TIMEOUT_MS });
});

afterEach(async () => {
  await client.close();
  for (const c of extraClients.splice(0)) await c.close();
  await fake.close();
  // Sockets close asynchronously after destroy(); give them time, then insist.
  await until(() => pipeCount() <= pipesBefore).catch(() => undefined);
  expect(pipeCount(), "leaked Unix socket handles").toBe(pipesBefore);
});

/** Polls `cond`; HANG_MS only catches a hang. */
async function until(cond: () => boolean, what = "condition"): Promise<void> {
  const deadline = Date.now() + HANG_MS;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`${what}: not met after ${HANG_MS} ms`);
    await sleep(10);
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

function expectTransport(r: EngineResult<unknown> | StreamEnd, codes: string[]): void {
  expect(r.kind, describeResult(r)).toBe("transport");
  if (r.kind === "transport") expect(codes).toContain(r.code);
}

/**
 * The fake did cut a connection. With the client's timeout far away, a transport
 * error code of a closed socket (checked by the caller) can only come from that cut:
 * a missed cut would end as our timeout instead.
 */
function expectCutObservedPromptly(): void {
  expect(fake.cuts.length, "the fake cut a connection").toBeGreaterThan(0);
}

async function within<T>(ms: number, p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`not settled within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([p, limit]);
  } finally {
    clearTimeout(timer);
  }
}

describe("DOCKER_HOST", () => {
  it("defaults to /var/run/docker.sock and accepts unix:// paths", () => {
    expect(socketPathFromDockerHost(undefined)).toBe("/var/run/docker.sock");
    expect(socketPathFromDockerHost("")).toBe("/var/run/docker.sock");
    expect(socketPathFromDockerHost("unix:///tmp/x/docker.sock")).toBe("/tmp/x/docker.sock");
  });

  it("rejects what it cannot serve", () => {
    expect(() => socketPathFromDockerHost("tcp://127.0.0.1:2375")).toThrow(/only unix/);
    expect(() => socketPathFromDockerHost("unix://relative.sock")).toThrow(/absolute/);
  });

  it("fromEnv uses it", async () => {
    const c = EngineClient.fromEnv({ DOCKER_HOST: `unix://${fake.socketPath}` });
    try {
      expect(c.socketPath).toBe(fake.socketPath);
      expect((await c.ping()).kind).toBe("ok");
    } finally {
      await c.close();
    }
    const d = EngineClient.fromEnv({});
    expect(d.socketPath).toBe("/var/run/docker.sock");
    await d.close();
  });
});

describe("API version negotiation", () => {
  it.each([
    ["1.40", "1.40"],
    ["1.41", "1.41"],
    ["1.45", "1.41"],
    ["2.0", "1.41"],
    [undefined, "1.24"],
  ])("server %s → prefix /v%s", async (server, expected) => {
    fake.apiVersion = server;
    fake.on("GET", "/info", reply.json(200, { ok: true }));
    const r = await client.request("GET", "/info");
    expect(r).toEqual({ kind: "ok", status: 200, body: { ok: true } });
    expect(client.apiVersion).toBe(expected);
    expect(fake.requestsTo("/info")[0]?.version).toBe(expected);
    expect(fake.requestsTo("/_ping")[0]?.version).toBeUndefined();
  });

  it("negotiates once for concurrent first calls, and ping renegotiates", async () => {
    fake.on("GET", "/info", reply.json(200, {}));
    await Promise.all([client.request("GET", "/info"), client.request("GET", "/info"), client.request("GET", "/info")]);
    expect(fake.requestsTo("/_ping")).toHaveLength(1);
    fake.apiVersion = "1.39";
    const p = await client.ping();
    expect(p).toEqual({ kind: "ok", status: 200, body: { apiVersion: "1.39", serverApiVersion: "1.39" } });
    await client.request("GET", "/info");
    expect(fake.requestsTo("/info").at(-1)?.version).toBe("1.39");
  });

  it("a failed negotiation is the call's result, and a later call retries it", async () => {
    fake.on("GET", "/_ping", reply.error(500, "daemon not ready"));
    fake.on("GET", "/info", reply.json(200, {}));
    expect(await client.request("GET", "/info")).toEqual({ kind: "docker", status: 500, message: "daemon not ready" });
    expect(fake.requestsTo("/info")).toHaveLength(0);
    fake.on("GET", "/_ping", reply.text(200, "OK"));
    expect((await client.request("GET", "/info")).kind).toBe("ok");
  });
});

describe("request (short calls)", () => {
  it("sends JSON bodies and encodes the query; parses JSON; empty → undefined", async () => {
    fake.on("POST", "/containers/create", reply.json(201, { Id: "c1", Warnings: [] }));
    const created = await client.createContainer("sg-1", { Image: "img:1", Labels: { a: "b" } });
    expect(created).toEqual({ kind: "ok", status: 201, body: { Id: "c1", Warnings: [] } });
    const req = fake.requestsTo("/containers/create")[0]!;
    expect(req.query.get("name")).toBe("sg-1");
    expect(req.headers["content-type"]).toBe("application/json");
    expect(JSON.parse(req.body.toString())).toEqual({ Image: "img:1", Labels: { a: "b" } });

    fake.on("POST", "/containers/c1/start", reply.empty(204));
    expect(await client.startContainer("c1")).toEqual({ kind: "ok", status: 204, body: undefined });
    fake.on("POST", "/containers/c2/start", reply.empty(304));
    expect(await client.startContainer("c2")).toEqual({ kind: "ok", status: 304, body: undefined });
  });

  it("wrappers hit the documented method, path and query", async () => {
    fake.on("GET", /.*/, reply.json(200, []));
    fake.on("POST", /.*/, reply.empty(204));
    fake.on("DELETE", /.*/, reply.empty(204));
    await client.listContainers({ all: true, filters: { label: ["sandgate=1"], status: ["running", "exited"] } });
    await client.removeContainer("c/1", { force: true, volumes: false });
    await client.stopContainer("c1", 7);
    await client.killContainer("c1", "SIGTERM");
    await client.killContainer("c1");
    await client.listNetworks({ filters: { name: ["sg-net"] } });
    await client.listVolumes({});
    await client.removeVolume("v1", true);
    await client.inspectImage("local/sandgate-supervisor:1");
    await client.removeImage("img:1", { force: true });
    await client.execResize("e1", 40, 120);
    const seen = fake.requests.filter((r) => r.path !== "/_ping").map((r) => `${r.method} ${r.path}?${r.query.toString()}`);
    expect(seen).toEqual([
      `GET /containers/json?all=true&filters=${encodeURIComponent(JSON.stringify({ label: ["sandgate=1"], status: ["running", "exited"] }))}`,
      "DELETE /containers/c/1?force=true&v=false", // %2F decoded by the fake's URL parser
      "POST /containers/c1/stop?t=7",
      "POST /containers/c1/kill?signal=SIGTERM",
      "POST /containers/c1/kill?",
      `GET /networks?filters=${encodeURIComponent(JSON.stringify({ name: ["sg-net"] }))}`,
      "GET /volumes?",
      "DELETE /volumes/v1?force=true",
      "GET /images/local/sandgate-supervisor:1/json?",
      "DELETE /images/img:1?force=true",
      "POST /exec/e1/resize?h=40&w=120",
    ]);
  });

  it("encodeQuery leaves out undefined and repeats arrays", () => {
    expect(encodeQuery({ a: 1, b: undefined, c: false, d: ["x", "y z"] })).toBe("a=1&c=false&d=x&d=y+z");
  });

  it.each([404, 409, 500])("HTTP %i with Docker's {message} → DockerError", async (status) => {
    fake.on("GET", "/containers/x/json", reply.error(status, `boom ${status}`));
    const r = await client.inspectContainer("x");
    expect(r).toEqual({ kind: "docker", status, message: `boom ${status}` });
    expect(describeResult(r)).toBe(`docker error HTTP ${status}: boom ${status}`);
  });

  it("an error status with a plain-text body keeps the text", async () => {
    fake.on("GET", "/containers/x/json", reply.text(500, "internal\nerror"));
    expect(await client.inspectContainer("x")).toEqual({ kind: "docker", status: 500, message: "internal\nerror" });
  });

  it("a 200 that is not JSON → BAD_BODY", async () => {
    fake.on("GET", "/containers/x/json", reply.text(200, "hello"));
    expectTransport(await client.inspectContainer("x"), [TransportCode.BAD_BODY]);
  });

  it("partial JSON with a clean end → BAD_BODY", async () => {
    fake.on("GET", "/containers/x/json", reply.chunkedThenEnd('{"Id":"ab'));
    expectTransport(await client.inspectContainer("x"), [TransportCode.BAD_BODY]);
  });

  it("headers then a cut socket → UND_ERR_SOCKET, within 1 s", async () => {
    fake.on("GET", "/containers/x/json", reply.headersThenDestroy());
    expectTransport(await client.inspectContainer("x"), ["UND_ERR_SOCKET"]);
    expectCutObservedPromptly();
  });

  it("partial JSON then a cut socket → UND_ERR_SOCKET, within 1 s", async () => {
    fake.on("GET", "/containers/x/json", reply.partialThenDestroy('{"Id":"ab'));
    expectTransport(await client.inspectContainer("x"), ["UND_ERR_SOCKET"]);
    expectCutObservedPromptly();
  });

  it("a cut before any header → UND_ERR_SOCKET, within 1 s", async () => {
    fake.on("GET", "/containers/x/json", (_res, ctx) => ctx.cut());
    expectTransport(await client.inspectContainer("x"), ["UND_ERR_SOCKET"]);
    expectCutObservedPromptly();
  });

  it("a daemon that accepts and never answers → our timeout", async () => {
    fake.on("GET", "/containers/x/json", reply.stall());
    fake.on("GET", "/containers/y/json", reply.stall());
    // The call's own timeout decides: one asked for later but with a shorter timeout ends first.
    const order: string[] = [];
    const longer = client.inspectContainer("y", { timeoutMs: 2000 }).then((r) => (order.push("2000 ms"), r));
    const shorter = client.inspectContainer("x", { timeoutMs: 250 }).then((r) => (order.push("250 ms"), r));
    expectTransport(await within(HANG_MS, shorter), [TransportCode.TIMEOUT, "UND_ERR_HEADERS_TIMEOUT"]);
    expectTransport(await within(HANG_MS, longer), [TransportCode.TIMEOUT, "UND_ERR_HEADERS_TIMEOUT"]);
    expect(order).toEqual(["250 ms", "2000 ms"]);
  });

  it("a body that stalls halfway → our timeout", async () => {
    fake.on("GET", "/containers/x/json", reply.chunks(['{"Id":'], "stall"));
    const r = await within(HANG_MS, client.inspectContainer("x", { timeoutMs: 250 }));
    expectTransport(r, [TransportCode.TIMEOUT, "UND_ERR_BODY_TIMEOUT"]);
  });

  it("the caller's signal → ABORTED, promptly", async () => {
    fake.on("GET", "/containers/x/json", reply.stall());
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 50);
    // ABORTED, not our timeout: the signal ended it.
    const r = await within(HANG_MS, client.inspectContainer("x", { signal: ac.signal, timeoutMs: CLIENT_TIMEOUT_MS }));
    expectTransport(r, [TransportCode.ABORTED]);
    // An already-aborted signal is reported without sending anything.
    expectTransport(await client.inspectContainer("y", { signal: AbortSignal.abort() }), [TransportCode.ABORTED]);
    expect(fake.requestsTo("/containers/y/json")).toHaveLength(0);
  });
});

describe("connection failures", () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "engine-conn-"));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("no socket file → ENOENT", async () => {
    const c = new EngineClient({ socketPath: join(dir, "missing.sock"), timeoutMs: 400 });
    try {
      // The connect error itself, not a timeout after it.
      expectTransport(await c.ping(), ["ENOENT"]);
      expectTransport(await c.inspectContainer("x"), ["ENOENT"]);
      expect(await c.events({}, () => undefined)).toMatchObject({ kind: "transport", code: "ENOENT" });
    } finally {
      await c.close();
    }
  });

  it("a stale socket file (dead daemon) → ECONNREFUSED", async () => {
    const c = new EngineClient({ socketPath: await staleSocket(dir), timeoutMs: 400 });
    try {
      expectTransport(await c.ping(), ["ECONNREFUSED"]);
      expect(await c.events({}, () => undefined)).toMatchObject({ kind: "transport", code: "ECONNREFUSED" });
    } finally {
      await c.close();
    }
  });

  it("close() destroys idle keep-alive connections", async () => {
    fake.on("GET", "/info", reply.json(200, {}));
    await client.request("GET", "/info");
    expect(fake.openConnections).toBeGreaterThan(0);
    await client.close();
    await until(() => fake.openConnections === 0, "connections closed");
    expect(fake.openConnections).toBe(0);
    expectTransport(await client.request("GET", "/info"), ["UND_ERR_DESTROYED"]);
  });

  it("close() ends an in-flight stream as a transport failure", async () => {
    fake.on("GET", "/events", reply.stallAfterHeaders());
    const p = client.events({}, () => undefined);
    await until(() => fake.requestsTo("/events").length === 1, "the stream in flight");
    await client.close();
    const r = await within(HANG_MS, p);
    expect(r.kind).toBe("transport");
  });
});

describe("events (stream)", () => {
  const ev = (i: number, extra = ""): DockerEvent => ({
    Type: "container",
    Action: "start",
    Actor: { ID: `c${i}`, Attributes: { name: `n${i}${extra}` } },
    scope: "local",
    time: 1700000000 + i,
    timeNano: (1700000000 + i) * 1e9,
  });
  /** Three events as NDJSON, cut into pieces mid-line and inside a multi-byte character. */
  function splitStream(): { parts: Buffer[]; events: DockerEvent[] } {
    const events = [ev(1), ev(2, "é✓"), ev(3)];
    const all = Buffer.from(events.map((e) => JSON.stringify(e) + "\n").join(""));
    const multibyte = all.indexOf(Buffer.from("✓")) + 1; // inside the 3-byte character
    const cuts = [5, multibyte, multibyte + 1, all.indexOf("\n") + 1, all.length - 3];
    const sorted = [...new Set(cuts)].sort((a, b) => a - b);
    const parts: Buffer[] = [];
    let prev = 0;
    for (const c of sorted) {
      parts.push(all.subarray(prev, c));
      prev = c;
    }
    parts.push(all.subarray(prev));
    return { parts, events };
  }

  it("an onOpen that throws ends either stream as HANDLER_ERROR; neither rejects, nothing is delivered", async () => {
    const { parts } = splitStream();
    fake.on("GET", "/events", reply.chunks(parts, "end"));
    fake.on("GET", "/containers/c1/logs", reply.chunks(parts, "end"));
    const boom = (): void => {
      throw new Error("boom");
    };
    const got: unknown[] = [];
    const events = await client.events({ onOpen: boom }, (e) => got.push(e));
    const logs = await client.containerLogStream("c1", { follow: true, onOpen: boom }, (c) => void got.push(c));
    for (const end of [events, logs]) expect(end).toMatchObject({ kind: "transport", code: TransportCode.HANDLER_ERROR, message: "onOpen threw: boom" });
    expect(got).toEqual([]);
  });

  it("events split across chunks, then a clean end → all delivered, eof", async () => {
    const { parts, events } = splitStream();
    fake.on("GET", "/events", reply.chunks(parts, "end"));
    const got: DockerEvent[] = [];
    let opened = 0;
    const end = await client.events(
      { filters: { type: ["container"], label: ["sandgate=1"] }, since: "1700000000", onOpen: () => opened++ },
      (e) => got.push(e),
    );
    expect(end).toEqual({ kind: "eof" });
    expect(got).toEqual(events);
    expect(opened).toBe(1);
    const req = fake.requestsTo("/events")[0]!;
    expect(JSON.parse(req.query.get("filters")!)).toEqual({ type: ["container"], label: ["sandgate=1"] });
    expect(req.query.get("since")).toBe("1700000000");
  });

  it("events then a cut → transport, within 1 s, events before it delivered", async () => {
    const { parts, events } = splitStream();
    fake.on("GET", "/events", reply.chunks(parts, "destroy"));
    const got: DockerEvent[] = [];
    const end = await client.events({}, (e) => got.push(e));
    expectTransport(end, ["UND_ERR_SOCKET"]);
    expectCutObservedPromptly();
    expect(got).toEqual(events);
  });

  it("headers, then a partial line and a cut → transport, the partial event not delivered", async () => {
    fake.on("GET", "/events", reply.partialThenDestroy('{"Type":"container","Act'));
    const got: DockerEvent[] = [];
    expectTransport(await within(HANG_MS, client.events({}, (e) => got.push(e))), ["UND_ERR_SOCKET"]);
    expectCutObservedPromptly();
    expect(got).toEqual([]);
  });

  it("a daemon that never sends the headers → headers timeout (hung daemon)", async () => {
    fake.on("GET", "/events", reply.stall());
    expect(await within(HANG_MS, shortClient().events({}, () => undefined))).toMatchObject({ kind: "transport", code: "UND_ERR_HEADERS_TIMEOUT" });
  });

  it("a non-JSON line → BAD_BODY, after the good ones", async () => {
    fake.on("GET", "/events", reply.chunks([JSON.stringify(ev(1)) + "\n", "<html>oops</html>\n", JSON.stringify(ev(2)) + "\n"], "stall"));
    const got: DockerEvent[] = [];
    const end = await within(HANG_MS, client.events({}, (e) => got.push(e)));
    expectTransport(end, [TransportCode.BAD_BODY]);
    expect(got).toEqual([ev(1)]);
  });

  it("a truncated last line at a clean end → BAD_BODY", async () => {
    fake.on("GET", "/events", reply.chunks([JSON.stringify(ev(1)) + "\n", '{"Type":"cont'], "end"));
    expectTransport(await client.events({}, () => undefined), [TransportCode.BAD_BODY]);
  });

  it("stays open while idle (no body timeout), and the caller's abort → aborted", async () => {
    // As for wait: a marker call started after the stream opened, with a much longer
    // timeout than the client's, times out while the stream is still open.
    const short = shortClient();
    fake.on("GET", "/events", reply.stallAfterHeaders());
    fake.on("GET", "/containers/m/json", reply.chunks(['{"Id":'], "stall"));
    const ac = new AbortController();
    let opened!: () => void;
    const open = new Promise<void>((r) => (opened = r));
    let settled = false;
    const p = short.events({ signal: ac.signal, onOpen: () => opened() }, () => undefined).finally(() => {
      settled = true;
    });
    await within(HANG_MS, open);
    const marker = await within(HANG_MS, short.inspectContainer("m", { timeoutMs: MARKER_TIMEOUT_MS }));
    expectTransport(marker, [TransportCode.TIMEOUT, "UND_ERR_BODY_TIMEOUT"]);
    expect(settled).toBe(false);
    ac.abort();
    expect(await within(HANG_MS, p)).toEqual({ kind: "aborted" });
  });

  it("a throwing onEvent ends the stream as HANDLER_ERROR (no rejection)", async () => {
    fake.on("GET", "/events", reply.chunks([JSON.stringify(ev(1)) + "\n"], "stall"));
    const end = await within(HANG_MS, client.events({}, () => {
      throw new Error("bug");
    }));
    expect(end).toMatchObject({ kind: "transport", code: TransportCode.HANDLER_ERROR });
  });

  it("400 (bad filters) → DockerError", async () => {
    fake.on("GET", "/events", reply.error(400, "invalid filter 'bogus'"));
    expect(await client.events({ filters: { bogus: ["1"] } }, () => undefined)).toEqual({
      kind: "docker",
      status: 400,
      message: "invalid filter 'bogus'",
    });
  });
});

describe("JSON line splitter", () => {
  it("yields the same values for any split of the bytes (property)", () => {
    fc.assert(
      fc.property(
        fc.array(fc.dictionary(fc.string({ unit: "grapheme" }), fc.oneof(fc.string({ unit: "grapheme" }), fc.integer())), { maxLength: 6 }),
        fc.array(fc.nat(), { maxLength: 8 }),
        (values, rawCuts) => {
          const bytes = Buffer.from(values.map((v) => JSON.stringify(v) + "\r\n").join(""));
          const cuts = [...new Set(rawCuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
          const s = createJsonLineSplitter();
          const out: unknown[] = [];
          let prev = 0;
          for (const c of [...cuts, bytes.length]) {
            for (const l of s.push(bytes.subarray(prev, c))) out.push(l.ok ? l.value : l);
            prev = c;
          }
          for (const l of s.end()) out.push(l.ok ? l.value : l);
          expect(out).toEqual(values);
        },
      ),
    );
  });
});

describe("multiplexed stream demuxer", () => {
  type Frame = { stream: 0 | 1 | 2 | 3; payload: Buffer };
  const frameArb = fc.record({
    stream: fc.constantFrom<0 | 1 | 2 | 3>(0, 1, 2, 3),
    payload: fc.uint8Array({ maxLength: 40 }).map((a) => Buffer.from(a)),
  });

  function run(bytes: Buffer, cuts: number[]): { out: Buffer; err: Buffer; sys: Buffer; order: string; errors: string[] } {
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    const sys: Buffer[] = [];
    const errors: string[] = [];
    let order = "";
    const note = (tag: string, b: Buffer): void => {
      if (b.length > 0 && !order.endsWith(tag)) order += tag;
    };
    const d = createDemuxer(
      (b) => (out.push(Buffer.from(b)), note("o", b)),
      (b) => (err.push(Buffer.from(b)), note("e", b)),
      { onSystem: (b) => (sys.push(Buffer.from(b)), note("s", b)), onError: (m) => errors.push(m) },
    );
    let prev = 0;
    for (const c of [...cuts, bytes.length]) {
      d.push(bytes.subarray(prev, c));
      prev = c;
    }
    d.end();
    return { out: Buffer.concat(out), err: Buffer.concat(err), sys: Buffer.concat(sys), order, errors };
  }

  function expected(frames: Frame[]): { out: Buffer; err: Buffer; sys: Buffer; order: string } {
    const tag = (s: number): string => (s <= 1 ? "o" : s === 2 ? "e" : "s");
    let order = "";
    for (const f of frames) if (f.payload.length > 0 && !order.endsWith(tag(f.stream))) order += tag(f.stream);
    const pick = (t: string): Buffer => Buffer.concat(frames.filter((f) => tag(f.stream) === t).map((f) => f.payload));
    return { out: pick("o"), err: pick("e"), sys: pick("s"), order };
  }

  it("decodes any frames split at any points (property)", () => {
    fc.assert(
      fc.property(fc.array(frameArb, { maxLength: 8 }), fc.array(fc.nat(), { maxLength: 12 }), (frames, rawCuts) => {
        const bytes = Buffer.concat(frames.map((f) => encodeFrame(f.stream, f.payload)));
        const cuts = rawCuts.map((c) => c % (bytes.length + 1)).sort((a, b) => a - b);
        const got = run(bytes, cuts);
        expect(got.errors).toEqual([]);
        expect({ out: got.out, err: got.err, sys: got.sys, order: got.order }).toEqual(expected(frames));
      }),
      { numRuns: 500 },
    );
  });

  it("decodes a fixed stream for every pair of split points (exhaustive)", () => {
    const frames: Frame[] = [
      { stream: 1, payload: Buffer.from("hello") },
      { stream: 2, payload: Buffer.from("") },
      { stream: 2, payload: Buffer.from("oops\n") },
      { stream: 1, payload: Buffer.from("x") },
    ];
    const bytes = Buffer.concat(frames.map((f) => encodeFrame(f.stream, f.payload)));
    const want = expected(frames);
    for (let i = 0; i <= bytes.length; i++) {
      for (let j = i; j <= bytes.length; j++) {
        const got = run(bytes, [i, j]);
        expect(got.errors).toEqual([]);
        expect({ out: got.out.toString(), err: got.err.toString(), order: got.order }).toEqual({
          out: want.out.toString(),
          err: want.err.toString(),
          order: want.order,
        });
      }
    }
  });

  it("reports truncation and unknown stream types", () => {
    const frame = encodeFrame(1, Buffer.from("abcdef"));
    expect(run(frame.subarray(0, 5), []).errors[0]).toMatch(/inside a frame header/);
    expect(run(frame.subarray(0, 10), []).errors[0]).toMatch(/2 of|payload bytes missing/);
    const bad = Buffer.from(frame);
    bad[0] = 9;
    expect(run(bad, []).errors[0]).toMatch(/unknown stream type 9/);
    // Without onSystem, stream 3 goes to stderr.
    const err: string[] = [];
    const d = createDemuxer(() => undefined, (b) => err.push(b.toString()));
    d.push(encodeFrame(3, Buffer.from("sys")));
    expect(err).toEqual(["sys"]);
  });
});

describe("exec", () => {

  it("execCreate / execInspect are plain calls", async () => {
    fake.on("POST", "/containers/c1/exec", reply.json(201, { Id: "e1" }));
    fake.on("GET", "/exec/e1/json", reply.json(200, { ID: "e1", ContainerID: "c1", Running: false, ExitCode: 3, Pid: 0 }));
    const cfg = { Cmd: ["sh", "-c", "cat"], Tty: false, AttachStdin: true, AttachStdout: true, AttachStderr: true };
    expect(await client.execCreate("c1", cfg)).toEqual({ kind: "ok", status: 201, body: { Id: "e1" } });
    expect(JSON.parse(fake.requestsTo("/containers/c1/exec")[0]!.body.toString())).toEqual(cfg);
    const i = await client.execInspect("e1");
    expect(i.kind === "ok" && i.body.ExitCode).toBe(3);
  });

  it("start hijacks the connection: stdin in, half-close, multiplexed stdout/stderr out", async () => {
    fake.onUpgrade("POST", "/exec/e1/start", (socket, ctx) => {
      // The 101 and the first frame in one write: bytes after the headers must not be lost.
      socket.write(Buffer.concat([Buffer.from(UPGRADED), encodeFrame(1, Buffer.from("ready\n"))]));
      const echo = (c: Buffer): void => {
        const f = encodeFrame(1, c);
        socket.write(f.subarray(0, 3)); // split a header across writes
        socket.write(f.subarray(3));
      };
      if (ctx.extra.length > 0) echo(ctx.extra);
      socket.on("data", echo);
      socket.on("end", () => {
        socket.write(encodeFrame(2, Buffer.from("err\n")));
        socket.end();
      });
    });
    const r = await client.execStart("e1", { tty: false });
    expect(r.kind, describeResult(r)).toBe("ok");
    if (r.kind !== "ok") return;
    expect(r.status).toBe(101);
    const sock = r.body;
    const done = collectDemuxed(sock);
    sock.write("hello ");
    sock.write("world");
    sock.end();
    expect(await within(HANG_MS, done)).toEqual({ out: "ready\nhello world", err: "err\n" });
    sock.destroy();
    const req = fake.requestsTo("/exec/e1/start")[0]!;
    expect(req.version).toBe("1.41");
    expect(req.headers.connection?.toLowerCase()).toBe("upgrade");
    expect(req.headers.upgrade).toBe("tcp");
    expect(req.headers["content-type"]).toBe("application/json");
    expect(JSON.parse(req.body.toString())).toEqual({ Detach: false, Tty: false });
  });

  it("a non-101 answer keeps Docker's message", async () => {
    const body = JSON.stringify({ message: "Container c1 is not running" });
    fake.onUpgrade("POST", "/exec/e2/start", (socket) => {
      socket.end(`HTTP/1.1 409 Conflict\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
    });
    expect(await client.execStart("e2", { tty: true })).toEqual({ kind: "docker", status: 409, message: "Container c1 is not running" });
  });

  it("a cut before the upgrade → transport, within 1 s; a stall → timeout", async () => {
    fake.onUpgrade("POST", "/exec/e3/start", (_socket, ctx) => setTimeout(() => ctx.cut(), 50));
    expectTransport(await client.execStart("e3", { tty: false }), ["UND_ERR_SOCKET"]);
    expectCutObservedPromptly();
    fake.onUpgrade("POST", "/exec/e4/start", () => undefined);
    const r = await within(HANG_MS, client.execStart("e4", { tty: false }, { timeoutMs: 200 }));
    expectTransport(r, [TransportCode.TIMEOUT, "UND_ERR_HEADERS_TIMEOUT"]);
  });
});

describe("importImage", () => {
  const ID = `sha256:${"ab".repeat(32)}`;

  it("streams the tar as the body and takes the ID from the final status line", async () => {
    fake.on(
      "POST",
      "/images/create",
      reply.chunks([`{"status":"Importing","progressDetail":{"current":512},"progress":"[=>  ]"}\r\n{"stat`, `us":"${ID}"}\r\n`], "end"),
    );
    const tar = Readable.from([Buffer.from("tar-part-1;"), Buffer.from("tar-part-2")]);
    const r = await client.importImage(tar, { repo: "sandgate/test", tag: "1", changes: ['CMD ["sh"]', "ENV A=1"] });
    expect(r).toEqual({ kind: "ok", status: 200, body: { imageId: ID } });
    const req = fake.requestsTo("/images/create")[0]!;
    expect(req.body.toString()).toBe("tar-part-1;tar-part-2");
    expect(req.headers["content-type"]).toBe("application/x-tar");
    expect(req.query.get("fromSrc")).toBe("-");
    expect(req.query.get("repo")).toBe("sandgate/test");
    expect(req.query.get("tag")).toBe("1");
    expect(req.query.getAll("changes")).toEqual(['CMD ["sh"]', "ENV A=1"]);
  });

  it("an error line → DockerError 500 with its message", async () => {
    fake.on("POST", "/images/create", reply.chunks(['{"errorDetail":{"message":"archive/tar: invalid tar header"},"error":"archive/tar: invalid tar header"}\n'], "end"));
    expect(await client.importImage(Readable.from([Buffer.from("junk")]), { repo: "x", tag: "1" })).toEqual({
      kind: "docker",
      status: 500,
      message: "archive/tar: invalid tar header",
    });
  });

  it("without an ID in the stream, inspects repo:tag", async () => {
    fake.on("POST", "/images/create", reply.chunks(['{"status":"done"}\n'], "end"));
    fake.on("GET", "/images/x/y:1/json", reply.json(200, { Id: ID, RepoTags: ["x/y:1"] }));
    expect(await client.importImage(Readable.from([Buffer.from("t")]), { repo: "x/y", tag: "1" })).toEqual({
      kind: "ok",
      status: 200,
      body: { imageId: ID },
    });
  });

  it("a cut during the import → transport", async () => {
    fake.on("POST", "/images/create", reply.chunks(['{"status":"Importing"}\n'], "destroy"));
    expectTransport(await client.importImage(Readable.from([Buffer.from("t")]), { repo: "x", tag: "1" }), ["UND_ERR_SOCKET"]);
    expectCutObservedPromptly();
  });
});
