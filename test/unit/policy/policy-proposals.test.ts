// Policy proposals through the API of a real gateway (real HTTP, a real SQLite file) on
// the in-memory driver test double: an agent's client proposes with the API token; only a
// holder of the approver token decides; approval is a compare-and-set on the revision the
// proposal was made against; every step is an event and an audit record.
import { statSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually, startTestGateway, type TestGateway } from "../../support/gateway-fixture.js";
import { MemoryDriver } from "../../support/memory-driver.js";
import { ACTIVE, TIGHTER } from "../../support/review-policies.js";
import { Store, StaleRevisionError } from "../../../src/store/store.js";
import { decideProposal, insertProposal, listProposals, pruneDecided } from "../../../src/store/proposals-store.js";
import { defaultPolicy } from "../../../src/policy/index.js";
import { APPROVER_HEADER, approverMatches } from "../../../src/gateway/api/proposals-routes.js";

/** ACTIVE plus a rule for pypi.org. */
const WIDER = `${ACTIVE}    - name: pypi
      endpoints:
        - { host: pypi.org, port: 443, protocol: https }
`;

let t: TestGateway;
const driver = new MemoryDriver();
const PENDING = 3;
const KEPT = 2;

beforeAll(async () => {
  t = await startTestGateway(driver, { proposals: { pending: PENDING, kept: KEPT } });
});
afterAll(async () => {
  await t.close();
});

const approver = (): Record<string, string> => ({ [APPROVER_HEADER]: t.approverToken });
const base = (name: string) => `/v1/sandboxes/${name}/policy/proposals`;

/** Until the sandbox is in `phase`. */
const until = (name: string, phase: string): Promise<true> =>
  eventually(async () => ((await t.api("GET", `/v1/sandboxes/${name}`)).body?.phase === phase ? true : undefined), 30_000, `${name} ${phase}`);

/** A new Ready sandbox with the ACTIVE policy (revision 1). */
async function sandbox(name: string): Promise<{ id: string }> {
  expect((await t.api("POST", "/v1/sandboxes", { name, policy: ACTIVE })).status).toBe(201);
  return eventually(async () => {
    const r = await t.api("GET", `/v1/sandboxes/${name}`);
    return r.body?.phase === "Ready" ? (r.body as { id: string }) : undefined;
  }, 30_000, `${name} Ready`);
}

const propose = async (name: string, policy: string, extra: Record<string, unknown> = {}) => {
  const r = await t.api("POST", base(name), { policy, ...extra });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body as { id: string; baseRevision: number; state: string };
};

/** What a refused request must leave as it was. */
const snapshot = () => {
  const db = t.gw.sqlite!.db;
  return JSON.stringify([
    db.prepare("SELECT * FROM policy_proposals ORDER BY seq").all(),
    db.prepare("SELECT count(*) AS n, max(seq) AS m FROM events").get(),
    db.prepare("SELECT count(*) AS n FROM policies").get(),
    db.prepare("SELECT count(*) AS n FROM audit").get(),
  ]);
};

