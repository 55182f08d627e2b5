// Sandbox labels through the API: given at create, shown in every view, filtered in
// SQL (repeatable, AND, with phase, paged), never handed to the driver; hostile label
// input refused with nothing created. Also the delete precondition `sandbox prune`
// relies on, and a watch that resumes to the end of a deleted sandbox. Real gateway
// (HTTP + SQLite) on the in-memory driver test double.

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LaunchRequest } from "../../../src/driver/contract.js";
import { LABELS_MAX } from "../../../src/lifecycle/labels.js";
import { migrate } from "../../../src/store/migrations.js";
import { Store } from "../../../src/store/store.js";
import { MemoryDriver } from "../../support/memory-driver.js";
import { eventually, startTestGateway, type TestGateway } from "../../support/gateway-fixture.js";

/** The memory driver, keeping every launch request it was given. */
class RecordingDriver extends MemoryDriver {
  readonly launches: LaunchRequest[] = [];
  override async provision(req: LaunchRequest): Promise<void> {
    this.launches.push(structuredClone(req));
    return super.provision(req);
  }
}

let t: TestGateway;
let driver: RecordingDriver;
const counts = () => t.gw.sqlite!.db.prepare("SELECT (SELECT count(*) FROM sandboxes) s, (SELECT count(*) FROM sandbox_labels) l, (SELECT count(*) FROM events) e").get();

beforeAll(async () => {
  driver = new RecordingDriver();
  t = await startTestGateway(driver);
});
afterAll(() => t.close());

async function create(name: string, labels?: unknown): Promise<{ status: number; body: any }> {
  return t.api("POST", "/v1/sandboxes", labels === undefined ? { name } : { name, labels });
}

type Page = { sandboxes: { name: string; phase: string; labels: Record<string, string> }[]; next: string | null };

async function names(query: string, pageSize = 1000): Promise<string[]> {
  const all: string[] = [];
  for (let after: string | null = ""; after !== null; ) {
    const r = await t.api("GET", `/v1/sandboxes?view=lean&limit=${pageSize}&${query}${after ? `&after=${after}` : ""}`);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    all.push(...(r.body as Page).sandboxes.map((s) => s.name));
    after = (r.body as Page).next;
  }
  return all;
}

describe("labels at create and in the views", () => {
  it("are kept and shown in get, the full and lean list, the create answer and watch frames", async () => {
    const labels = { app: "web", "example.com/team": "infra", empty: "" };
    const c = await create("lbl-show", labels);
    expect(c.status, JSON.stringify(c.body)).toBe(201);
    expect(c.body.labels).toEqual(labels);
    await t.gw.idle();
    expect((await t.api("GET", "/v1/sandboxes/lbl-show")).body.labels).toEqual(labels);
    const full = (await t.api("GET", "/v1/sandboxes?limit=1&after=lbl-shov")).body.sandboxes[0];
    expect(full).toMatchObject({ name: "lbl-show", labels });
    const lean = (await t.api("GET", "/v1/sandboxes?view=lean&limit=1&after=lbl-shov")).body.sandboxes[0];
    expect(lean).toMatchObject({ name: "lbl-show", labels });
    // Without labels: an empty object, never null.
    expect((await create("lbl-none")).body.labels).toEqual({});
  });

  it("never reach the driver: the launch request carries no label key or value", async () => {
    const c = await create("lbl-driver", { "spoof-key-zz9": "spoof-value-zz9" });
    expect(c.status).toBe(201);
    await t.gw.idle();
    const launch = driver.launches.find((l) => l.name === "lbl-driver");
    expect(launch).toBeDefined();
    expect(JSON.stringify(launch)).not.toMatch(/spoof-(key|value)-zz9/);
  });

  it("go with the sandbox when it is deleted", async () => {
    const c = await create("lbl-gone", { a: "1", b: "2" });
    expect(t.gw.sqlite!.db.prepare("SELECT count(*) n FROM sandbox_labels WHERE sandbox_id = ?").get(c.body.id)).toEqual({ n: 2 });
    await t.gw.idle();
    expect((await t.api("DELETE", "/v1/sandboxes/lbl-gone")).status).toBe(202);
    await eventually(async () => ((await t.api("GET", "/v1/sandboxes/lbl-gone")).status === 404 ? true : undefined), 10_000, "lbl-gone deleted");
    expect(t.gw.sqlite!.db.prepare("SELECT count(*) n FROM sandbox_labels WHERE sandbox_id = ?").get(c.body.id)).toEqual({ n: 0 });
  });
});

