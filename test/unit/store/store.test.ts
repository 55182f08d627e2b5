import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { SCHEMA_VERSION, migrate } from "../../../src/store/migrations.js";
import { DuplicateNameError, Store } from "../../../src/store/store.js";
import { defaultPolicy } from "../../../src/policy/index.js";

const spec = { env: {}, resources: { memoryMb: 64, cpus: 1, pids: 64 } };
const policy = defaultPolicy();
const WRITER = join(import.meta.dirname, "../../support/store-writer.ts");
// `node --import tsx` rather than the tsx CLI: the CLI forks a child, and a
// SIGKILL must hit the writer itself.
const NODE_TSX = [process.execPath, "--import", "tsx"] as const;

let dir: string;
let db: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "sg-store-"));
  db = join(dir, "state.db");
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe("store", () => {
  it("migrates a new file to the current schema version and reopens it unchanged", async () => {
    const s = Store.open(db);
    expect(s.db.pragma("user_version", { simple: true })).toBe(SCHEMA_VERSION);
    expect(s.db.pragma("journal_mode", { simple: true })).toBe("wal");
    await s.createSandbox({ host: "h1", id: "a", name: "demo", spec, policy });
    s.close();
    const again = Store.open(db);
    expect((await again.get("demo"))?.id).toBe("a");
    again.close();
  });

  it("migration 3 keeps the policy only in its revisions: a v2 file's spec.policy moves out, revision 1 stays", async () => {
    const raw = new Database(db);
    migrate(raw, 2);
    const oldPolicy = { ...policy, network: { rules: [{ name: "api", endpoints: [] }], deny: [] } };
    raw
      .prepare(`INSERT INTO sandboxes (id, name, phase, reason, generation, spec, runtime, created_at, updated_at) VALUES ('a', 'demo', 'Ready', NULL, 1, ?, NULL, 't', 't')`)
      .run(JSON.stringify({ ...spec, policy: oldPolicy }));
    raw.prepare(`INSERT INTO policies (sandbox_id, revision, policy, hash, created_at) VALUES ('a', 1, ?, '', 't')`).run(JSON.stringify(oldPolicy));
    raw.close();
    const s = Store.open(db);
    expect((await s.get("demo"))?.spec).toEqual(spec);
    expect((await s.policy("a"))?.revision).toBe(1);
    expect((await s.policy("a"))?.policy.network.rules[0]?.name).toBe("api");
    s.close();
  });

  it("refuses a database from a newer sandgate", () => {
    const raw = new Database(db);
    raw.pragma(`user_version = ${SCHEMA_VERSION + 1}`);
    raw.close();
    expect(() => Store.open(db)).toThrow(/newer than this sandgate/);
  });

  it("keeps names unique and records creation in the event log", async () => {
    const s = Store.open(db);
    await s.createSandbox({ host: "h1", id: "a", name: "demo", spec, policy });
    await expect(s.createSandbox({ host: "h1", id: "b", name: "demo", spec, policy })).rejects.toThrow(DuplicateNameError);
    expect((await s.list()).map((x) => x.id)).toEqual(["a"]);
    expect((await s.events("a")).map((e) => [e.kind, e.oldPhase, e.newPhase])).toEqual([["phase", null, "Provisioning"]]);
    expect(await s.events("b")).toEqual([]);
    s.close();
  });

  it("compare-and-set: a transition against a stale phase or generation changes nothing", async () => {
    const s = Store.open(db);
    await s.createSandbox({ host: "h1", id: "a", name: "demo", spec, policy });
    const ready = { phase: "Ready" as const, generation: 1, reason: null };
    expect(await s.transition("a", { expect: { phase: "Provisioning", generation: 1 }, next: ready })).not.toBeNull();
    // Same write again: the expected phase no longer holds.
    expect(await s.transition("a", { expect: { phase: "Provisioning", generation: 1 }, next: ready })).toBeNull();
    // Right phase, wrong generation.
    expect(await s.transition("a", { expect: { phase: "Ready", generation: 2 }, next: { ...ready, phase: "Stopping" } })).toBeNull();
    expect((await s.get("a"))?.phase).toBe("Ready");
    expect(await s.events("a")).toHaveLength(2);
    s.close();
  });

  it("stores the reason and runtime with the phase, and clears runtime on request", async () => {
    const s = Store.open(db);
    await s.createSandbox({ host: "h1", id: "a", name: "demo", spec, policy });
    const runtime = {
      generation: 1,
      nonce: "n",
      proxyUrl: "http://p:3128",
      workload: { id: "w", name: "w", imageId: "i", startedAt: "t", pid: 1 },
      supervisor: { id: "s", name: "s", imageId: "i", startedAt: "t", pid: 2 },
    };
    expect(await s.setRuntime("a", { phase: "Provisioning", generation: 1 }, runtime)).toBe(true);
    expect(await s.setRuntime("a", { phase: "Provisioning", generation: 2 }, null)).toBe(false);
    const err = await s.transition("a", {
      expect: { phase: "Provisioning", generation: 1 },
      next: { phase: "Error", generation: 1, reason: { code: "SupervisorExited", exitCode: 137 } },
    });
    expect(err?.reason).toEqual({ code: "SupervisorExited", exitCode: 137 });
    expect(err?.runtime).toEqual(runtime);
    const restarted = await s.transition("a", { expect: { phase: "Error", generation: 1 }, next: { phase: "Provisioning", generation: 2, reason: null }, runtime: null });
    expect(restarted?.runtime).toBeNull();
    expect((await s.events("a")).at(-1)?.reason).toBeNull();
    expect((await s.events("a")).at(-2)?.reason).toEqual({ code: "SupervisorExited", exitCode: 137 });
    s.close();
  });

  it("tells when a sandbox last entered a phase, ignoring self-transitions and other events", async () => {
    let t = 0;
    const s = Store.open(db, { now: () => new Date(Date.UTC(2026, 0, 1, 0, 0, t++)) });
    await s.createSandbox({ host: "h1", id: "a", name: "demo", spec, policy });
    const step = async (from: "Provisioning" | "Ready" | "Recovering", to: "Ready" | "Recovering") =>
      await s.transition("a", { expect: { phase: from, generation: 1 }, next: { phase: to, generation: 1, reason: null } });
    expect(await s.enteredPhaseAt("a", "Recovering")).toBeNull();
    await step("Provisioning", "Ready");
    await step("Ready", "Recovering"); // t = 2
    await step("Recovering", "Recovering"); // a new cause, not a new entry
    await s.appendEvent({ id: "a", name: "demo", generation: 1 }, "info", "policy revision 2 accepted");
    expect(await s.enteredPhaseAt("a", "Recovering")).toBe("2026-01-01T00:00:02.000Z");
    s.close();
  });

  it("reads a log by cursor: after, before, the last N, and the last N inside a window", async () => {
    const s = Store.open(db);
    await s.createSandbox({ host: "h1", id: "a", name: "demo", spec, policy });
    for (let i = 0; i < 20; i++) await s.appendEvent({ id: "a", name: "demo", generation: 1 }, "info", `m${i}`);
    const all = await s.events("a");
    expect(all).toHaveLength(21);
    const seqs = all.map((e) => e.seq);
    expect((await s.events("a", { afterSeq: seqs[5]!, limit: 3 })).map((e) => e.seq)).toEqual(seqs.slice(6, 9));
    expect((await s.events("a", { tail: 3 })).map((e) => e.message)).toEqual(["m17", "m18", "m19"]);
    expect((await s.events("a", { beforeSeq: seqs[10]!, tail: 2 })).map((e) => e.seq)).toEqual(seqs.slice(8, 10));
    expect(await s.events("a", { afterSeq: seqs.at(-1)! })).toEqual([]);
    // A page is never larger than 10,000, whatever is asked.
    expect(await s.events("a", { limit: 1e9 })).toHaveLength(21);
    s.close();
  });

  it("keeps audit records apart from events; retention by count per sandbox and by age; delete takes a sandbox's trail", async () => {
    let now = Date.UTC(2026, 0, 10);
    const s = Store.open(db, { now: () => new Date(now) });
    await s.createSandbox({ host: "h1", id: "a", name: "demo", spec, policy });
    await s.createSandbox({ host: "h1", id: "b", name: "other", spec, policy });
    const rec = (id: string, i: number, time = new Date(now).toISOString()) => ({ sandboxId: id, generation: 1, time, decision: i % 2 ? "deny" : "allow", count: 1, event: { i } });
    await s.appendAudit([rec("a", 0, "2026-01-01T00:00:00.000Z"), ...Array.from({ length: 12 }, (_, i) => rec("a", i + 1)), rec("b", 1)]);
    expect((await s.events("a")).map((e) => e.kind)).toEqual(["phase"]);
    expect(await s.audit("a")).toHaveLength(13);
    expect((await s.audit("a", { decision: "deny" })).every((r) => r.decision === "deny")).toBe(true);
    expect((await s.audit("a", { tail: 1 }))[0]!.event).toEqual({ i: 12 });

    const r = await s.prune({ perSandbox: 10, maxAgeMs: 3 * 24 * 3600_000 }, { perSandbox: 100, maxAgeMs: 3 * 24 * 3600_000 });
    // The 9-day-old record went by age, two more by count; b's one record stays.
    expect(r.audit).toBe(3);
    expect((await s.audit("a")).map((x) => x.event.i)).toEqual([3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
    expect(await s.audit("b")).toHaveLength(1);

    // Policy records are counted apart: egress past the limit does not push them out.
    await s.appendAudit([{ sandboxId: "a", generation: 1, time: new Date(now).toISOString(), decision: "policy", count: 1, event: { i: "set" } }, ...Array.from({ length: 10 }, (_, i) => rec("a", i + 13))]);
    await s.prune({ perSandbox: 10, maxAgeMs: 3 * 24 * 3600_000 }, { perSandbox: 100, maxAgeMs: 3 * 24 * 3600_000 });
    expect((await s.audit("a", { decision: "policy" })).map((x) => x.event.i)).toEqual(["set"]);
    expect((await s.audit("a")).filter((x) => x.decision !== "policy")).toHaveLength(10);

    await s.transition("b", { expect: { phase: "Provisioning", generation: 1 }, next: { phase: "Deleting", generation: 1, reason: null } });
    await s.deleteSandbox("b", { generation: 1 });
    expect(await s.audit("b")).toEqual([]);
    // A deleted sandbox's events stay until they are older than the age limit.
    expect((await s.events("b")).length).toBeGreaterThan(0);
    now += 4 * 24 * 3600_000;
    await s.prune({ perSandbox: 10, maxAgeMs: 3 * 24 * 3600_000 }, { perSandbox: 100, maxAgeMs: 3 * 24 * 3600_000 });
    expect(await s.events("b")).toEqual([]);
    // A live sandbox keeps its history whatever its age.
    expect((await s.events("a")).length).toBeGreaterThan(0);
    s.close();
  });

  it("a transaction spans its function's awaits: other operations wait for its end and never see it half-written; a throw rolls all of it back, with no event", async () => {
    const s = Store.open(db);
    await s.createSandbox({ host: "h1", id: "a", name: "demo", spec, policy });
    const seen: string[] = [];
    s.onEvent((e) => seen.push(e.message ?? ""));
    let release = (): void => undefined;
    const gate = new Promise<void>((r) => (release = r));
    const order: string[] = [];
    const tx = s.transact(async (t) => {
      await t.info({ id: "a", name: "demo", generation: 1 }, "inside");
      await gate;
      order.push("committing");
    });
    // Asked while it is open: answered after its commit, with what it wrote.
    const read = s.events("a").then((events) => {
      order.push("read");
      return events.map((e) => e.message);
    });
    const write = s.appendEvent({ id: "a", name: "demo", generation: 1 }, "info", "after").then(() => order.push("written"));
    await new Promise((r) => setImmediate(r));
    expect(order).toEqual([]);
    expect(seen).toEqual([]);
    release();
    await Promise.all([tx, read, write]);
    expect(order).toEqual(["committing", "read", "written"]);
    expect(await read).toEqual(["created", "inside"]);
    expect(seen).toEqual(["inside", "after"]);

    await expect(
      s.transact(async (t) => {
        await t.info({ id: "a", name: "demo", generation: 1 }, "rolled back");
        await t.appendAudit([{ sandboxId: "a", generation: 1, time: new Date().toISOString(), decision: "allow", count: 1, event: {} }]);
        throw new Error("no");
      }),
    ).rejects.toThrow("no");
    expect((await s.events("a")).map((e) => e.message)).toEqual(["created", "inside", "after"]);
    expect(await s.audit("a")).toEqual([]);
    expect(seen).toEqual(["inside", "after"]);
    s.close();
  });

  it("deletes only a Deleting sandbox and keeps its events", async () => {
    const s = Store.open(db);
    await s.createSandbox({ host: "h1", id: "a", name: "demo", spec, policy });
    expect(await s.deleteSandbox("a", { generation: 1 })).toBe(false);
    await s.transition("a", { expect: { phase: "Provisioning", generation: 1 }, next: { phase: "Deleting", generation: 1, reason: null } });
    expect(await s.deleteSandbox("a", { generation: 1 })).toBe(true);
    expect(await s.get("a")).toBeNull();
    expect((await s.events("a")).map((e) => e.kind)).toEqual(["phase", "phase", "deleted"]);
    // The name is free again.
    await s.createSandbox({ host: "h1", id: "b", name: "demo", spec, policy });
    s.close();
  });

  it("two processes racing the same compare-and-set: exactly one wins each time", async () => {
    const n = 300;
    const s = Store.open(db);
    for (let i = 0; i < n; i++) {
      await s.createSandbox({ host: "h1", id: `race-${i}`, name: `race-${i}`, spec, policy });
      await s.transition(`race-${i}`, { expect: { phase: "Provisioning", generation: 1 }, next: { phase: "Ready", generation: 1, reason: null } });
    }
    const at = Date.now() + 2500;
    const run = (): Promise<string[]> =>
      new Promise((resolve, reject) => {
        const p = spawn(NODE_TSX[0], [...NODE_TSX.slice(1), WRITER, "race", db, String(n), String(at)], { stdio: ["ignore", "pipe", "inherit"] });
        let out = "";
        p.stdout.on("data", (b: Buffer) => (out += b.toString()));
        p.on("error", reject);
        p.on("exit", (code) => (code === 0 ? resolve(out.split("\n").filter(Boolean)) : reject(new Error(`writer exited ${code}`))));
      });
    const [a, b] = await Promise.all([run(), run()]);
    const wins = [...a, ...b].map((l) => l.replace("won ", ""));
    expect(wins).toHaveLength(n);
    expect(new Set(wins).size).toBe(n);
    for (let i = 0; i < n; i++) {
      expect((await s.get(`race-${i}`))?.phase).toBe("Stopping");
      expect((await s.events(`race-${i}`)).filter((e) => e.newPhase === "Stopping")).toHaveLength(1);
    }
    s.close();
  }, 60_000);

  it("SIGKILL of a writer mid-stream loses nothing it committed and leaves the file intact", async () => {
    Store.open(db).close();
    const committed: string[] = [];
    await new Promise<void>((resolve, reject) => {
      const p = spawn(NODE_TSX[0], [...NODE_TSX.slice(1), WRITER, "churn", db], { stdio: ["ignore", "pipe", "inherit"] });
      let buf = "";
      p.stdout.on("data", (b: Buffer) => {
        buf += b.toString();
        const lines = buf.split("\n");
        buf = lines.pop()!;
        committed.push(...lines.filter(Boolean));
        if (committed.length >= 400 && !p.killed) p.kill("SIGKILL");
      });
      p.on("error", reject);
      p.on("exit", (_code, signal) => (signal === "SIGKILL" ? resolve() : reject(new Error(`writer ended without SIGKILL: ${signal}`))));
    });
    expect(committed.length).toBeGreaterThanOrEqual(400);
    const s = Store.open(db);
    expect(s.db.pragma("integrity_check", { simple: true })).toBe("ok");
    for (const line of committed) {
      const [, name, phase] = line.split(" ");
      const rec = await s.get(name!);
      expect(rec, `${name} was reported committed`).not.toBeNull();
      if (phase === "Ready") expect(rec!.phase).toBe("Ready");
      expect((await s.events(rec!.id)).some((e) => e.newPhase === phase)).toBe(true);
    }
    s.close();
  }, 60_000);

  it("secrets (src/store/secrets-store.ts): a put counts the version up from the row it replaces; a listing has sizes, no sealed parts; delete once", async () => {
    const s = Store.open(db);
    const sealed = (n: number) => ({ nonce: Buffer.alloc(12, n), ciphertext: Buffer.alloc(n, 7), tag: Buffer.alloc(16, n) });
    expect(await s.putSecret("k", sealed(3), "2026-01-01T00:00:00.000Z")).toBe(1);
    expect(await s.putSecret("k", sealed(5), "2026-01-02T00:00:00.000Z")).toBe(2);
    expect(await s.putSecret("a", sealed(1), "2026-01-03T00:00:00.000Z")).toBe(1);
    expect(await s.getSecret("k")).toEqual({ name: "k", version: 2, ...sealed(5), createdAt: "2026-01-01T00:00:00.000Z", updatedAt: "2026-01-02T00:00:00.000Z" });
    expect(await s.listSecrets()).toEqual([
      { name: "a", version: 1, bytes: 1, createdAt: "2026-01-03T00:00:00.000Z", updatedAt: "2026-01-03T00:00:00.000Z" },
      { name: "k", version: 2, bytes: 5, createdAt: "2026-01-01T00:00:00.000Z", updatedAt: "2026-01-02T00:00:00.000Z" },
    ]);
    expect(await s.deleteSecret("k")).toBe(true);
    expect(await s.deleteSecret("k")).toBe(false);
    expect(await s.getSecret("k")).toBeNull();
    expect(s.isOpen).toBe(true);
    s.close();
    expect(s.isOpen).toBe(false);
  });
});
