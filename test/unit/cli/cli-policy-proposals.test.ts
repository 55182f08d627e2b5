// `sandgate policy propose|proposals|approve|reject`: the real CLI against a real gateway
// (in-memory driver test double): tables and JSON, the diff and replay of a proposal, the
// approver token read from the home (and refused without it), exit codes of each refusal.
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { buildProgram } from "../../../src/cli/program.js";
import { completionTree } from "../../../src/cli/completion.js";
import { age, printable } from "../../../src/cli/policy-proposals.js";
import { CLI_TEST_TIMEOUT_MS, cli } from "../../support/cli-runner.js";
import { eventually, startTestGateway, type TestGateway } from "../../support/gateway-fixture.js";
import { MemoryDriver } from "../../support/memory-driver.js";
import { ACTIVE, TIGHTER } from "../../support/review-policies.js";
import { listenOnSocket } from "../../support/api-client.js";

// Spawn-heavy: see CLI_TEST_TIMEOUT_MS.
vi.setConfig({ testTimeout: CLI_TEST_TIMEOUT_MS });

const WIDER = `${ACTIVE}    - name: pypi
      endpoints:
        - { host: pypi.org, port: 443, protocol: https }
`;

let t: TestGateway;
let dir: string;
const run = (...args: string[]) => cli(["--home", t.home.dir, ...args]);

async function sandbox(name: string): Promise<string> {
  expect((await t.api("POST", "/v1/sandboxes", { name, policy: ACTIVE })).status).toBe(201);
  return eventually(async () => {
    const r = await t.api("GET", `/v1/sandboxes/${name}`);
    return r.body?.phase === "Ready" ? (r.body.id as string) : undefined;
  }, 30_000, `${name} Ready`);
}

const proposeJson = async (name: string, file: string, ...extra: string[]) => {
  const r = await run("policy", "propose", name, "-f", join(dir, file), "--json", ...extra);
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as { id: string; proposedBy: string; reason: string | null };
};