describe("hostile labels are refused and nothing is created", () => {
  const many = Object.fromEntries(Array.from({ length: LABELS_MAX + 1 }, (_, i) => [`k${i}`, "v"]));
  const cases: [what: string, labels: unknown, message: RegExp][] = [
    ["a huge key", { ["k".repeat(100_000)]: "v" }, /^labels: invalid label key "k{40}"… \(100000 characters\)/],
    ["a huge value", { k: "v".repeat(1_000_000) }, /^labels: invalid value "v{40}"… \(1000000 characters\) of label "k"/],
    ["too many labels", many, new RegExp(`^labels: ${LABELS_MAX + 1} labels; a sandbox has at most ${LABELS_MAX}$`)],
    ["the gateway's identity label", { "sandgate.gateway": "someone-else" }, /^labels: label key "sandgate.gateway" is reserved/],
    ["the nonce label in another case", { "SANDGATE.NONCE": "x" }, /^labels: label key "SANDGATE.NONCE" is reserved/],
    ["the image label", { "org.sandgate.image": "workload" }, /is reserved/],
    ["a Docker label", { "com.docker.compose.project": "x" }, /is reserved/],
    ["a newline in a value", { k: "a\nsandgate.gateway=x" }, /^labels: invalid value "a\\nsandgate.gateway=x" of label "k"/],
    ["an escape sequence", { k: "\u001b[2J" }, /^labels: invalid value "\\u001b\[2J"/],
    ["a direction override", { k: "\u202egnp.exe" }, /^labels: invalid value/],
    ["a control character in a key", { "a\u0000b": "v" }, /^labels: invalid label key "a\\u0000b"/],
    // Fastify's JSON parser refuses prototype poisoning first; the labels check would refuse the key too (labels.test.ts).
    ["a __proto__ key", JSON.parse('{"__proto__": "x"}'), /^Body is not valid JSON/],
    ["a number value", { k: 1 }, /^labels: the value of label "k" must be a string$/],
    ["an array", ["a=b"], /^labels: must be an object of KEY: VALUE strings$/],
    ["a string", "a=b", /^labels: must be an object of KEY: VALUE strings$/],
    ["null", null, /^labels: must be an object of KEY: VALUE strings$/],
  ];
  for (const [what, labels, message] of cases) {
    it(what, async () => {
      const before = counts();
      const r = await create("lbl-hostile", labels);
      expect(r.status, JSON.stringify(r.body).slice(0, 300)).toBe(400);
      expect(r.body.error.code).toBe("invalid_request");
      expect(r.body.error.message).toMatch(message);
      // One line, and bounded however large the input.
      expect(r.body.error.message).not.toContain("\n");
      expect(r.body.error.message.length).toBeLessThan(400);
      expect((await t.api("GET", "/v1/sandboxes/lbl-hostile")).status).toBe(404);
      expect(counts()).toEqual(before);
    });
  }
});