describe("propose, review, approve", () => {
  it("propose → list → diff and replay → approve: the proposed policy is active as a new revision; events and audit records in order", async () => {
    const s = await sandbox("pa");
    const at = (h: number) => new Date(Date.UTC(2026, 11, 1, h)).toISOString();
    await t.gw.store.appendAudit([
      { sandboxId: s.id, generation: 1, time: at(1), decision: "allow", count: 10, event: { type: "egress", time: at(1), decision: "allow", host: "api.example.com", port: 443, protocol: "https", rule: "api" } },
      { sandboxId: s.id, generation: 1, time: at(2), decision: "deny", count: 4, event: { type: "egress", time: at(2), decision: "deny", host: "pypi.org", port: 443, protocol: "https", reason: "no_matching_rule" } },
    ]);

    const p = await propose("pa", WIDER, { reason: "pip needs pypi.org", by: "mcp" });
    expect(p).toMatchObject({ sandbox: "pa", state: "pending", stale: false, baseRevision: 1, revision: null, proposedBy: "mcp", reason: "pip needs pypi.org", decidedAt: null });
    expect(p.id).toMatch(/^pp_[0-9a-f]{16}$/);
    // Proposing changes nothing of the policy.
    expect((await t.api("GET", "/v1/sandboxes/pa/policy")).body.revision).toBe(1);

    const list = await t.api("GET", base("pa"));
    expect(list.body.proposals.map((x: { id: string; state: string }) => [x.id, x.state])).toEqual([[p.id, "pending"]]);

    const shown = await t.api("GET", `${base("pa")}/${p.id}`);
    expect(shown.status).toBe(200);
    expect(shown.body.policy).toBe(WIDER);
    expect(shown.body.activeRevision).toBe(1);
    expect(shown.body.diff.changes).toEqual([{ kind: "rule added", name: "pypi", lines: ["+ https pypi.org:443"] }]);
    expect(shown.body.replay.newlyAllowed).toEqual([{ request: "https pypi.org:443", count: 4, lastSeen: at(2), because: "rule pypi" }]);
    expect(shown.body.replay.newlyDenied).toEqual([]);
    // The proposal's own audit record is not traffic: not replayed, not counted as egress.
    expect(shown.body.replay.window).toMatchObject({ records: 2, requests: 14, from: at(1), to: at(2) });
    expect(await t.gw.store.egressTotals(s.id, 1)).toMatchObject({ allowed: 10, denied: 4, since: at(1) });

    const ok = await t.api("POST", `${base("pa")}/${p.id}/approve`, { by: "cli:alice" }, undefined, approver());
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    expect(ok.body).toMatchObject({ revision: 2, enforced: null, proposal: { id: p.id, state: "approved", revision: 2, decidedBy: "cli:alice" } });
    const active = await t.api("GET", "/v1/sandboxes/pa/policy");
    expect(active.body.revision).toBe(2);
    expect(active.body.source).toBe(WIDER);

    const events = (await t.api("GET", "/v1/sandboxes/pa/events")).body.events.map((e: { message: string }) => e.message).filter((m: string) => /^policy /.test(m));
    expect(events).toEqual([
      `policy proposal ${p.id} by mcp against revision 1: pip needs pypi.org`,
      "policy revision 2 accepted",
      `policy proposal ${p.id} approved by cli:alice: revision 2`,
    ]);

    const audit = await t.api("GET", "/v1/sandboxes/pa/audit?decision=policy");
    expect(audit.body.audit.map((r: { event: { action: string; by: string } }) => [r.event.action, r.event.by])).toEqual([["proposed", "mcp"], ["approved", "cli:alice"]]);
    const ocsf = await t.api("GET", "/v1/sandboxes/pa/audit?decision=policy&format=ocsf");
    expect(ocsf.body.audit.map((e: { class_uid: number; activity_name: string; actor: { user: { name: string } } }) => [e.class_uid, e.activity_name, e.actor.user.name])).toEqual([
      [6003, "Create", "mcp"],
      [6003, "Update", "cli:alice"],
    ]);
    expect(ocsf.body.audit[1].message).toBe(`policy proposal ${p.id} approved by cli:alice: revision 2`);
    // Egress counts are not moved by policy records.
    expect((await t.api("GET", "/v1/sandboxes/pa/audit?decision=deny")).body.audit).toHaveLength(1);
  });

  it("a proposal's audit record is not egress: sandbox stats count from the first egress record after it", async () => {
    const s = await sandbox("pe");
    await propose("pe", WIDER);
    const later = new Date(Date.now() + 3_600_000).toISOString();
    await t.gw.store.appendAudit([{ sandboxId: s.id, generation: 1, time: later, decision: "allow", count: 2, event: { type: "egress", time: later, decision: "allow", host: "api.example.com", port: 443, protocol: "https", bytesOut: 10, bytesIn: 20 } }]);
    expect(await t.gw.store.egressTotals(s.id, 1)).toEqual({ bytesOut: 10, bytesIn: 20, allowed: 2, denied: 0, wouldDeny: 0, dropped: 0, since: later });
  });

  it("reject: the policy stays; the decision and its reason are recorded; a decided proposal is never decided again", async () => {
    await sandbox("pr");
    const p = await propose("pr", TIGHTER);
    expect(p).toMatchObject({ proposedBy: "api", reason: null });
    const r = await t.api("POST", `${base("pr")}/${p.id}/reject`, { by: "cli:bob", reason: "we still need api.example.com" }, undefined, approver());
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ state: "rejected", decidedBy: "cli:bob", decisionNote: "we still need api.example.com", revision: null });
    expect((await t.api("GET", "/v1/sandboxes/pr/policy")).body.revision).toBe(1);

    const before = snapshot();
    const again = await t.api("POST", `${base("pr")}/${p.id}/approve`, {}, undefined, approver());
    expect(again.status).toBe(409);
    expect(again.body.error.message).toBe(`cannot approve policy proposal ${p.id} of sandbox "pr": it was already rejected by cli:bob; only a pending proposal can be decided`);
    expect((await t.api("POST", `${base("pr")}/${p.id}/reject`, {}, undefined, approver())).status).toBe(409);
    expect(snapshot()).toBe(before);
    const events = (await t.gw.store.events((await t.api("GET", "/v1/sandboxes/pr")).body.id)).map((e) => e.message);
    expect(events.at(-1)).toBe(`policy proposal ${p.id} rejected by cli:bob: we still need api.example.com`);
  });

  it("an approved proposal cannot be approved again, even by two requests at once: one revision", async () => {
    await sandbox("pt");
    const p = await propose("pt", WIDER);
    const [a, b] = await Promise.all([0, 1].map(() => t.api("POST", `${base("pt")}/${p.id}/approve`, {}, undefined, approver())));
    expect([a!.status, b!.status].sort()).toEqual([200, 409]);
    const lost = a!.status === 409 ? a! : b!;
    expect(lost.body.error.message).toBe(`cannot approve policy proposal ${p.id} of sandbox "pt": it was already approved by approver as revision 2; only a pending proposal can be decided`);
    expect((await t.api("GET", "/v1/sandboxes/pt/policy")).body.revision).toBe(2);
  });
});

