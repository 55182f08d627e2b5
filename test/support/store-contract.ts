// The Store contract (src/store/contract.ts) as tests, run against every implementation:
// test/unit/store/sqlite-contract.test.ts (the embedded SQLite store) and
// test/unit/store/postgres-store.test.ts (PostgreSQL, a real server). Each test opens a
// fresh, empty store from `open`; what an implementation owes is written in the
// contract's header and is what these check: compare-and-sets with exactly one winner,
// a change and its event together or not at all, events out only after their commit
// and in commit order, transactions that roll back whole.

import { describe, expect, it } from "vitest";
import { DuplicateNameError, StaleRevisionError, type EventRecord, type Store } from "../../src/store/contract.js";
import { defaultPolicy } from "../../src/policy/index.js";

export type OpenStore = (opts?: { now?: () => Date }) => Promise<Store>;

const spec = { env: {}, resources: { memoryMb: 64, cpus: 1, pids: 64 } };
const policy = defaultPolicy();
const runtime = (generation: number, w = "w") => ({
  generation,
  nonce: "n",
  proxyUrl: "http://p:3128",
  workload: { id: w, name: w, imageId: "i", startedAt: "t", pid: 1 },
  supervisor: { id: `s-${w}`, name: "s", imageId: "i", startedAt: "t", pid: 2 },
});
const ref = (id: string, name = id, generation = 1) => ({ id, name, generation });

async function withStore<T>(open: OpenStore, fn: (s: Store) => Promise<T>, opts?: { now?: () => Date }): Promise<T> {
  const s = await open(opts);
  try {
    return await fn(s);
  } finally {
    await s.close();
  }
}