describe("GET /v1/sandboxes?label=", () => {
  const NAMES = Array.from({ length: 12 }, (_, i) => `sel-${String(i).padStart(2, "0")}`);
  beforeAll(async () => {
    for (const [i, name] of NAMES.entries()) {
      const labels: Record<string, string> = { tier: i % 3 === 0 ? "db" : "web", idx: String(i) };
      if (i % 2 === 0) labels.even = "yes";
      if (i === 5) labels.q = "a=b";
      expect((await create(name, labels)).status).toBe(201);
    }
    await t.gw.idle();
  });

  it("one label selects the sandboxes carrying it; repeated, every one must match (AND)", async () => {
    expect(await names("label=tier=db")).toEqual(["sel-00", "sel-03", "sel-06", "sel-09"]);
    expect(await names("label=tier=db&label=even=yes")).toEqual(["sel-00", "sel-06"]);
    expect(await names("label=tier=db&label=tier=web")).toEqual([]);
    expect(await names("label=idx=7")).toEqual(["sel-07"]);
    // The value is what follows the first '='.
    expect(await names(`label=${encodeURIComponent("q=a=b")}`)).toEqual(["sel-05"]);
    expect(await names("label=even=")).toEqual([]);
    expect(await names("label=nothere=x")).toEqual([]);
  });

  it("is applied in SQL before the page is cut: full pages of matches, and a cursor that continues them", async () => {
    const first = await t.api("GET", "/v1/sandboxes?view=lean&limit=2&label=tier=web");
    expect(first.body.sandboxes.map((s: { name: string }) => s.name)).toEqual(["sel-01", "sel-02"]);
    expect(first.body.next).toBe("sel-02");
    expect(await names("label=tier=web", 3)).toEqual(["sel-01", "sel-02", "sel-04", "sel-05", "sel-07", "sel-08", "sel-10", "sel-11"]);
    // The full view filters the same way.
    const full = await t.api("GET", "/v1/sandboxes?limit=1000&label=tier=db&label=even=yes");
    expect(full.body.sandboxes.map((s: { name: string }) => s.name)).toEqual(["sel-00", "sel-06"]);
  });

  it("combines with phase", async () => {
    expect((await t.api("POST", "/v1/sandboxes/sel-03/stop")).status).toBe(202);
    await t.gw.idle();
    expect(await names("phase=Stopped&label=tier=db")).toEqual(["sel-03"]);
    expect(await names("phase=Ready&label=tier=db")).toEqual(["sel-00", "sel-06", "sel-09"]);
  });

  it("a malformed selector is a 400 naming it, whatever else the query says", async () => {
    const bad = async (q: string): Promise<string> => {
      const r = await t.api("GET", `/v1/sandboxes?${q}`);
      expect(r.status, q).toBe(400);
      expect(r.body.error.code).toBe("invalid_request");
      return r.body.error.message as string;
    };
    expect(await bad("label=tier")).toBe('label: expected KEY=VALUE, got "tier" (a selector is label=KEY=VALUE)');
    expect(await bad("label==web")).toMatch(/^label: invalid label key ""/);
    expect(await bad("label=tier=db&label=bad key=x")).toMatch(/^label: invalid label key "bad key"/);
    expect(await bad(`label=${encodeURIComponent("k=\u001b[2J")}`)).toMatch(/^label: invalid value "\\u001b\[2J"/);
    expect(await bad(`label=${encodeURIComponent("k".repeat(5000))}=v`)).toMatch(/^label: invalid label key "k{40}"… \(5000 characters\)/);
    expect(await bad(Array.from({ length: LABELS_MAX + 1 }, (_, i) => `label=k${i}=v`).join("&"))).toBe(`label: ${LABELS_MAX + 1} label selectors; at most ${LABELS_MAX}`);
    // Injection through the value stays a value (bound, never SQL).
    expect(await names(`label=${encodeURIComponent("tier=db' OR '1'='1")}`)).toEqual([]);
  });
});