describe("a stale base: compare-and-set on the revision", () => {
  it("the policy changed since (policy set): approving is a 409, the proposal is superseded, the change made meanwhile stays", async () => {
    await sandbox("ps");
    const p = await propose("ps", WIDER);
    expect((await t.api("PUT", "/v1/sandboxes/ps/policy", { policy: TIGHTER })).status).toBe(200);
    const listed = await t.api("GET", base("ps"));
    expect(listed.body.proposals[0]).toMatchObject({ state: "pending", stale: true });

    const r = await t.api("POST", `${base("ps")}/${p.id}/approve`, {}, undefined, approver());
    expect(r.status).toBe(409);
    expect(r.body.error.code).toBe("stale_revision");
    expect(r.body.error.message).toBe(
      `the policy changed since; the proposal is stale: ${p.id} was proposed against revision 1, the active revision is 2; it is now superseded (propose the change again against the active policy)`,
    );
    const active = await t.api("GET", "/v1/sandboxes/ps/policy");
    expect(active.body).toMatchObject({ revision: 2, source: TIGHTER });
    const shown = await t.api("GET", `${base("ps")}/${p.id}`);
    expect(shown.body).toMatchObject({ state: "superseded", decidedBy: "gateway", decisionNote: "the policy changed since: proposed against revision 1, the active revision is 2", stale: false });
    const audit = await t.api("GET", "/v1/sandboxes/ps/audit?decision=policy");
    // The direct set between them is a record of its own, with the revision it made.
    expect(audit.body.audit.map((x: { event: { action: string } }) => x.event.action)).toEqual(["proposed", "set", "superseded"]);
    expect(audit.body.audit[1].event).toMatchObject({ type: "policy_set", by: "api", revision: 2, hash: expect.stringMatching(/^sha256:[0-9a-f]{64}$/) });
    const ocsf = await t.api("GET", "/v1/sandboxes/ps/audit?decision=policy&format=ocsf");
    expect(ocsf.body.audit[1]).toMatchObject({ class_uid: 6003, activity_name: "Update", message: "policy set by api: revision 2", api: { operation: "policy.set" }, resources: [{ uid: "2", type: "policy_revision" }] });
  });

  it("two proposals on the same revision, approved at once: exactly one wins, the other is superseded (no lost update)", async () => {
    await sandbox("pc");
    const one = await propose("pc", WIDER);
    const two = await propose("pc", TIGHTER);
    const [a, b] = await Promise.all([one, two].map((p) => t.api("POST", `${base("pc")}/${p.id}/approve`, {}, undefined, approver())));
    expect([a!.status, b!.status].sort()).toEqual([200, 409]);
    const [won, lost] = a!.status === 200 ? [one, two] : [two, one];
    const active = await t.api("GET", "/v1/sandboxes/pc/policy");
    expect(active.body.revision).toBe(2);
    expect(active.body.source).toBe(won === one ? WIDER : TIGHTER);
    const states = (await t.api("GET", base("pc"))).body.proposals.map((p: { id: string; state: string }) => [p.id, p.state]);
    expect(states).toEqual([one, two].map((p) => [p.id, p === lost ? "superseded" : "approved"]));
  });

  it("the store's compare-and-set: a stale expectation writes nothing; a failing approval rolls the revision back", async () => {
    const store = Store.open(":memory:");
    try {
      const s = await store.createSandbox({ host: "h1", id: "sbx_0000000000000001", name: "cas", spec: { env: {}, resources: { memoryMb: 256, cpus: 1, pids: 256 } }, policy: defaultPolicy() });
      const seen: string[] = [];
      store.onEvent((e) => seen.push(e.message ?? ""));
      await expect(store.addPolicy(s, defaultPolicy(), null, { expectRevision: 0 })).rejects.toThrow(StaleRevisionError);
      await expect(
        store.addPolicy(s, defaultPolicy(), null, {
          expectRevision: 1,
          within: async () => {
            throw new Error("decided meanwhile");
          },
        }),
      ).rejects.toThrow("decided meanwhile");
      expect((await store.policy(s.id))!.revision).toBe(1);
      expect(seen).toEqual([]);
      expect(await store.addPolicy(s, defaultPolicy(), null, { expectRevision: 1 })).toBe(2);
      expect(seen).toEqual(["policy revision 2 accepted"]);

      // A proposal is decided once; none is stored for a sandbox that is gone.
      const row = { id: "pp_0000000000000001", sandboxId: s.id, input: "version: 1\n", hash: "h", baseRevision: 2, proposedBy: "api", reason: null, createdAt: new Date().toISOString() };
      expect(insertProposal(store.db, row)).toBe(true);
      expect(insertProposal(store.db, { ...row, id: "pp_0000000000000002", sandboxId: "sbx_ffffffffffffffff" })).toBe(false);
      const decide = { at: new Date().toISOString(), by: "x", note: null, revision: null };
      expect(decideProposal(store.db, s.id, row.id, { ...decide, state: "rejected" })).toBe(true);
      expect(decideProposal(store.db, s.id, row.id, { ...decide, state: "approved" })).toBe(false);
      expect(listProposals(store.db, s.id).map((p) => p.state)).toEqual(["rejected"]);
      expect(pruneDecided(store.db, s.id, 0)).toBe(1);
    } finally {
      store.close();
    }
  });
});

