// The SDK's files and logs against a live gateway: files on the local-exec TEST DOUBLE
// (the gateway's real file programs with busybox, /sandbox a temp dir), logs on the
// scripted-logs TEST DOUBLE. Write/read/list/stat, their bounds and the confinement;
// the log iterator (records in order, tail, follow to the end, a loop that breaks
// closes its stream, a reader that does not read holds the gateway back).
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Sandgate, type LogRecord, type Sandbox } from "../../../src/sdk/index.js";
import { RECORD_MAX_BYTES, readLogs } from "../../../src/sdk/logs.js";
import { Transport } from "../../../src/sdk/transport.js";
import { eventually, startTestGateway, type TestGateway } from "../../support/gateway-fixture.js";
import { LocalExecDriver } from "../../support/local-exec-driver.js";
import { LogsDriver } from "../../support/logs-driver.js";
import { failure } from "../../support/sdk-failure.js";
import { listenOnSocket } from "../../support/api-client.js";

describe("files", () => {
  let dir: string;
  let driver: LocalExecDriver;
  let t: TestGateway;
  let sg: Sandgate;
  let sb: Sandbox;
  const ws = (...p: string[]): string => join(driver.workspace, ...p);

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "sg-sdk-files-"));
    driver = new LocalExecDriver(join(dir, "ws"), dir);
    t = await startTestGateway(driver);
    sg = await Sandgate.connect({ home: t.home.dir, env: {} });
    sb = await sg.sandboxes.create({ name: "files" }, { dispose: "delete" });
  });

  afterAll(async () => {
    await sb[Symbol.asyncDispose]();
    await sg[Symbol.asyncDispose]();
    await t.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("write then read: text, bytes and a stream of a given size; the mode is kept; a relative path is under /sandbox", async () => {
    expect(await sb.files.write("/sandbox/hello.txt", "hello\n")).toMatchObject({ path: "/sandbox/hello.txt", bytes: 6 });
    expect(readFileSync(ws("hello.txt"), "utf8")).toBe("hello\n");
    expect((await sb.files.read("hello.txt")).toString()).toBe("hello\n");

    const bytes = Buffer.from(Array.from({ length: 70_000 }, (_, i) => i % 256));
    await sb.files.write("/sandbox/run.bin", bytes, { mode: 0o755 });
    expect(statSync(ws("run.bin")).mode & 0o777).toBe(0o755);
    expect((await sb.files.read("/sandbox/run.bin")).equals(bytes)).toBe(true);

    const parts = [Buffer.from("a".repeat(100_000)), Buffer.from("b".repeat(50_000))];
    await sb.files.write("/sandbox/streamed", { stream: (async function* () { yield* parts; })(), size: 150_000 });
    const pieces: Buffer[] = [];
    for await (const c of sb.files.readStream("/sandbox/streamed")) pieces.push(c);
    expect(Buffer.concat(pieces).equals(Buffer.concat(parts))).toBe(true);

    // A long upload: every 64 KiB chunk waits out backpressure, and the waits leave no
    // listeners piling up on the request (the setup file fails on a leak warning).
    const chunk = Buffer.alloc(64 * 1024, 7);
    await sb.files.write("/sandbox/long", { stream: (async function* () { for (let i = 0; i < 64; i++) yield chunk; })(), size: 64 * chunk.length });
    expect(statSync(ws("long")).size).toBe(64 * chunk.length);

    // A stream that gives more or less than its size fails the write; the file stays as it was.
    const stream = (n: number) => (async function* () { yield Buffer.alloc(n, 0x7a); })();
    const more = await failure(sb.files.write("/sandbox/hello.txt", { stream: stream(11), size: 10 }));
    expect([more.code, more.message]).toEqual(["invalid_request", "the stream gave more than its size of 10 bytes"]);
    const less = await failure(sb.files.write("/sandbox/hello.txt", { stream: stream(9), size: 10 }));
    expect([less.code, less.message]).toEqual(["invalid_request", "the stream ended after 9 of its size of 10 bytes"]);
    expect(readFileSync(ws("hello.txt"), "utf8")).toBe("hello\n");

    // Replaced only once complete.
    await sb.files.write("/sandbox/hello.txt", "");
    expect((await sb.files.read("/sandbox/hello.txt")).length).toBe(0);
  });

  it("stat and list: what a path is, a directory's entries (or every one below it), nothing for a missing path", async () => {
    mkdirSync(ws("tree", "sub"), { recursive: true });
    writeFileSync(ws("tree", "a.txt"), "aaa");
    writeFileSync(ws("tree", "sub", "deep.txt"), "deep", { mode: 0o600 });
    symlinkSync("a.txt", ws("tree", "link"));
    expect(await sb.files.stat("/sandbox/tree/a.txt")).toMatchObject({ path: "/sandbox/tree/a.txt", type: "file", size: 3 });
    expect(await sb.files.stat("/sandbox/tree")).toMatchObject({ type: "directory" });
    expect(await sb.files.stat("/sandbox/nothing")).toBeNull();

    const byPath = (entries: { path: string }[]): string[] => entries.map((e) => e.path).sort();
    const top = await sb.files.list("/sandbox/tree");
    expect(byPath(top)).toEqual(["a.txt", "link", "sub"]);
    expect(top.find((e) => e.path === "a.txt")).toMatchObject({ type: "file", size: 3 });
    expect(top.find((e) => e.path === "link")).toMatchObject({ type: "symlink", linkname: "a.txt" });
    const all = await sb.files.list("/sandbox/tree", { recursive: true });
    expect(byPath(all)).toEqual(["a.txt", "link", "sub", "sub/deep.txt"]);
    expect(all.find((e) => e.path === "sub/deep.txt")).toMatchObject({ type: "file", size: 4, mode: 0o600 });
  });

  it("bounds: read holds at most maxBytes (too_large, before the data), list at most maxEntries", async () => {
    writeFileSync(ws("big"), Buffer.alloc(2 * 1024 * 1024, 1));
    const big = await failure(sb.files.read("/sandbox/big", { maxBytes: 1024 * 1024 }));
    expect([big.code, big.exitCode, big.message]).toEqual(["too_large", 2, "/sandbox/big is 2097152 bytes; the limit is 1048576 (maxBytes)"]);
    expect((await sb.files.read("/sandbox/big", { maxBytes: 2 * 1024 * 1024 })).length).toBe(2 * 1024 * 1024);
    mkdirSync(ws("many"));
    for (let i = 0; i < 5; i++) writeFileSync(ws("many", `f${i}`), "");
    expect((await sb.files.list("/sandbox/many", { maxEntries: 5 })).length).toBe(5);
    expect((await failure(sb.files.list("/sandbox/many", { maxEntries: 4 }))).message).toBe("/sandbox/many has more than 4 entries (maxEntries)");
  });

  it("mistakes and a hostile path: a directory read, a file listed, a missing file, outside /sandbox, .. and a symlink out", async () => {
    mkdirSync(ws("d"), { recursive: true });
    expect((await failure(sb.files.read("/sandbox/d"))).message).toBe("/sandbox/d is a directory, not a file; use list() for a directory");
    writeFileSync(ws("f"), "x");
    expect((await failure(sb.files.list("/sandbox/f"))).message).toBe("/sandbox/f is a file, not a directory");
    const missing = await failure(sb.files.read("/sandbox/missing"));
    expect([missing.code, missing.exitCode]).toEqual(["not_found", 4]);
    const execs = driver.execs;
    for (const p of ["/etc/passwd", "/sandbox/../etc/passwd", "../etc/passwd"]) {
      const e = await failure(sb.files.read(p));
      expect(e.code, p).toBe("invalid_request");
    }
    expect((await failure(sb.files.write("/etc/cron.d/x", "boom"))).code).toBe("invalid_request");
    expect(driver.execs).toBe(execs);
    // A symlink leading out: the gateway's program refuses to follow it.
    symlinkSync("/etc", ws("evil"));
    const out = await failure(sb.files.read("/sandbox/evil/passwd"));
    expect(out.code).toBe("invalid_request");
    expect(out.message).toMatch(/leads out of \/sandbox|outside \/sandbox/);
    expect((await failure(sb.files.write("/sandbox/evil/x", "boom"))).code).toBe("invalid_request");
    expect((await failure(sb.files.write("/sandbox/f", "x", { mode: 0o4755 }))).code).toBe("invalid_request");
  });
});