export function storeContract(label: string, open: OpenStore): void {
  describe(`${label}: the Store contract`, () => {
    it("creates a sandbox at generation 1 with its labels, revision 1 and a 'created' event; a taken name is DuplicateNameError and writes nothing", async () => {
      await withStore(open, async (s) => {
        const seen: EventRecord[] = [];
        s.onEvent((e) => seen.push(e));
        const a = await s.createSandbox({ host: "h1", id: "a", name: "demo", spec, policy, labels: { team: "x", env: "prod" }, policySource: "network: {}\n" });
        expect(a).toMatchObject({ id: "a", name: "demo", phase: "Provisioning", generation: 1, reason: null, runtime: null, teardownOwed: null, spec });
        expect(a.labels).toEqual({ env: "prod", team: "x" });
        expect((await s.get("demo"))?.id).toBe("a");
        expect((await s.get("a"))?.name).toBe("demo");
        expect(await s.policy("a")).toMatchObject({ revision: 1, source: "network: {}\n" });
        await expect(s.createSandbox({ host: "h1", id: "b", name: "demo", spec, policy })).rejects.toThrow(DuplicateNameError);
        expect(await s.get("b")).toBeNull();
        expect(await s.policy("b")).toBeNull();
        expect(seen.map((e) => [e.sandboxId, e.kind, e.newPhase, e.message])).toEqual([["a", "phase", "Provisioning", "created"]]);
      });
    });

    it("a transition is a compare-and-set: of two writers expecting the same state exactly one wins, and only the winner's event is written", async () => {
      await withStore(open, async (s) => {
        await s.createSandbox({ host: "h1", id: "a", name: "demo", spec, policy });
        const seen: EventRecord[] = [];
        s.onEvent((e) => seen.push(e));
        const expectP = { phase: "Provisioning" as const, generation: 1 };
        const results = await Promise.all(
          Array.from({ length: 8 }, (_, i) => s.transition("a", { expect: expectP, next: { phase: i % 2 ? "Ready" : "Error", generation: 1, reason: i % 2 ? null : { code: "ProvisioningFailed", detail: "x" } } })),
        );
        const won = results.filter((r) => r !== null);
        expect(won).toHaveLength(1);
        expect((await s.get("a"))?.phase).toBe(won[0]!.phase);
        expect((await s.events("a")).map((e) => e.newPhase)).toEqual(["Provisioning", won[0]!.phase]);
        expect(seen.map((e) => e.newPhase)).toEqual([won[0]!.phase]);
        // A stale generation with the right phase changes nothing.
        expect(await s.transition("a", { expect: { phase: won[0]!.phase, generation: 2 }, next: { phase: "Stopping", generation: 2, reason: null } })).toBeNull();
      });
    });

    it("keeps the runtime with the phase (undefined keeps, null clears), setRuntime only at the expected phase and generation, and the highest teardown owed", async () => {
      await withStore(open, async (s) => {
        await s.createSandbox({ host: "h1", id: "a", name: "demo", spec, policy });
        expect(await s.setRuntime("a", { phase: "Provisioning", generation: 1 }, runtime(1))).toBe(true);
        expect(await s.setRuntime("a", { phase: "Ready", generation: 1 }, null)).toBe(false);
        const err = await s.transition("a", { expect: { phase: "Provisioning", generation: 1 }, next: { phase: "Error", generation: 1, reason: { code: "SupervisorExited", exitCode: 137 } }, oweTeardown: 1 });
        expect(err).toMatchObject({ reason: { code: "SupervisorExited", exitCode: 137 }, runtime: runtime(1), teardownOwed: 1 });
        const next = await s.transition("a", { expect: { phase: "Error", generation: 1 }, next: { phase: "Provisioning", generation: 2, reason: null }, runtime: null, oweTeardown: 0 });
        expect(next).toMatchObject({ runtime: null, teardownOwed: 1, generation: 2 });
        // Settling an older generation than owed does nothing; settling it does.
        expect(await s.settleTeardown("a", 0)).toBe(false);
        expect(await s.settleTeardown("a", 1)).toBe(true);
        expect((await s.get("a"))?.teardownOwed).toBeNull();
        expect(await s.settleTeardown("a", 1)).toBe(false);
      });
    });

    it("settling a failed generation's teardown clears its runtime; a live one keeps it", async () => {
      await withStore(open, async (s) => {
        await s.createSandbox({ host: "h1", id: "a", name: "demo", spec, policy });
        await s.setRuntime("a", { phase: "Provisioning", generation: 1 }, runtime(1));
        await s.transition("a", { expect: { phase: "Provisioning", generation: 1 }, next: { phase: "Error", generation: 1, reason: { code: "ProvisioningFailed", detail: "x" } }, oweTeardown: 1 });
        expect(await s.settleTeardown("a", 1)).toBe(true);
        expect((await s.get("a"))?.runtime).toBeNull();
        await s.createSandbox({ host: "h1", id: "b", name: "b", spec, policy });
        await s.setRuntime("b", { phase: "Provisioning", generation: 1 }, runtime(1, "wb"));
        await s.transition("b", { expect: { phase: "Provisioning", generation: 1 }, next: { phase: "Ready", generation: 1, reason: null }, oweTeardown: 1 });
        expect(await s.settleTeardown("b", 1)).toBe(true);
        expect((await s.get("b"))?.runtime).toEqual(runtime(1, "wb"));
      });
    });

    it("pages by name bytewise, after a cursor, of one phase and with every label given; summaries carry the runtime's ids", async () => {
      await withStore(open, async (s) => {
        const names = ["b", "B", "a-2", "a-10", "Z", "a"];
        for (const [i, n] of names.entries()) await s.createSandbox({ host: `h${i % 3}`, id: `id${i}`, name: n, spec, policy, labels: i % 2 ? { team: "x" } : { team: "y", env: "p" } });
        await s.setRuntime("id0", { phase: "Provisioning", generation: 1 }, runtime(1, "w0"));
        await s.transition("id0", { expect: { phase: "Provisioning", generation: 1 }, next: { phase: "Ready", generation: 1, reason: null } });
        const sorted = [...names].sort();
        expect((await s.listPage({ limit: 100 })).map((r) => r.name)).toEqual(sorted);
        expect((await s.listPage({ limit: 2, after: "B" })).map((r) => r.name)).toEqual(sorted.slice(sorted.indexOf("B") + 1, sorted.indexOf("B") + 3));
        expect((await s.listPage({ limit: 100, phase: "Ready" })).map((r) => r.name)).toEqual(["b"]);
        expect((await s.listPage({ limit: 100, labels: [["team", "y"], ["env", "p"]] })).map((r) => r.name)).toEqual(["Z", "a-2", "b"]);
        expect(await s.listPage({ limit: 100, labels: [["team", "x"], ["env", "p"]] })).toEqual([]);
        const sums = await s.listSummaries({ limit: 100 });
        expect(sums.find((r) => r.name === "b")?.runtime).toEqual({ generation: 1, workloadId: "w0", supervisorId: "s-w0" });
        expect(sums.find((r) => r.name === "a")?.runtime).toBeNull();
        expect(sums.find((r) => r.name === "a")?.labels).toEqual({ team: "x" });
        // Every row carries its host, as written (a fleet's gateway drives only its own host's).
        expect(sums.map((r) => [r.name, r.host])).toEqual(sorted.map((n) => [n, `h${names.indexOf(n) % 3}`]));
        expect((await s.get("id4"))?.host).toBe("h1");
        const listed = await s.list();
        expect(listed.map((r) => [r.createdAt, r.name])).toEqual(listed.map((r) => [r.createdAt, r.name]).sort((x, y) => (x[0] === y[0] ? (x[1]! < y[1]! ? -1 : 1) : x[0]! < y[0]! ? -1 : 1)));
        expect(listed).toHaveLength(names.length);
        expect(await s.countByPhase()).toMatchObject({ Provisioning: 5, Ready: 1, Error: 0 });
      });
    });

    it("deletes only a sandbox Deleting at the generation given: its audit trail and labels go, its events stay, a 'deleted' event is written", async () => {
      await withStore(open, async (s) => {
        await s.createSandbox({ host: "h1", id: "a", name: "demo", spec, policy, labels: { k: "v" } });
        await s.appendAudit([{ sandboxId: "a", generation: 1, time: "2026-01-01T00:00:00.000Z", decision: "allow", count: 1, event: { host: "h" } }]);
        expect(await s.deleteSandbox("a", { generation: 1 })).toBe(false);
        await s.transition("a", { expect: { phase: "Provisioning", generation: 1 }, next: { phase: "Deleting", generation: 1, reason: null } });
        expect(await s.deleteSandbox("a", { generation: 2 })).toBe(false);
        expect(await s.deleteSandbox("a", { generation: 1 })).toBe(true);
        expect(await s.get("a")).toBeNull();
        expect(await s.audit("a")).toEqual([]);
        expect((await s.events("a")).map((e) => e.kind)).toEqual(["phase", "phase", "deleted"]);
        expect(await s.listPage({ limit: 10, labels: [["k", "v"]] })).toEqual([]);
        // The name is free again.
        await s.createSandbox({ host: "h1", id: "a2", name: "demo", spec, policy });
      });
    });

    it("transact: info events go out after the commit, in order; a throw rolls back everything written through the handle and sends nothing", async () => {
      await withStore(open, async (s) => {
        await s.createSandbox({ host: "h1", id: "a", name: "demo", spec, policy });
        const seen: string[] = [];
        s.onEvent((e) => seen.push(e.message ?? ""));
        const proposal = (id: string) => ({ id, sandboxId: "a", input: "x", hash: "h", baseRevision: 1, proposedBy: "agent", reason: null, createdAt: "2026-01-01T00:00:00.000Z" });
        await expect(
          s.transact(async (tx) => {
            await tx.info(ref("a", "demo"), "one");
            expect(await tx.insertProposal(proposal("pp_1"))).toBe(true);
            await tx.appendAudit([{ sandboxId: "a", generation: 1, time: "2026-01-01T00:00:00.000Z", decision: "policy", count: 1, event: {} }]);
            expect(seen).toEqual([]);
            throw new Error("boom");
          }),
        ).rejects.toThrow("boom");
        expect(await s.getProposal("a", "pp_1")).toBeNull();
        expect(await s.audit("a")).toEqual([]);
        expect(seen).toEqual([]);
        const r = await s.transact(async (tx) => {
          await tx.info(ref("a", "demo"), "two");
          await tx.insertProposal(proposal("pp_2"));
          await tx.info(ref("a", "demo"), "three");
          return 7;
        });
        expect(r).toBe(7);
        expect(seen).toEqual(["two", "three"]);
        expect((await s.getProposal("a", "pp_2"))?.state).toBe("pending");
      });
    });

    it("addPolicy numbers revisions after the highest; a stale expectRevision throws and writes nothing; a throw in `within` rolls the revision back; of concurrent compare-and-sets one wins", async () => {
      await withStore(open, async (s) => {
        await s.createSandbox({ host: "h1", id: "a", name: "demo", spec, policy });
        expect(await s.addPolicy(ref("a", "demo"), policy, "src")).toBe(2);
        await expect(s.addPolicy(ref("a", "demo"), policy, null, { expectRevision: 1 })).rejects.toBeInstanceOf(StaleRevisionError);
        await expect(s.addPolicy(ref("a", "demo"), policy, null, { within: () => Promise.reject(new Error("no")) })).rejects.toThrow("no");
        expect((await s.policy("a"))?.revision).toBe(2);
        const tries = await Promise.allSettled(Array.from({ length: 5 }, () => s.addPolicy(ref("a", "demo"), policy, null, { expectRevision: 2 })));
        expect(tries.filter((t) => t.status === "fulfilled").map((t) => (t).value)).toEqual([3]);
        expect(tries.filter((t) => t.status === "rejected").every((t) => (t).reason instanceof StaleRevisionError)).toBe(true);
        // Without a compare-and-set, concurrent revisions are numbered one after the other.
        const free = await Promise.all(Array.from({ length: 4 }, () => s.addPolicy(ref("a", "demo"), policy)));
        expect([...free].sort()).toEqual([4, 5, 6, 7]);
        expect((await s.events("a")).filter((e) => e.kind === "info").map((e) => e.message)).toEqual([2, 3, 4, 5, 6, 7].map((n) => `policy revision ${n} accepted`));
        await s.addPolicy(ref("a", "demo"), policy, null, {
          within: async (revision, tx) => {
            expect(revision).toBe(8);
            await tx.info(ref("a", "demo"), "within");
          },
        });
        expect((await s.events("a", { tail: 1 }))[0]?.message).toBe("within");
      });
    });

    it("reads a log by cursor: after, before, the last N, and every sandbox's events after a number; enteredPhaseAt ignores self-transitions", async () => {
      let t = 0;
      await withStore(
        open,
        async (s) => {
          await s.createSandbox({ host: "h1", id: "a", name: "demo", spec, policy });
          await s.createSandbox({ host: "h1", id: "b", name: "b", spec, policy });
          for (let i = 0; i < 10; i++) await s.appendEvent(ref(i % 2 ? "a" : "b", i % 2 ? "demo" : "b"), "info", `m${i}`);
          const a = await s.events("a");
          expect(a.map((e) => e.message)).toEqual(["created", "m1", "m3", "m5", "m7", "m9"]);
          expect((await s.events("a", { afterSeq: a[1]!.seq, limit: 2 })).map((e) => e.message)).toEqual(["m3", "m5"]);
          expect((await s.events("a", { beforeSeq: a[3]!.seq })).map((e) => e.message)).toEqual(["created", "m1", "m3"]);
          expect((await s.events("a", { tail: 2 })).map((e) => e.message)).toEqual(["m7", "m9"]);
          expect((await s.events("a", { tail: 2, beforeSeq: a[3]!.seq })).map((e) => e.message)).toEqual(["m1", "m3"]);
          const all = await s.eventsAfter(0);
          expect(all.map((e) => e.seq)).toEqual([...all.map((e) => e.seq)].sort((x, y) => x - y));
          expect(all).toHaveLength(12);
          expect((await s.eventsAfter(all[9]!.seq, 10)).map((e) => e.message)).toEqual(["m8", "m9"]);
          const step = (from: "Provisioning" | "Ready" | "Recovering", to: "Ready" | "Recovering") => s.transition("a", { expect: { phase: from, generation: 1 }, next: { phase: to, generation: 1, reason: null } });
          await step("Provisioning", "Ready");
          await step("Ready", "Recovering");
          const entered = await s.enteredPhaseAt("a", "Recovering");
          await step("Recovering", "Recovering");
          expect(await s.enteredPhaseAt("a", "Recovering")).toBe(entered);
          expect(await s.enteredPhaseAt("a", "Stopping")).toBeNull();
          const info = await s.appendEvent(ref("a", "demo"), "info", "with data", { revision: 3, list: [1, "x"] });
          expect((await s.events("a", { afterSeq: info.seq - 1 }))[0]).toEqual(info);
        },
        { now: () => new Date(Date.UTC(2026, 0, 1, 0, 0, t++)) },
      );
    });

    it("the audit trail: windows by decision and time, a generation's egress totals, retention per sandbox with policy records apart", async () => {
      let now = Date.UTC(2026, 0, 2);
      await withStore(
        open,
        async (s) => {
          await s.createSandbox({ host: "h1", id: "a", name: "demo", spec, policy });
          const at = (d: number) => new Date(Date.UTC(2026, 0, 1) + d * 1000).toISOString();
          await s.appendAudit([
            { sandboxId: "a", generation: 1, time: at(1), decision: "allow", count: 3, event: { host: "x", bytesOut: 10, bytesIn: 20 } },
            { sandboxId: "a", generation: 1, time: at(2), decision: "deny", count: 2, event: { host: "y" } },
            { sandboxId: "a", generation: 1, time: at(3), decision: "would_deny", count: 1, event: { host: "z" } },
            { sandboxId: "a", generation: 1, time: at(4), decision: "allow", count: 1, event: { activity: "close", bytesOut: 5, bytesIn: 1 } },
            { sandboxId: "a", generation: 1, time: at(5), decision: "dropped", count: 9, event: {} },
            { sandboxId: "a", generation: 1, time: at(6), decision: "policy", count: 1, event: { proposal: "pp" } },
            { sandboxId: "a", generation: 2, time: at(7), decision: "allow", count: 1, event: { bytesOut: 1000 } },
          ]);
          expect((await s.audit("a", { decision: "deny" })).map((r) => r.event)).toEqual([{ host: "y" }]);
          expect((await s.audit("a", { since: at(6) })).map((r) => r.decision)).toEqual(["policy", "allow"]);
          expect(await s.egressTotals("a", 1)).toEqual({ bytesOut: 15, bytesIn: 21, allowed: 4, denied: 2, wouldDeny: 1, dropped: 9, since: at(1) });
          expect(await s.egressTotals("a", 3)).toEqual({ bytesOut: 0, bytesIn: 0, allowed: 0, denied: 0, wouldDeny: 0, dropped: 0, since: null });
          const removed = await s.prune({ perSandbox: 2, maxAgeMs: 365 * 86_400_000 }, { perSandbox: 100, maxAgeMs: 365 * 86_400_000 });
          expect(removed).toEqual({ audit: 4, events: 0 });
          expect((await s.audit("a")).map((r) => r.decision)).toEqual(["dropped", "policy", "allow"]);
          now += 10 * 86_400_000;
          expect((await s.prune({ perSandbox: 100, maxAgeMs: 86_400_000 }, { perSandbox: 100, maxAgeMs: 86_400_000 })).audit).toBe(3);
          // A live sandbox's events are kept whatever their age.
          expect(await s.events("a")).toHaveLength(1);
        },
        { now: () => new Date(now) },
      );
    });

    it("proposals: not for a sandbox that is gone; decided once, by exactly one of concurrent deciders; the newest decided kept", async () => {
      await withStore(open, async (s) => {
        await s.createSandbox({ host: "h1", id: "a", name: "demo", spec, policy });
        const p = (id: string, i: number) => ({ id, sandboxId: "a", input: { network: {} }, hash: "h", baseRevision: 1, proposedBy: "agent", reason: i ? "why" : null, createdAt: `2026-01-01T00:00:0${i}.000Z` });
        expect(await s.insertProposal({ ...p("pp_x", 0), sandboxId: "nope" })).toBe(false);
        for (let i = 0; i < 4; i++) expect(await s.insertProposal(p(`pp_${i}`, i))).toBe(true);
        expect(await s.countPendingProposals("a")).toBe(4);
        const d = (by: string, i: number) => ({ state: "rejected" as const, at: `2026-01-01T00:01:0${i}.000Z`, by, note: null, revision: null });
        const wins = await Promise.all(["x", "y", "z"].map((by) => s.decideProposal("a", "pp_0", d(by, 0))));
        expect(wins.filter(Boolean)).toHaveLength(1);
        await s.decideProposal("a", "pp_1", d("x", 1));
        await s.decideProposal("a", "pp_2", { state: "approved", at: "2026-01-01T00:01:02.000Z", by: "x", note: "ok", revision: 2 });
        expect(await s.getProposal("a", "pp_2")).toMatchObject({ state: "approved", decidedBy: "x", decisionNote: "ok", revision: 2, input: { network: {} }, reason: "why", baseRevision: 1 });
        expect((await s.listProposals("a", "pending")).map((x) => x.id)).toEqual(["pp_3"]);
        expect(await s.pruneDecidedProposals("a", 1)).toBe(2);
        expect((await s.listProposals("a")).map((x) => x.id)).toEqual(["pp_2", "pp_3"]);
      });
    });

    it("secrets: versions count up per name, the listing has sizes and no value, delete says whether there was one", async () => {
      await withStore(open, async (s) => {
        const sealed = (n: number) => ({ nonce: Buffer.alloc(12, n), ciphertext: Buffer.alloc(n, 7), tag: Buffer.alloc(16, 1) });
        expect(await s.putSecret("b", sealed(5), "t1")).toBe(1);
        expect(await s.putSecret("a", sealed(3), "t1")).toBe(1);
        expect((await Promise.all([s.putSecret("b", sealed(6), "t2"), s.putSecret("b", sealed(7), "t3")])).sort()).toEqual([2, 3]);
        const b = await s.getSecret("b");
        expect(b?.version).toBe(3);
        expect(b?.createdAt).toBe("t1");
        expect(Buffer.isBuffer(b?.ciphertext)).toBe(true);
        expect(await s.listSecrets()).toEqual([
          { name: "a", version: 1, bytes: 3, createdAt: "t1", updatedAt: "t1" },
          { name: "b", version: 3, bytes: b!.ciphertext.length, createdAt: "t1", updatedAt: b!.updatedAt },
        ]);
        expect(await s.deleteSecret("a")).toBe(true);
        expect(await s.deleteSecret("a")).toBe(false);
        expect(await s.getSecret("a")).toBeNull();
      });
    });

    it("expiry columns: live sandboxes with a deadline or an idle stop; a deadline only for its generation; activity never moves back", async () => {
      await withStore(open, async (s) => {
        await s.createSandbox({ host: "h1", id: "a", name: "a", spec: { ...spec, ttlSeconds: 60 }, policy });
        await s.createSandbox({ host: "h1", id: "b", name: "b", spec: { ...spec, idleStopSeconds: 30 }, policy });
        await s.createSandbox({ host: "h1", id: "c", name: "c", spec, policy });
        expect((await s.expiringSandboxes()).map((r) => r.id)).toEqual(["b"]);
        expect(await s.setTtlDeadline("a", 2, "2026-01-01T00:01:00.000Z")).toBe(false);
        expect(await s.setTtlDeadline("a", 1, "2026-01-01T00:01:00.000Z")).toBe(true);
        const rows = (await s.expiringSandboxes()).sort((x, y) => x.id.localeCompare(y.id));
        expect(rows).toEqual([
          { id: "a", name: "a", phase: "Provisioning", generation: 1, ttlDeadline: "2026-01-01T00:01:00.000Z", ttlSeconds: 60, idleStopSeconds: null, lastActive: null },
          { id: "b", name: "b", phase: "Provisioning", generation: 1, ttlDeadline: null, ttlSeconds: null, idleStopSeconds: 30, lastActive: null },
        ]);
        await s.recordActivity([["b", "2026-01-01T00:00:05.000Z"], ["c", "2026-01-01T00:00:01.000Z"]]);
        await s.recordActivity([["b", "2026-01-01T00:00:02.000Z"]]);
        expect(await s.expiryColumns("b")).toEqual({ ttlDeadline: null, lastActive: "2026-01-01T00:00:05.000Z" });
        expect(await s.expiryColumns("nope")).toBeNull();
        await s.transition("b", { expect: { phase: "Provisioning", generation: 1 }, next: { phase: "Error", generation: 1, reason: { code: "ProvisioningFailed", detail: "x" } } });
        expect((await s.expiringSandboxes()).map((r) => r.id)).toEqual(["a"]);
      });
    });
  });
}