describe("refusals change nothing", () => {
  it("an invalid policy is a 400 naming the problem, and nothing is stored", async () => {
    await sandbox("pi");
    const before = snapshot();
    const cases: [unknown, RegExp][] = [
      [{ policy: "version: 2\n" }, /^invalid policy: /],
      [{ policy: "version: 1\nnetwork:\n  rules:\n    - name: a\n      endpoints:\n        - { host: '*.com', port: 443, protocol: https }\n" }, /^invalid policy: /],
      [{ policy: "version: 1\nprocess:\n  limits: { pids: 20 }\n" }, /^invalid policy: process is fixed at creation and cannot change$/],
      [{ policy: `${ACTIVE}# \u001b[2Kapproved by security\n` }, /^invalid policy: a proposal is read by a person, so its text may hold no control or bidirectional characters; found U\+001B at character \d+$/],
      [{ policy: `${ACTIVE}# \u202etxet\n` }, /found U\+202E/],
      // The Arabic letter mark (a bidi control) and the invisible ones: zero-width space, word joiner, BOM.
      [{ policy: `${ACTIVE}# \u061c\n` }, /found U\+061C/],
      [{ policy: WIDER, reason: "safe\u200bchange" }, /^reason: must be printable text on one line; found U\+200B at character 5$/],
      [{ policy: WIDER, by: "mc\u2060p" }, /found U\+2060/],
      [{ policy: WIDER, reason: "o\ufeffk" }, /found U\+FEFF/],
      [{ policy: WIDER, reason: "fine\u001b[1A" }, /^reason: must be printable text on one line; found U\+001B at character 5$/],
      [{ policy: WIDER, reason: "two\nlines" }, /^reason: must be printable text on one line/],
      [{ policy: WIDER, reason: "x".repeat(1001) }, /^reason: must be at most 1000 characters; got 1001$/],
      [{ policy: WIDER, by: "" }, /^by: must be 1-64 characters; got 0$/],
      [{ policy: WIDER, by: "m".repeat(65) }, /^by: must be 1-64 characters; got 65$/],
      [{ policy: WIDER, extra: 1 }, /extra/],
      [{}, /policy/],
    ];
    for (const [body, message] of cases) {
      const r = await t.api("POST", base("pi"), body);
      expect(r.status, JSON.stringify(body).slice(0, 80)).toBe(400);
      expect(r.body.error.code).toBe("invalid_request");
      expect(r.body.error.message).toMatch(message);
    }
    const big = await t.api("POST", base("pi"), { policy: `${ACTIVE}#${"x".repeat(1 << 20)}\n` });
    expect(big.status).toBe(413);
    expect(snapshot()).toBe(before);
    expect((await t.api("GET", base("pi"))).body.proposals).toEqual([]);
  });

  it("a process.user a host account holds: refused at create naming the account; one an account took later still takes a tighter policy, and is not started again", async () => {
    const withUser = `${ACTIVE}process:\n  user: "4242:4242"\n`;
    driver.hostIdFiles = { ...driver.hostIdFiles, passwd: "mallory:x:4242:4242::/:/bin/sh\n" };
    const held = "process.user: uid 4242 is the uid of host user mallory (/etc/passwd); gid 4242 is the primary gid of host user mallory (/etc/passwd)";
    try {
      const created = await t.api("POST", "/v1/sandboxes", { name: "pu", policy: withUser });
      expect({ status: created.status, code: created.body.error?.code }).toEqual({ status: 400, code: "invalid_request" });
      expect(created.body.error.message).toContain(`invalid policy: ${held}`);
      expect((await t.api("GET", "/v1/sandboxes/pu")).status).toBe(404);
      // Made while the id was free; then an account takes it.
      driver.hostIdFiles = { ...driver.hostIdFiles, passwd: "" };
      expect((await t.api("POST", "/v1/sandboxes", { name: "pu", policy: withUser })).status).toBe(201);
      await until("pu", "Ready");
      const p = await propose("pu", `${withUser}# before the account\n`);
      driver.hostIdFiles = { ...driver.hostIdFiles, passwd: "mallory:x:4242:4242::/:/bin/sh\n" };
      // A policy change is never blocked by it (a tighter policy must always be possible)…
      expect((await t.api("PUT", "/v1/sandboxes/pu/policy", { policy: withUser })).status).toBe(200);
      expect((await t.api("POST", `${base("pu")}/${p.id}/approve`, { by: "cli:alice" }, undefined, approver())).status).toBe(409); // stale: the set came first
      // …but a new launch would run the workload as mallory: refused, naming the account.
      expect((await t.api("POST", "/v1/sandboxes/pu/stop")).status).toBe(202);
      await until("pu", "Stopped");
      const before = snapshot();
      const start = await t.api("POST", "/v1/sandboxes/pu/start");
      expect({ status: start.status, code: start.body.error?.code }).toEqual({ status: 400, code: "invalid_request" });
      expect(start.body.error.message).toBe(`sandbox "pu" cannot start: ${held}; a workload must run as ids that no host account, group or subordinate range holds, nor the supervisor (without process.user it runs as the gateway's workload id); delete it and create it with other ids`);
      expect(snapshot()).toBe(before);
      expect((await t.api("GET", "/v1/sandboxes/pu")).body.phase).toBe("Stopped");
    } finally {
      driver.hostIdFiles = { ...driver.hostIdFiles, passwd: "" };
    }
  });

  it("ids: a malformed one is a 400 naming the form, an unknown one a 404, an unknown sandbox a 404", async () => {
    await sandbox("pd");
    const bad = await t.api("GET", `${base("pd")}/pp_xyz`);
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toBe('invalid proposal id "pp_xyz": expected pp_ and 16 hex digits, as policy propose printed');
    const unknown = await t.api("GET", `${base("pd")}/pp_0123456789abcdef`);
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.message).toMatch(/^no policy proposal pp_0123456789abcdef for sandbox "pd"/);
    expect((await t.api("POST", `${base("pd")}/pp_0123456789abcdef/approve`, {}, undefined, approver())).status).toBe(404);
    expect((await t.api("POST", base("nope"), { policy: WIDER })).status).toBe(404);
    expect((await t.api("GET", `${base("pd")}?state=maybe`)).status).toBe(400);
  });
});