describe("logs", () => {
  const T = (n: number): string => `2026-12-03T13:16:${String(n).padStart(2, "0")}.000000000Z`;
  let driver: LogsDriver;
  let t: TestGateway;
  let sg: Sandgate;
  let sb: Sandbox;
  const streams = async (): Promise<number> => (await t.api("GET", "/v1/status")).body.logs.streams as number;

  beforeAll(async () => {
    driver = new LogsDriver();
    t = await startTestGateway(driver, { logs: { heartbeatMs: 50 } });
    sg = await Sandgate.connect({ home: t.home.dir, env: {} });
    sb = await sg.sandboxes.create({ name: "lg" }, { dispose: "delete" });
    driver.append(1, [
      { t: T(1), s: "out", l: "hello" },
      { t: T(2), s: "err", l: "oops" },
      { t: T(3), s: "out", l: "half", p: true },
      { t: T(3), s: "out", l: " done" },
    ]);
  });

  afterAll(async () => {
    await sb[Symbol.asyncDispose]();
    await sg[Symbol.asyncDispose]();
    await t.close();
  });

  const all = async (it: AsyncIterable<LogRecord>): Promise<LogRecord[]> => {
    const out: LogRecord[] = [];
    for await (const r of it) out.push(r);
    return out;
  };

  it("records in order, stdout and stderr apart, partial lines marked; tail and since select", async () => {
    expect(await all(sb.logs())).toEqual([
      { t: T(1), s: "out", l: "hello" },
      { t: T(2), s: "err", l: "oops" },
      { t: T(3), s: "out", l: "half", p: true },
      { t: T(3), s: "out", l: " done" },
    ]);
    expect((await all(sb.logs({ tail: 1 }))).map((r) => r.l)).toEqual([" done"]);
    expect((await all(sb.logs({ since: T(2) }))).map((r) => r.l)).toEqual(["oops", "half", " done"]);
    expect((await failure(all(sb.logs({ since: "yesterday" })))).code).toBe("invalid_request");
    expect((await failure(all(sb.logs({ tail: -1 })))).code).toBe("invalid_request");
    expect((await failure(all(sb.logs({ generation: 7 })))).code).toBe("not_found");
  });

  it("follow gives lines as they are written, until the log ends; a loop that breaks closes its stream", async () => {
    const seen: string[] = [];
    const following = (async () => {
      for await (const r of sb.logs({ follow: true, since: T(4) })) seen.push(r.l);
    })();
    await eventually(async () => ((await streams()) === 1 ? true : undefined), 10_000, "following");
    driver.append(1, [{ t: T(5), s: "out", l: "later" }]);
    await eventually(() => (seen.includes("later") ? true : undefined), 10_000, "the new line");
    driver.end();
    await following;
    expect(seen).toEqual(["later"]);
    driver.ended = false;

    for await (const r of sb.logs({ follow: true })) if (r.l === "oops") break;
    await eventually(async () => ((await streams()) === 0 ? true : undefined), 10_000, "the stream closed");
    expect(sg.openStreams).toBe(0);
  });

  it("a reader that does not read holds the gateway back: the driver waits with most of the log unread", async () => {
    const total = 200_000;
    const name = "lg-slow";
    const slow = await sg.sandboxes.create({ name }, { dispose: "delete" });
    driver.generated.set(LogsDriver.key(1), { count: total, make: (i) => ({ t: T(1), s: "out", l: `line ${i} ${"z".repeat(1000)}` }) });
    const it = slow.logs()[Symbol.asyncIterator]();
    expect((await it.next()).value).toMatchObject({ l: expect.stringMatching(/^line 0 /) });
    await eventually(() => (driver.waiting ? true : undefined), 30_000, "the driver to wait for the gateway");
    expect(driver.delivered).toBeLessThan(total / 10);
    await it.return(undefined);
    await eventually(() => (driver.open === 0 ? true : undefined), 10_000, "the read to end with the reader");
    driver.generated.clear();
    await slow[Symbol.asyncDispose]();
  });
});

describe("a gateway that sends more than a record", () => {
  it("a log line without an end is refused at RECORD_MAX_BYTES (bad_response), not held", async () => {
    const srv = createServer((req, res) => {
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      const chunk = "x".repeat(64 * 1024);
      let sent = 0;
      const pump = (): void => {
        while (sent < 4 * 1024 * 1024) {
          sent += chunk.length;
          if (!res.write(chunk)) return void res.once("drain", pump);
        }
        res.end();
      };
      pump();
    });
    const url = await listenOnSocket(srv);
    try {
      const t = new Transport({ url, token: "t", env: {} });
      const err = await failure(readLogs(() => t, "x").next());
      expect([err.code, err.message]).toEqual(["bad_response", `a log record is over ${RECORD_MAX_BYTES} bytes`]);
    } finally {
      srv.closeAllConnections();
      await new Promise((r) => srv.close(r));
    }
  });
});
