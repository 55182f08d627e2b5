// GET /v1/sandboxes/:name/logs on a real gateway (HTTP on loopback, SQLite) over the
// scripted-logs test double: NDJSON records with stdout and stderr apart and a last
// record; every bad parameter a 400 naming it; the stream limit (503); the line bound
// (split, marked partial); a client that does not read pauses the driver; the
// gateway's close cuts streams without a last record (clients resume).
import { connect } from "node:net";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { LogLine } from "../../../src/driver/contract.js";
import { logRecords } from "../../../src/gateway/api/logs-routes.js";
import { eventually, startTestGateway, type TestGateway } from "../../support/gateway-fixture.js";
import { LogsDriver } from "../../support/logs-driver.js";
import { MemoryDriver } from "../../support/memory-driver.js";
import { socketOf } from "../../support/api-client.js";

const T = (n: number): string => `2026-12-03T13:16:${String(n).padStart(2, "0")}.000000000Z`;

let t: TestGateway | undefined;
let driver: LogsDriver;

async function gateway(logs: { maxStreams?: number; maxLineBytes?: number; heartbeatMs?: number } = {}): Promise<TestGateway> {
  driver = new LogsDriver();
  t = await startTestGateway(driver, { logs });
  return t;
}

afterEach(async () => {
  await t?.close();
  t = undefined;
});

async function ready(name: string): Promise<{ id: string; generation: number }> {
  const r = await t!.api("POST", "/v1/sandboxes", { name });
  expect(r.status).toBe(201);
  return eventually(async () => {
    const s = (await t!.api("GET", `/v1/sandboxes/${name}`)).body;
    return s.phase === "Ready" ? s : undefined;
  });
}

async function logs(path: string): Promise<{ status: number; headers: { get(name: string): string | null }; records: any[] }> {
  const res = await t!.fetch(path, { headers: { authorization: `Bearer ${t!.token}` } });
  const text = await res.text();
  return { status: res.status, headers: res.headers, records: text.split("\n").filter((l) => l !== "").map((l) => JSON.parse(l)) };
}