describe("bounds", () => {
  it(`at most ${PENDING} pending per sandbox: the next is a 409 naming the limit; deciding one makes room; ${KEPT} decided kept`, async () => {
    await sandbox("pb");
    const ids: string[] = [];
    for (let i = 0; i < PENDING; i++) ids.push((await propose("pb", WIDER, { reason: `try ${i}` })).id);
    const before = snapshot();
    const full = await t.api("POST", base("pb"), { policy: WIDER });
    expect(full.status).toBe(409);
    expect(full.body.error.message).toBe(`sandbox "pb" has ${PENDING} pending policy proposals, the limit (gateway start --proposals-pending); a person approves or rejects one first (sandgate policy proposals pb)`);
    expect(snapshot()).toBe(before);

    const states = async () => (await t.api("GET", base("pb"))).body.proposals.map((p: { id: string; state: string }) => [p.id, p.state]);
    for (const id of ids) expect((await t.api("POST", `${base("pb")}/${id}/reject`, {}, undefined, approver())).status).toBe(200);
    // The oldest decided one went at once; the two most recently decided stay.
    expect(await states()).toEqual([[ids[1], "rejected"], [ids[2], "rejected"]]);
    ids.push((await propose("pb", WIDER)).id);
    expect(await states()).toEqual([[ids[1], "rejected"], [ids[2], "rejected"], [ids[3], "pending"]]);
    // An approval is a decision too.
    expect((await t.api("POST", `${base("pb")}/${ids[3]}/approve`, {}, undefined, approver())).status).toBe(200);
    expect(await states()).toEqual([[ids[2], "rejected"], [ids[3], "approved"]]);
  });

  it("pending proposals against an older revision make room: a new proposal supersedes them", async () => {
    await sandbox("pm");
    const old: string[] = [];
    for (let i = 0; i < PENDING; i++) old.push((await propose("pm", WIDER)).id);
    expect((await t.api("PUT", "/v1/sandboxes/pm/policy", { policy: TIGHTER })).status).toBe(200);
    const fresh = await propose("pm", ACTIVE);
    expect(fresh.baseRevision).toBe(2);
    const list = (await t.api("GET", base("pm"))).body.proposals as { id: string; state: string }[];
    expect(list.filter((p) => p.state === "pending").map((p) => p.id)).toEqual([fresh.id]);
    expect(list.filter((p) => p.state === "superseded")).toHaveLength(KEPT);
  });
});