describe("DELETE ?generation= (the precondition sandbox prune sends)", () => {
  it("deletes only at that generation; otherwise 409 and nothing changes", async () => {
    const c = await create("pre-del");
    await t.gw.idle();
    expect((await t.api("POST", "/v1/sandboxes/pre-del/stop")).status).toBe(202);
    await t.gw.idle();
    expect((await t.api("POST", "/v1/sandboxes/pre-del/start")).status).toBe(202);
    await t.gw.idle();
    const before = (await t.api("GET", "/v1/sandboxes/pre-del")).body;
    expect(before.generation).toBe(2);
    const stale = await t.api("DELETE", `/v1/sandboxes/${c.body.id}?generation=1`);
    expect(stale.status).toBe(409);
    expect(stale.body.error).toEqual({ code: "stale_generation", message: 'sandbox "pre-del" is at generation 2, not 1 as the request expects; nothing was done' });
    expect((await t.api("GET", "/v1/sandboxes/pre-del")).body).toMatchObject({ phase: before.phase, generation: 2, updatedAt: before.updatedAt });
    for (const bad of ["0", "x", "-1", "1.5"]) {
      const r = await t.api("DELETE", `/v1/sandboxes/pre-del?generation=${bad}`);
      expect(r.status, bad).toBe(400);
      expect(r.body.error.message).toMatch(/^generation: must be a whole number from 1 to/);
    }
    expect((await t.api("DELETE", "/v1/sandboxes/pre-del?other=1")).status).toBe(400);
    expect((await t.api("GET", "/v1/sandboxes/pre-del")).body.phase).toBe(before.phase);
    expect((await t.api("DELETE", `/v1/sandboxes/${c.body.id}?generation=2`)).status).toBe(202);
    await t.gw.idle();
    expect((await t.api("GET", "/v1/sandboxes/pre-del")).status).toBe(404);
  });
});

describe("GET /v1/watch?sandbox=ID of a deleted sandbox", () => {
  /** The stream's text until `until` matches (or the deadline). */
  async function readWatch(query: string, until: RegExp): Promise<{ status: number; text: string }> {
    const ac = new AbortController();
    const res = await t.fetch(`/v1/watch?${query}`, { headers: { authorization: `Bearer ${t.token}` }, signal: ac.signal });
    if (!res.ok) return { status: res.status, text: await res.text() };
    let text = "";
    const reader = res.body!.getReader();
    const deadline = setTimeout(() => ac.abort(), 30_000);
    try {
      while (!until.test(text)) {
        const { value, done } = await reader.read();
        if (done) break;
        text += Buffer.from(value).toString();
      }
    } finally {
      clearTimeout(deadline);
      ac.abort();
    }
    return { status: res.status, text };
  }

  it("resumes from a sequence to its last events, the deletion included; an id never seen is 404", async () => {
    const c = await create("w-del");
    await t.gw.idle();
    const { events } = (await t.api("GET", "/v1/sandboxes/w-del/events")).body as { events: { seq: number }[] };
    const seen = events.at(-1)!.seq;
    expect((await t.api("DELETE", "/v1/sandboxes/w-del")).status).toBe(202);
    await t.gw.idle();
    expect((await t.api("GET", "/v1/sandboxes/w-del")).status).toBe(404);
    const r = await readWatch(`sandbox=${c.body.id}&after=${seen}`, /"kind":"deleted"/);
    expect(r.status).toBe(200);
    const kinds = [...r.text.matchAll(/"kind":"(\w+)","oldPhase":("?\w*"?),"newPhase":("?\w*"?)/g)].map((m) => `${m[1]} ${m[2]}→${m[3]}`);
    expect(kinds).toEqual(['phase "Ready"→"Deleting"', 'deleted "Deleting"→null']);
    // By name the deleted sandbox is unknown; an id the log never saw is too.
    expect((await readWatch("sandbox=w-del", /x/)).status).toBe(404);
    expect((await readWatch("sandbox=sbx_0000000000000000", /x/)).status).toBe(404);
  });
});

describe("migration 8 (labels)", () => {
  it("a v7 file keeps its sandboxes, now with no labels; a label filter finds none of them", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sg-labels-mig-"));
    try {
      const file = join(dir, "state.db");
      const raw = new Database(file);
      migrate(raw, 7);
      raw
        .prepare(`INSERT INTO sandboxes (id, name, phase, reason, generation, spec, runtime, created_at, updated_at) VALUES ('sbx_00000000000000aa', 'old', 'Stopped', NULL, 1, ?, NULL, 't', 't')`)
        .run(JSON.stringify({ env: {}, resources: { memoryMb: 64, cpus: 1, pids: 64 } }));
      raw.close();
      const s = Store.open(file);
      expect((await s.get("old"))?.labels).toEqual({});
      expect((await s.listSummaries({ limit: 10 })).map((x) => [x.name, x.labels])).toEqual([["old", {}]]);
      expect(await s.listSummaries({ limit: 10, labels: [["a", "b"]] })).toEqual([]);
      s.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
