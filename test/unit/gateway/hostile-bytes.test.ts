// Hostile bytes on the gateway's sockets: a malformed WebSocket frame, an abrupt
// close, garbage where HTTP belongs, a watch client that vanishes. None may crash
// the gateway or leave anything behind; each socket handles its own errors.
// Real gateway (HTTP on its Unix socket, real SQLite file) on the in-memory driver.
import { connect, type Socket } from "node:net";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { MemoryDriver } from "../../support/memory-driver.js";
import { eventually, startTestGateway, type TestGateway } from "../../support/gateway-fixture.js";
import { socketOf } from "../../support/api-client.js";

let driver: MemoryDriver;
let t: TestGateway;

beforeEach(async () => {
  driver = new MemoryDriver();
  t = await startTestGateway(driver);
  expect((await t.api("POST", "/v1/sandboxes", { name: "box" })).status).toBe(201);
  await eventually(async () => ((await t.api("GET", "/v1/sandboxes/box")).body.phase === "Ready" ? true : undefined), 10_000, "box Ready");
});
afterEach(async () => {
  await t.close();
});


function raw(): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect({ path: socketOf(t.url) }, () => resolve(s));
    s.on("error", reject);
  });
}

/** Send an exec upgrade by hand; resolves once the 101 arrives, with the socket. */
async function rawExecUpgrade(cmd: string): Promise<Socket> {
  const s = await raw();
  s.write(
    `GET /v1/sandboxes/box/exec?cmd=${cmd}&tty=0 HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${t.token}\r\n` +
      "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
  );
  await new Promise<void>((resolve, reject) => {
    let head = "";
    const onData = (b: Buffer): void => {
      head += b.toString("latin1");
      if (head.includes("\r\n\r\n")) {
        s.off("data", onData);
        if (head.startsWith("HTTP/1.1 101")) resolve();
        else reject(new Error(`no upgrade: ${head.split("\r\n")[0]}`));
      }
    };
    s.on("data", onData);
  });
  return s;
}

/** Resolves when the server has closed the socket (reading, so an end is seen). */
const closed = (s: Socket): Promise<void> =>
  new Promise((resolve) => {
    if (s.destroyed) return resolve();
    s.once("close", () => resolve());
    s.resume();
  });

/** The gateway still serves the API and a fresh exec round trip. */
async function stillServing(): Promise<void> {
  expect((await t.api("GET", "/v1/status")).status).toBe(200);
  const ws = new WebSocket(t.wsUrl(`/v1/sandboxes/box/exec?cmd=echo&cmd=alive&tty=0`), { headers: { authorization: `Bearer ${t.token}` } });
  const out = await new Promise<string>((resolve, reject) => {
    let text = "";
    ws.on("message", (d: Buffer, bin: boolean) => {
      if (bin && d[0] === 1) text += d.subarray(1).toString();
    });
    ws.on("close", () => resolve(text));
    ws.on("error", reject);
  });
  expect(out).toBe("echo alive\n");
}

describe("exec stdin backpressure", () => {
  it("after a large stdin and its EOF, the session still reads frames: a client that goes away closes the exec", async () => {
    // A frame bigger than the process's stdin buffer pauses reading; the EOF right behind it
    // ends stdin, and an ended stream never emits 'drain'. Reading must resume anyway, or the
    // client's close is never seen and the exec outlives its client.
    const ws = new WebSocket(t.wsUrl(`/v1/sandboxes/box/exec?cmd=sink&tty=0`), { headers: { authorization: `Bearer ${t.token}` } });
    await new Promise<void>((resolve, reject) => ws.once("open", () => resolve()).once("error", reject));
    ws.send(Buffer.concat([Buffer.of(0), Buffer.alloc(256 * 1024, 0x78)]));
    ws.send(JSON.stringify({ type: "eof" }));
    await eventually(() => (driver.sinkDrained === 1 ? true : undefined), 10_000, "stdin read to its end");
    ws.close(1000);
    // Without the fix the gateway only notices when ws's own 30 s close timeout fires; the
    // deadline sits below that, far above the milliseconds a close takes.
    await eventually(() => (driver.closedExecs >= 1 ? true : undefined), 20_000, "the exec session closed with its client");
    await stillServing();
  });
});

describe("hostile bytes on the exec WebSocket", () => {
  it("an unmasked client frame (82 01 00) closes that session only; the gateway lives on", async () => {
    const s = await rawExecUpgrade("cat");
    s.on("error", () => undefined);
    s.write(Buffer.from([0x82, 0x01, 0x00]));
    await closed(s);
    await stillServing();
    await eventually(() => (driver.closedExecs >= 1 ? true : undefined), 5_000, "the exec session closed");
  });

  it.each([
    ["a reserved opcode", [0x83, 0x80, 1, 2, 3, 4]],
    ["a fragmented control frame", [0x09, 0x80, 1, 2, 3, 4]],
    ["a length beyond any limit", [0x82, 0xff, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4]],
    ["random noise", Array.from({ length: 64 }, (_, i) => (i * 37 + 11) & 0xff)],
  ])("%s: that session ends, the gateway lives on", async (_name, bytes) => {
    const s = await rawExecUpgrade("cat");
    s.on("error", () => undefined);
    s.write(Buffer.from(bytes));
    await closed(s);
    await stillServing();
  });

  it("a client that vanishes mid-session (socket destroyed): the session is closed, nothing crashes", async () => {
    const s = await rawExecUpgrade("cat");
    s.destroy();
    await eventually(() => (driver.closedExecs >= 1 ? true : undefined), 5_000, "the exec session closed");
    await stillServing();
  });

  it("garbage instead of an HTTP request, and an upgrade cut half-way: the gateway lives on", async () => {
    const g = await raw();
    g.on("error", () => undefined);
    let answer = "";
    g.on("data", (d: Buffer) => (answer += d.toString("latin1")));
    g.write(Buffer.from("\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03garbage\r\n\r\n", "latin1"));
    await closed(g);
    expect(answer).toMatch(/^HTTP\/1.1 400 Bad Request\r\n/);
    expect(JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4))).toMatchObject({ error: { code: "invalid_request" } });
    const h = await raw();
    h.on("error", () => undefined);
    h.write(`GET /v1/sandboxes/box/exec?cmd=cat HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${t.token}\r\nUpgrade: websocket\r\n`);
    h.destroy();
    await stillServing();
  });
});

describe("a watch client that vanishes", () => {
  it("is forgotten: no listener is left, later events reach the live watchers", async () => {
    const s = await raw();
    s.on("error", () => undefined);
    s.write(`GET /v1/watch HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${t.token}\r\n\r\n`);
    await new Promise<void>((resolve) => s.once("data", () => resolve()));
    s.destroy();
    await stillServing();
    expect((await t.api("POST", "/v1/sandboxes/box/stop")).status).toBe(202);
    await eventually(async () => ((await t.api("GET", "/v1/sandboxes/box")).body.phase === "Stopped" ? true : undefined), 10_000, "stopped");
  });
});