describe("who may decide", () => {
  it("the API token alone cannot approve or reject: no approver header, a wrong one, the API token in its place are 403; nothing changes", async () => {
    await sandbox("pw");
    const p = await propose("pw", WIDER);
    expect(statSync(t.home.approverToken).mode & 0o777).toBe(0o600);
    expect(t.approverToken).not.toBe(t.token);
    const before = snapshot();
    for (const verb of ["approve", "reject"]) {
      const attempts: Record<string, string>[] = [{}, { [APPROVER_HEADER]: "wrong" }, { [APPROVER_HEADER]: t.token }, { [APPROVER_HEADER]: t.approverToken.slice(0, -1) }];
      for (const headers of attempts) {
        const r = await t.api("POST", `${base("pw")}/${p.id}/${verb}`, {}, undefined, headers);
        expect(r.status, `${verb} ${JSON.stringify(headers)}`).toBe(403);
        expect(r.body.error.code).toBe("forbidden");
        expect(r.body.error.message).toMatch(/the API token alone cannot approve or reject/);
      }
      // The approver token in the API token's place is not enough either.
      const alone = await t.api("POST", `${base("pw")}/${p.id}/${verb}`, {}, t.approverToken, approver());
      expect(alone.status).toBe(401);
    }
    expect(snapshot()).toBe(before);
    expect((await t.api("GET", `${base("pw")}/${p.id}`)).body.state).toBe("pending");
  });

  it("approverMatches: only exactly the token; no token configured matches nothing", () => {
    expect(approverMatches("abc", "abc")).toBe(true);
    expect(approverMatches("abcd", "abc")).toBe(false);
    expect(approverMatches(["abc"], "abc")).toBe(false);
    expect(approverMatches(undefined, "abc")).toBe(false);
    expect(approverMatches("", null)).toBe(false);
  });
});