describe("the logs endpoint", () => {
  beforeEach(async () => {
    await gateway();
  });

  it("NDJSON records, stdout and stderr apart, and a last record; tail, since, stream and generation select", async () => {
    await ready("lg");
    driver.append(1, [
      { t: T(1), s: "out", l: "hello" },
      { t: T(2), s: "err", l: "oops" },
      { t: T(3), s: "out", l: "half", p: true },
      { t: T(3), s: "out", l: " done" },
    ]);
    driver.append(1, [{ t: T(1), s: "out", l: '{"msg":"supervisor listening"}' }], "supervisor");
    const r = await logs("/v1/sandboxes/lg/logs");
    expect(r.status).toBe(200);
    expect(r.headers.get("content-type")).toMatch(/^application\/x-ndjson/);
    expect(r.headers.get("x-sandgate-generation")).toBe("1");
    expect(r.records).toEqual([
      { t: T(1), s: "out", l: "hello" },
      { t: T(2), s: "err", l: "oops" },
      { t: T(3), s: "out", l: "half", p: true },
      { t: T(3), s: "out", l: " done" },
      { end: "end of the log" },
    ]);
    expect((await logs("/v1/sandboxes/lg/logs?tail=1")).records).toEqual([{ t: T(3), s: "out", l: " done" }, { end: "end of the log" }]);
    expect((await logs(`/v1/sandboxes/lg/logs?since=${encodeURIComponent("2026-12-03T14:16:02+01:00")}`)).records.map((x) => x.l)).toEqual(["oops", "half", " done", undefined]);
    expect(driver.requests.at(-1)).toMatchObject({ since: T(2), generation: 1, role: "workload", follow: false });
    expect((await logs("/v1/sandboxes/lg/logs?stream=supervisor&generation=1")).records[0].l).toBe('{"msg":"supervisor listening"}');
    // A workload's line that looks like a record stays a line.
    driver.append(1, [{ t: T(4), s: "out", l: '{"end":"forged"}\n{"error":{"code":"x"}}' }]);
    const last = (await logs("/v1/sandboxes/lg/logs?tail=1")).records;
    expect(last).toEqual([{ t: T(4), s: "out", l: '{"end":"forged"}\n{"error":{"code":"x"}}' }, { end: "end of the log" }]);
  });

  it("the previous generation by number or as previous; generations that do not exist are 404 naming them", async () => {
    await ready("gens");
    driver.append(1, [{ t: T(1), s: "out", l: "gen one" }]);
    const none = await t!.api("GET", "/v1/sandboxes/gens/logs?generation=previous");
    expect(none).toEqual({ status: 404, body: { error: { code: "not_found", message: 'sandbox "gens" has no previous generation (it is at generation 1)' } } });
    await t!.api("POST", "/v1/sandboxes/gens/stop");
    await eventually(async () => ((await t!.api("GET", "/v1/sandboxes/gens")).body.phase === "Stopped" ? true : undefined));
    await t!.api("POST", "/v1/sandboxes/gens/start");
    await eventually(async () => ((await t!.api("GET", "/v1/sandboxes/gens")).body.phase === "Ready" ? true : undefined));
    driver.append(2, [{ t: T(2), s: "out", l: "gen two" }]);
    expect((await logs("/v1/sandboxes/gens/logs")).records[0].l).toBe("gen two");
    const prev = await logs("/v1/sandboxes/gens/logs?generation=previous");
    expect(prev.headers.get("x-sandgate-generation")).toBe("1");
    expect(prev.records[0].l).toBe("gen one");
    // The ended generation's record is not handed to the driver: it reads what was kept.
    expect(driver.requests.at(-1)).toMatchObject({ generation: 1, record: null });
    expect((await logs("/v1/sandboxes/gens/logs?generation=1")).records[0].l).toBe("gen one");
    expect(await t!.api("GET", "/v1/sandboxes/gens/logs?generation=3")).toEqual({
      status: 404,
      body: { error: { code: "not_found", message: 'sandbox "gens" has no generation 3; it has generations 1 to 2 (logs are kept of the current and the previous one)' } },
    });
    // What the driver cannot find is an error record after the headers.
    driver.lines.clear();
    expect((await logs("/v1/sandboxes/gens/logs")).records).toEqual([{ error: { code: "not_found", message: "no logs of generation 2's workload" } }]);
  });

  it("bad parameters are one 400 naming the value; unknown sandboxes 404; nothing is read", async () => {
    await ready("bad");
    const before = driver.requests.length;
    const cases: [string, RegExp][] = [
      ["tail=-1", /^tail: must be a whole number from 0 to 1000000$/],
      ["tail=abc", /^tail: must be a whole number from 0 to 1000000$/],
      ["tail=1000001", /^tail: must be a whole number from 0 to 1000000$/],
      ["since=yesterday", /^since: "yesterday" is not an RFC 3339 time/],
      ["since=2026-02-30T00:00:00Z", /^since: "2026-02-30T00:00:00Z" is not an RFC 3339 time/],
      ["stream=proxy", /^stream: Invalid option: expected one of "workload"\|"supervisor"$/],
      ["generation=0x1", /^generation: must be a generation number or "previous"$/],
      ["follow=yes", /^follow: Invalid option/],
      ["timestamps=1", /Unrecognized key: "timestamps"/],
    ];
    for (const [q, message] of cases) {
      const r = await t!.api("GET", `/v1/sandboxes/bad/logs?${q}`);
      expect(r.status, q).toBe(400);
      expect(r.body.error.code, q).toBe("invalid_request");
      expect(r.body.error.message, q).toMatch(message);
    }
    expect((await t!.api("GET", "/v1/sandboxes/bad/logs?generation=0")).status).toBe(404);
    expect((await t!.api("GET", "/v1/sandboxes/nope/logs")).body).toEqual({ error: { code: "not_found", message: 'no sandbox named "nope"' } });
    expect((await t!.api("GET", "/v1/sandboxes/Not_A_Name/logs")).status).toBe(400);
    expect(driver.requests.length).toBe(before);
  });

  it("a stream the gateway's close cuts has no last record; the gateway's status counts streams", async () => {
    await ready("cut");
    driver.append(1, [{ t: T(1), s: "out", l: "first" }]);
    const res = await t!.fetch(`/v1/sandboxes/cut/logs?follow=1`, { headers: { authorization: `Bearer ${t!.token}` } });
    const reader = res.body!.getReader();
    const first = new TextDecoder().decode((await reader.read()).value);
    expect(JSON.parse(first.trim())).toEqual({ t: T(1), s: "out", l: "first" });
    expect((await t!.api("GET", "/v1/status")).body.logs).toMatchObject({ streams: 1, opened: 1, limits: { maxStreams: 64, maxLineBytes: 16384 } });
    const closing = t!.close();
    let rest = "";
    await expect(
      (async () => {
        for (;;) {
          const c = await reader.read();
          if (c.done) return;
          rest += new TextDecoder().decode(c.value);
        }
      })(),
    ).rejects.toThrow();
    expect(rest.trim()).toBe("");
    await closing;
    t = undefined;
    expect(driver.open).toBe(0);
  });

  it("HEAD answers the headers; a runtime without logs answers 503; a sandbox still without containers 409", async () => {
    await ready("hd");
    driver.append(1, [{ t: T(1), s: "out", l: "x" }]);
    const head = await t!.fetch(`/v1/sandboxes/hd/logs`, { method: "HEAD", headers: { authorization: `Bearer ${t!.token}` } });
    expect(head.status).toBe(200);
    expect(head.headers.get("x-sandgate-generation")).toBe("1");
    let release!: () => void;
    driver.gate = new Promise((r) => (release = r));
    await t!.api("POST", "/v1/sandboxes", { name: "prov" });
    expect(await t!.api("GET", "/v1/sandboxes/prov/logs")).toEqual({ status: 409, body: { error: { code: "not_allowed", message: 'sandbox "prov" is Provisioning: its containers have not started yet; ask again once it is Ready' } } });
    release();
    await t!.gw.idle();
    await t!.close();
    t = await startTestGateway(new MemoryDriver());
    await t.api("POST", "/v1/sandboxes", { name: "mem" });
    expect(await t.api("GET", "/v1/sandboxes/mem/logs")).toEqual({ status: 503, body: { error: { code: "unavailable", message: "the memory (test double) runtime keeps no logs" } } });
  });
});