beforeAll(async () => {
  t = await startTestGateway(new MemoryDriver());
  dir = mkdtempSync(join(tmpdir(), "sg-proposals-"));
  writeFileSync(join(dir, "wider.yaml"), WIDER);
  writeFileSync(join(dir, "tighter.yaml"), TIGHTER);
  writeFileSync(join(dir, "bad.yaml"), "version: 1\nnetwork:\n  rules:\n    - name: x\n      endpoints: [{ host: 'a b', port: 99999, protocol: https }]\n");
});
afterAll(async () => {
  await t.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("propose, review, approve from the CLI", () => {
  it("propose → proposals (table) → proposals ID (diff, replay) → approve: the new revision, in events and audit", async () => {
    const id = await sandbox("cp1");
    await t.gw.store.appendAudit([
      { sandboxId: id, generation: 1, time: "2026-12-01T02:00:00.000Z", decision: "deny", count: 4, event: { type: "egress", time: "2026-12-01T02:00:00.000Z", decision: "deny", host: "pypi.org", port: 443, protocol: "https", reason: "no_matching_rule" } },
    ]);
    const p = await run("policy", "propose", "cp1", "-f", join(dir, "wider.yaml"), "--reason", "pip needs pypi.org");
    expect(p.code, p.stderr).toBe(0);
    const m = /^(pp_[0-9a-f]{16}) {2}pending against revision 1\n$/.exec(p.stdout);
    expect(m, p.stdout).not.toBeNull();
    const pid = m![1]!;
    expect(p.stderr).toBe(`review it with: sandgate policy proposals cp1 ${pid}; a person decides with: sandgate policy approve|reject cp1 ${pid}\n`);

    const brief = await run("policy", "proposals", "cp1", "--brief");
    expect(brief.code, brief.stderr).toBe(0);
    const lines = brief.stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^ID +STATE +AGE +BY +REASON$/);
    expect(lines[1]).toMatch(new RegExp(`^${pid} +pending +\\d+[smhd] +cli:\\S+ +pip needs pypi.org$`));
    expect(lines).toHaveLength(2);

    const shown = await run("policy", "proposals", "cp1", pid);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toContain(`proposal ${pid} of cp1: pending\n`);
    expect(shown.stdout).toContain("reason: pip needs pypi.org\n");
    expect(shown.stdout).toContain("diff:\nagainst revision 1:\nrule added: pypi\n  + https pypi.org:443\n");
    expect(shown.stdout).toContain("replay of the recorded traffic under it:\naudit window: 4 requests in 1 record, 2026-12-01T02:00:00.000Z to 2026-12-01T02:00:00.000Z\n");
    expect(shown.stdout).toMatch(/newly allowed: \nCOUNT +LAST SEEN +REQUEST +BECAUSE\n4 +2026-12-01T02:00:00.000Z +https pypi.org:443 +rule pypi\n/);
    // Without --brief: the table, then each pending one's diff and replay, the same text.
    const all = await run("policy", "proposals", "cp1");
    expect(all.code, all.stderr).toBe(0);
    const [table, ...details] = all.stdout.split("\n\n");
    expect(table!.split("\n").map((l) => l.split(/ +/)[0])).toEqual(["ID", pid]);
    expect(details.join("\n\n")).toBe(shown.stdout);

    const ok = await run("policy", "approve", "cp1", pid);
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout).toBe(`cp1  policy proposal ${pid} approved: revision 2\n`);
    const get = await run("policy", "get", "cp1");
    expect(get.stdout).toMatch(/^# revision 2, accepted /);
    expect(get.stdout).toContain("name: pypi");

    const approved = await run("policy", "proposals", "cp1", "--state", "approved", "--json");
    expect(JSON.parse(approved.stdout)).toMatchObject([{ id: pid, state: "approved", revision: 2, proposedBy: expect.stringMatching(/^cli:/), decidedBy: expect.stringMatching(/^cli:/) }]);
    expect((await run("policy", "proposals", "cp1", "--state", "pending")).stdout).toBe("no pending policy proposals\n");

    const events = await run("sandbox", "events", "cp1");
    expect(events.stdout).toMatch(new RegExp(`policy proposal ${pid} by cli:\\S+ against revision 1: pip needs pypi.org[\\s\\S]*policy revision 2 accepted[\\s\\S]*policy proposal ${pid} approved by cli:\\S+: revision 2`));
    const audit = await run("audit", "cp1", "--decision", "policy");
    expect(audit.code, audit.stderr).toBe(0);
    expect(audit.stdout).toMatch(new RegExp(`policy +1 +policy proposal ${pid} proposed +- +by cli:\\S+: pip needs pypi.org\\n`));
    expect(audit.stdout).toMatch(new RegExp(`policy +1 +policy proposal ${pid} approved \\(revision 2\\) +- +by cli:\\S+: pip needs pypi.org\\n`));
    // A direct policy set is a record of its own.
    const set = await run("policy", "set", "cp1", "--policy", join(dir, "tighter.yaml"));
    expect(set.code, set.stderr).toBe(0);
    expect((await run("audit", "cp1", "--decision", "policy")).stdout).toMatch(/policy +1 +policy set \(revision 3\) +- +by api\n$/);
  });

  it("reject --reason; --json of each verb; approve --wait when no supervisor acknowledges: exit 6, the revision stored", async () => {
    await sandbox("cp2");
    const a = await proposeJson("cp2", "tighter.yaml", "--reason", "smaller");
    expect(a).toMatchObject({ proposedBy: expect.stringMatching(/^cli:/), reason: "smaller" });
    const rej = await run("policy", "reject", "cp2", a.id, "--reason", "we still need api.example.com");
    expect(rej.code, rej.stderr).toBe(0);
    expect(rej.stdout).toBe(`cp2  policy proposal ${a.id} rejected\n`);
    const shown = await run("policy", "proposals", "cp2", a.id);
    expect(shown.stdout).toMatch(new RegExp(`rejected [0-9-]+ [0-9:]+Z by cli:\\S+: we still need api.example.com\\n`));

    const b = await proposeJson("cp2", "wider.yaml");
    // The memory driver has no supervisor: --wait cannot see the revision enforced.
    const wait = await run("policy", "approve", "cp2", b.id, "--wait", "--timeout", "1", "--json");
    expect(wait.code).toBe(6);
    expect(JSON.parse(wait.stdout)).toMatchObject({ revision: 2, enforced: false, proposal: { state: "approved" } });
    expect(wait.stderr).toBe("sandgate: revision 2 is stored but the supervisor did not acknowledge it within 1 s (-)\n");
  });
});

describe("what the person reviewing sees", () => {
  // An agent asks for a gateway secret on a host the policy already allows: no rule is
  // added or removed, yet the person must see the credential, in the diff and in the text.
  it("a proposal that only adds a credential to an allowed endpoint shows it in the diff and the policy text", async () => {
    await sandbox("cp5");
    const cred = ACTIVE.replace(
      "        - { host: api.example.com, port: 443, protocol: https }\n",
      '        - host: api.example.com\n          port: 443\n          protocol: https\n          credentials: [{ header: authorization, value: "token {{secret:deploy-key}}" }]\n',
    );
    expect(cred).not.toBe(ACTIVE);
    writeFileSync(join(dir, "cred.yaml"), cred);
    const p = await proposeJson("cp5", "cred.yaml");
    const shown = await run("policy", "proposals", "cp5", p.id);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toContain(
      'diff:\nagainst revision 1:\nrule changed: api\n  - https api.example.com:443\n  + https api.example.com:443 tls terminate credentials [header authorization: "token {{secret:deploy-key}}"]\n',
    );
    expect(shown.stdout).not.toContain("no change");
    expect(shown.stdout).toContain(`\npolicy:\n${cred.trimEnd().split("\n").map((l) => `  ${l}`).join("\n")}\n`);
  });
});

describe("refusals: one line, the documented exit code, nothing changed", () => {
  it("without the approver token (another home with the API token only) approve and reject are exit 7 and nothing is sent", async () => {
    await sandbox("cp3");
    const p = await proposeJson("cp3", "wider.yaml");
    const agentHome = mkdtempSync(join(tmpdir(), "sg-agent-home-"));
    try {
      // What an agent's client holds: the address and the API token, no approver token.
      copyFileSync(t.home.address, join(agentHome, "gateway.json"));
      copyFileSync(t.home.token, join(agentHome, "token"));
      for (const verb of ["approve", "reject"]) {
        const r = await cli(["--home", agentHome, "policy", verb, "cp3", p.id]);
        expect(r.code, r.stderr).toBe(7);
        expect(r.stderr).toBe(
          `sandgate: cannot read the approver token ${join(agentHome, "approver-token")} (ENOENT): deciding a policy proposal needs it; run this as the account that runs the gateway, with its --home (the gateway creates the file when it starts)\n`,
        );
      }
      // A wrong approver token is the gateway's 403: exit 7 too.
      writeFileSync(join(agentHome, "approver-token"), "guessed\n", { mode: 0o600 });
      const wrong = await cli(["--home", agentHome, "policy", "approve", "cp3", p.id]);
      expect(wrong.code).toBe(7);
      expect(wrong.stderr).toMatch(/^sandgate: deciding a policy proposal needs the approver token .*the API token alone cannot approve or reject\n$/);
      // It may still propose and read.
      expect((await cli(["--home", agentHome, "policy", "proposals", "cp3"])).code).toBe(0);
      // The person's home, but an address elsewhere (--url, SANDGATE_URL): the token is not sent there.
      const seen: string[] = [];
      const elsewhere = createServer((req, res) => {
        seen.push(`${req.method ?? "?"} ${req.url ?? "?"}`);
        res.writeHead(500).end();
      });
      // Another socket of the same user, which the gateway's home does not record.
      const url = await listenOnSocket(elsewhere);
      try {
        for (const args of [["--url", url], []]) {
          const r = await cli(["--home", t.home.dir, ...args, "policy", "approve", "cp3", p.id], args.length === 0 ? { SANDGATE_URL: url } : {});
          expect(r.code, r.stderr).toBe(7);
          expect(r.stderr).toMatch(new RegExp(`^sandgate: the approver token of ${t.home.dir} goes only to the gateway that home records \\(unix://${t.home.socket}\\), not to ${url}: `));
        }
        expect(seen).toEqual([]);
      } finally {
        elsewhere.close();
      }
    } finally {
      rmSync(agentHome, { recursive: true, force: true });
    }
    expect((await t.api("GET", `/v1/sandboxes/cp3/policy/proposals/${p.id}`)).body.state).toBe("pending");
    expect((await t.api("GET", "/v1/sandboxes/cp3/policy")).body.revision).toBe(1);
    // The recorded address given explicitly is the same gateway: sent.
    const same = await cli(["--home", t.home.dir, "--url", (JSON.parse(readFileSync(t.home.address, "utf8")) as { url: string }).url, "policy", "reject", "cp3", p.id]);
    expect(same.code, same.stderr).toBe(0);
  });

  it("a stale proposal is exit 5 naming why; an invalid policy or flag exit 2; an unknown id 4", async () => {
    await sandbox("cp4");
    const p = await proposeJson("cp4", "wider.yaml");
    expect((await run("policy", "set", "cp4", "--policy", join(dir, "tighter.yaml"))).code).toBe(0);
    const stale = await run("policy", "approve", "cp4", p.id);
    expect(stale.code).toBe(5);
    expect(stale.stderr).toBe(
      `sandgate: the policy changed since; the proposal is stale: ${p.id} was proposed against revision 1, the active revision is 2; it is now superseded (propose the change again against the active policy)\n`,
    );
    const list = await run("policy", "proposals", "cp4");
    expect(list.stdout).toMatch(new RegExp(`${p.id} +superseded `));

    const before = (await t.api("GET", "/v1/sandboxes/cp4/policy/proposals")).body;
    const bad = await run("policy", "propose", "cp4", "-f", join(dir, "bad.yaml"));
    expect(bad.code).toBe(2);
    expect(bad.stderr.trim().split("\n")).toHaveLength(1);
    expect(bad.stderr).toMatch(/^sandgate: invalid policy: /);
    expect((await run("policy", "propose", "cp4", "-f", join(dir, "missing.yaml"))).code).toBe(2);
    const reason = await run("policy", "propose", "cp4", "-f", join(dir, "wider.yaml"), "--reason", "a\u001b[2Kb");
    expect(reason.code).toBe(2);
    expect(reason.stderr).toBe("sandgate: reason: must be printable text on one line; found U+001B at character 2\n");
    expect((await t.api("GET", "/v1/sandboxes/cp4/policy/proposals")).body).toEqual(before);

    const state = await run("policy", "proposals", "cp4", "--state", "maybe");
    expect(state.code).toBe(2);
    expect(state.stderr).toMatch(/maybe/);
    const malformed = await run("policy", "proposals", "cp4", "pp_1");
    expect(malformed.code).toBe(2);
    expect(malformed.stderr).toBe('sandgate: invalid proposal id "pp_1": expected pp_ and 16 hex digits, as policy propose printed\n');
    const unknown = await run("policy", "approve", "cp4", "pp_0123456789abcdef");
    expect(unknown.code).toBe(4);
    expect((await run("policy", "proposals", "nope")).code).toBe(4);
  });
});

describe("help and completion", () => {
  it("policy --help lists the four verbs; each has help with an example", async () => {
    const r = await cli(["policy", "--help"]);
    for (const verb of ["propose", "proposals", "approve", "reject"]) expect(r.stdout).toMatch(new RegExp(`\\n  ${verb} `));
    const approve = await cli(["policy", "approve", "--help"]);
    expect(approve.stdout).toContain("Needs the approver token: <home>/approver-token");
    expect(approve.stdout).toContain("E.g. sandgate policy approve demo pp_3f2a9c0e51d27b84 --wait");
  });

  it("completion picks the new commands up: their options, --state's choices, and the sandbox name argument", () => {
    const tree = completionTree(buildProgram());
    const node = (path: string) => tree.find((n) => n.path === path)!;
    expect(node("policy").commands.map((c) => c.name)).toEqual(expect.arrayContaining(["propose", "proposals", "approve", "reject"]));
    for (const verb of ["propose", "proposals", "approve", "reject"]) expect(node(`policy ${verb}`).sandboxArg).toBe(0);
    expect(node("policy proposals").options.find((o) => o.flags.includes("--state"))?.choices).toEqual(["pending", "approved", "rejected", "superseded"]);
    expect(node("policy propose").options.map((o) => o.flags)).toEqual(expect.arrayContaining([["-f", "--policy"], ["--reason"]]));
  });

  it("printable and age", () => {
    expect(printable("ok \u001b[2K\u202e x\ty")).toBe("ok \\u{1b}[2K\\u{202e} x\ty");
    expect(printable("a\u061cb\u200bc\u2060d\ufeffe")).toBe("a\\u{61c}b\\u{200b}c\\u{2060}d\\u{feff}e");
    expect(age("2026-12-01T00:00:00Z", Date.parse("2026-12-01T00:00:59Z"))).toBe("59s");
    expect(age("2026-12-01T00:00:00Z", Date.parse("2026-12-01T00:59:59Z"))).toBe("59m");
    expect(age("2026-12-01T00:00:00Z", Date.parse("2026-12-01T23:00:00Z"))).toBe("23h");
    expect(age("2026-12-01T00:00:00Z", Date.parse("2026-12-03T00:00:00Z"))).toBe("2d");
    expect(age("garbage")).toBe("-");
  });
});