describe("with the sandbox", () => {
  it("deleting the sandbox deletes its proposals; a new sandbox of that name has none", async () => {
    const s = await sandbox("px");
    await propose("px", WIDER);
    expect((await t.api("DELETE", "/v1/sandboxes/px")).status).toBe(202);
    await eventually(async () => ((await t.api("GET", "/v1/sandboxes/px")).status === 404 ? true : undefined), 30_000, "px deleted");
    expect(t.gw.sqlite!.db.prepare("SELECT count(*) AS n FROM policy_proposals WHERE sandbox_id = ?").get(s.id)).toEqual({ n: 0 });
    await sandbox("px");
    expect((await t.api("GET", base("px"))).body.proposals).toEqual([]);
  });

  it("proposals survive a gateway restart, and are decided after it", async () => {
    const driver = new MemoryDriver();
    const first = await startTestGateway(driver);
    expect((await first.api("POST", "/v1/sandboxes", { name: "pg", policy: ACTIVE })).status).toBe(201);
    const p = await first.api("POST", base("pg"), { policy: WIDER });
    expect(p.status).toBe(201);
    await first.close({ keepHome: true });
    const second = await startTestGateway(driver, { homeDir: first.home.dir });
    try {
      expect(second.approverToken).toBe(first.approverToken);
      const r = await second.api("POST", `${base("pg")}/${p.body.id}/approve`, {}, undefined, { [APPROVER_HEADER]: second.approverToken });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect(r.body.revision).toBe(2);
    } finally {
      await second.close();
    }
  });
});

describe("--proposals-kept 0: nothing decided is kept", () => {
  let t0: TestGateway;
  beforeAll(async () => {
    t0 = await startTestGateway(new MemoryDriver(), { proposals: { pending: PENDING, kept: 0 } });
  });
  afterAll(async () => {
    await t0.close();
  });

  it("approve and reject still answer what they decided (the row is already pruned), and the approval is applied", async () => {
    expect((await t0.api("POST", "/v1/sandboxes", { name: "k0", policy: ACTIVE })).status).toBe(201);
    const headers = { [APPROVER_HEADER]: t0.approverToken };
    const a = (await t0.api("POST", base("k0"), { policy: WIDER })).body as { id: string };
    const ok = await t0.api("POST", `${base("k0")}/${a.id}/approve`, {}, undefined, headers);
    expect([ok.status, ok.body.proposal?.state, ok.body.revision]).toEqual([200, "approved", 2]);
    expect((await t0.api("GET", "/v1/sandboxes/k0/policy")).body.revision).toBe(2);
    const b = (await t0.api("POST", base("k0"), { policy: ACTIVE })).body as { id: string };
    const no = await t0.api("POST", `${base("k0")}/${b.id}/reject`, { reason: "no" }, undefined, headers);
    expect([no.status, no.body.state, no.body.decisionNote]).toEqual([200, "rejected", "no"]);
    expect((await t0.api("GET", base("k0"))).body.proposals).toEqual([]);
  });
});
