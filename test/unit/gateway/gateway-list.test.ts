// GET /v1/sandboxes in pages: name order, a cursor that survives the deletion of
// the sandbox it names, bounded page sizes, and the lean list view. Real gateway
// (HTTP + SQLite) on the in-memory driver test double.

import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { defaultPolicy } from "../../../src/policy/index.js";
import { MemoryDriver } from "../../support/memory-driver.js";
import { eventually, startTestGateway, type TestGateway } from "../../support/gateway-fixture.js";

let t: TestGateway;
/** Created out of name order, so name order is the list's own doing. */
const NAMES = Array.from({ length: 23 }, (_, i) => `ls-${String((i * 7) % 23).padStart(2, "0")}`);
const SORTED = [...NAMES].sort();

beforeAll(async () => {
  t = await startTestGateway(new MemoryDriver());
  for (const name of NAMES) expect((await t.api("POST", "/v1/sandboxes", { name })).status).toBe(201);
  await t.gw.idle();
});
afterAll(() => t.close());

type Page = { sandboxes: { name: string; phase: string }[]; next: string | null };

async function walk(query: string): Promise<{ pages: Page[]; names: string[] }> {
  const pages: Page[] = [];
  for (let after: string | null = ""; after !== null; ) {
    const r = await t.api("GET", `/v1/sandboxes?${query}${after ? `&after=${after}` : ""}`);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    pages.push(r.body as Page);
    after = (r.body as Page).next;
  }
  return { pages, names: pages.flatMap((p) => p.sandboxes.map((s) => s.name)) };
}