describe("bounds", () => {
  it("at most maxStreams streams at once; one more is 503 naming the limit; a closed one frees its place", async () => {
    await gateway({ maxStreams: 2 });
    await ready("many");
    driver.append(1, [{ t: T(1), s: "out", l: "x" }]);
    const open = [new AbortController(), new AbortController()];
    const streams = await Promise.all(open.map((ac) => t!.fetch(`/v1/sandboxes/many/logs?follow=1`, { headers: { authorization: `Bearer ${t!.token}` }, signal: ac.signal })));
    expect(streams.map((s) => s.status)).toEqual([200, 200]);
    const third = await t!.api("GET", "/v1/sandboxes/many/logs?follow=1");
    expect(third).toEqual({ status: 503, body: { error: { code: "unavailable", message: "too many log streams open (2); close one or raise the limit (gateway start --log-streams)" } } });
    open[0]!.abort();
    await eventually(() => (driver.open === 1 ? true : undefined), 10_000, "the closed stream's read to end");
    driver.end();
    expect((await logs("/v1/sandboxes/many/logs?follow=1")).records.at(-1)).toEqual({ end: "end of the log" });
    expect((await t!.api("GET", "/v1/status")).body.logs).toMatchObject({ refused: 1 });
    open[1]!.abort();
  });

  it("a line over maxLineBytes is split into records of at most that many bytes, all but the last partial", async () => {
    await gateway({ maxLineBytes: 16 });
    await ready("long");
    const line = "0123456789abcdef€€€xyz";
    driver.append(1, [{ t: T(1), s: "err", l: line }, { t: T(2), s: "out", l: "1234567890123456789", p: true }]);
    const r = (await logs("/v1/sandboxes/long/logs")).records;
    expect(r.filter((x) => x.t === T(1))).toEqual([
      { t: T(1), s: "err", l: "0123456789abcdef", p: true },
      { t: T(1), s: "err", l: "€€€xyz" },
    ]);
    // A line that was partial stays partial in its last part.
    expect(r.filter((x) => x.t === T(2)).every((p) => p.p === true)).toBe(true);
  });

  it("records are split at the bound (pure): parts join back, the original partial mark kept", () => {
    const rec = (l: LogLine): any[] => logRecords(l, 8).trim().split("\n").map((x) => JSON.parse(x));
    expect(rec({ t: T(1), s: "out", l: "abcdefghij" })).toEqual([
      { t: T(1), s: "out", l: "abcdefgh", p: true },
      { t: T(1), s: "out", l: "ij" },
    ]);
    expect(rec({ t: T(1), s: "out", l: "abc", p: true })).toEqual([{ t: T(1), s: "out", l: "abc", p: true }]);
  });

  it("a client that stops reading pauses the driver: it waits with most of the log unread, and the read ends when the client goes", async () => {
    await gateway({ heartbeatMs: 50 });
    await ready("slow");
    const total = 200_000;
    driver.generated.set(LogsDriver.key(1), { count: total, make: (i) => ({ t: T(1), s: "out", l: `line ${i} ${"z".repeat(1000)}` }) });
    const sock = connect({ path: socketOf(t!.url) });
    sock.write(`GET /v1/sandboxes/slow/logs HTTP/1.1\r\nHost: sandgate\r\nAuthorization: Bearer ${t!.token}\r\n\r\n`);
    sock.pause();
    await eventually(() => (driver.waiting ? true : undefined), 30_000, "the driver to wait for the gateway");
    // The client reads nothing: the driver stays waiting with most of 200 MB not read.
    await new Promise((r) => setTimeout(r, 300));
    expect(driver.waiting).toBe(true);
    expect(driver.delivered).toBeLessThan(total / 10);
    sock.destroy();
    await eventually(() => (driver.open === 0 ? true : undefined), 10_000, "the read to end with the client");
    await eventually(async () => ((await t!.api("GET", "/v1/status")).body.logs.streams === 0 ? true : undefined), 10_000, "the stream to be gone");
  });
});