describe("GET /v1/sandboxes in pages", () => {
  it("pages cover every sandbox exactly once, in name order, and the last page says next: null", async () => {
    for (const view of ["lean", "full"]) {
      const { pages, names } = await walk(`view=${view}&limit=5`);
      expect(names).toEqual(SORTED);
      expect(pages.map((p) => p.sandboxes.length)).toEqual([5, 5, 5, 5, 3]);
      expect(pages.map((p) => p.next)).toEqual([SORTED[4], SORTED[9], SORTED[14], SORTED[19], null]);
    }
    // A page that ends exactly at the last sandbox is the last page: no empty page after it.
    const exact = await walk("view=lean&limit=23");
    expect(exact.pages).toHaveLength(1);
    expect(exact.pages[0]!.next).toBeNull();
  });

  it("without parameters: every sandbox (up to 1000) in the full view, as before paging", async () => {
    const r = await t.api("GET", "/v1/sandboxes");
    expect(r.status).toBe(200);
    expect(r.body.next).toBeNull();
    expect(r.body.sandboxes.map((s: { name: string }) => s.name)).toEqual(SORTED);
    expect(r.body.sandboxes[0]).toMatchObject({ spec: { resources: { memoryMb: expect.any(Number) } }, runtime: { workload: { id: expect.any(String) } } });
  });

  it("limit is a whole number from 1 to 1000: anything else is a 400 naming the value and the range, and nothing is listed", async () => {
    for (const [limit, shown] of [["0", '"0"'], ["1001", '"1001"'], ["x", '"x"'], ["1.5", '"1.5"'], ["-1", '"-1"'], ["", '""'], ["1e3", '"1e3"']]) {
      const r = await t.api("GET", `/v1/sandboxes?limit=${encodeURIComponent(limit!)}`);
      expect(r.status, limit).toBe(400);
      expect(r.body.error).toEqual({ code: "invalid_request", message: `limit: must be a whole number from 1 to 1000; got ${shown}` });
    }
    expect((await t.api("GET", "/v1/sandboxes?limit=1")).body.sandboxes).toHaveLength(1);
    expect((await t.api("GET", "/v1/sandboxes?limit=1000&view=lean")).body.sandboxes).toHaveLength(NAMES.length);
  });

  it("a cursor that is not a sandbox name, an unknown phase, view or parameter is a 400 naming it", async () => {
    const bad = async (q: string): Promise<string> => {
      const r = await t.api("GET", `/v1/sandboxes?${q}`);
      expect(r.status, q).toBe(400);
      return r.body.error.message as string;
    };
    expect(await bad("after=Bad_Name")).toMatch(/^after: the cursor is the `next` of a page, a sandbox name: invalid sandbox name "Bad_Name": 1-63 characters/);
    expect(await bad("after=")).toMatch(/^after: .*invalid sandbox name ""/);
    expect(await bad("phase=Running")).toMatch(/^phase: .*"Ready"/);
    expect(await bad("view=tiny")).toMatch(/^view: .*"lean"/);
    expect(await bad("page=2")).toMatch(/page/);
  });

  it("the cursor of a deleted sandbox still works: the next page starts after its name", async () => {
    const first = (await t.api("GET", "/v1/sandboxes?view=lean&limit=4")).body as Page;
    const cursor = first.next!;
    expect(cursor).toBe(SORTED[3]);
    expect((await t.api("DELETE", `/v1/sandboxes/${cursor}`)).status).toBe(202);
    await eventually(async () => ((await t.api("GET", `/v1/sandboxes/${cursor}`)).status === 404 ? true : undefined), 10_000, `${cursor} gone`);
    const second = (await t.api("GET", `/v1/sandboxes?view=lean&limit=4&after=${cursor}`)).body as Page;
    expect(second.sandboxes.map((s) => s.name)).toEqual(SORTED.slice(4, 8));
    // Put it back for the other tests.
    expect((await t.api("POST", "/v1/sandboxes", { name: cursor })).status).toBe(201);
    await t.gw.idle();
  });

  it("phase= lists only that phase, paged the same way", async () => {
    const stopped = [SORTED[1]!, SORTED[7]!, SORTED[20]!];
    for (const name of stopped) expect((await t.api("POST", `/v1/sandboxes/${name}/stop`)).status).toBe(202);
    await t.gw.idle();
    const { names, pages } = await walk("view=lean&limit=2&phase=Stopped");
    expect(names).toEqual(stopped);
    expect(pages.every((p) => p.sandboxes.every((s) => s.phase === "Stopped"))).toBe(true);
    expect((await walk("view=lean&limit=10&phase=Ready")).names).toEqual(SORTED.filter((n) => !stopped.includes(n)));
    for (const name of stopped) await t.api("POST", `/v1/sandboxes/${name}/start`);
    await t.gw.idle();
  });

  it("the lean view: what sandbox list shows, container ids only of the live generation", async () => {
    const name = SORTED[2]!;
    const lean = async () => ((await t.api("GET", `/v1/sandboxes?view=lean&limit=1&after=${SORTED[1]}`)).body as { sandboxes: Record<string, unknown>[] }).sandboxes[0]!;
    const full = (await t.api("GET", `/v1/sandboxes/${name}`)).body;
    const row = await lean();
    expect(Object.keys(row).sort()).toEqual(["createdAt", "generation", "host", "id", "labels", "name", "phase", "reason", "reasonText", "supervisor", "updatedAt", "workload"]);
    expect(row).toEqual({
      id: full.id,
      name,
      phase: "Ready",
      generation: full.generation,
      reason: null,
      reasonText: null,
      host: full.host,
      labels: {},
      workload: full.runtime.workload.id,
      supervisor: full.runtime.supervisor.id,
      createdAt: full.createdAt,
      updatedAt: full.updatedAt,
    });

    // Ended in Error: the runtime record is kept (its teardown owed) but its containers are not live.
    const s = (await t.gw.store.get(name))!;
    await t.gw.store.transition(s.id, { expect: { phase: "Ready", generation: s.generation }, next: { phase: "Error", generation: s.generation, reason: { code: "WorkloadExited", exitCode: 3 } } });
    expect((await t.gw.store.get(name))!.runtime).not.toBeNull();
    expect(await lean()).toMatchObject({ phase: "Error", reason: { code: "WorkloadExited", exitCode: 3 }, reasonText: "WorkloadExited (exit code 3)", workload: null, supervisor: null });
  });
});

describe("without limit, a page is at most 1000", () => {
  it("1001 sandboxes: the first 1000 by name and the cursor of the rest", async () => {
    const g = await startTestGateway(new MemoryDriver());
    try {
      // Straight into the store, in one transaction: 1001 launches would only slow the test.
      const spec = { env: {}, resources: { memoryMb: 256, cpus: 1, pids: 256 } };
      const policy = defaultPolicy();
      // SqliteStore writes at once while no transaction of its own is open: these run inside this one.
      const made: Promise<unknown>[] = [];
      g.gw.sqlite!.db.transaction(() => {
        for (let i = 0; i < 1001; i++) made.push(g.gw.store.createSandbox({ host: "h1", id: `sbx_${randomBytes(8).toString("hex")}`, name: `cap-${String(i).padStart(4, "0")}`, spec, policy }));
      })();
      await Promise.all(made);
      const r = await g.api("GET", "/v1/sandboxes?view=lean");
      expect(r.body.sandboxes).toHaveLength(1000);
      expect(r.body.next).toBe("cap-0999");
      const rest = await g.api("GET", `/v1/sandboxes?view=lean&after=${r.body.next}`);
      expect(rest.body).toMatchObject({ sandboxes: [{ name: "cap-1000" }], next: null });
    } finally {
      await g.close();
    }
  });
});
