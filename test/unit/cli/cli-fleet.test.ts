// `sandgate fleet status` and `sandbox create --host` on the embedded store (one host), as a
// user meets them: the real CLI process against a real gateway (HTTP + SQLite) on the
// in-memory driver test double. Two hosts on PostgreSQL: test/integration/fleet-hosts.test.ts.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cli } from "../../support/cli-runner.js";
import { MemoryDriver } from "../../support/memory-driver.js";
import { startTestGateway, type TestGateway } from "../../support/gateway-fixture.js";

let t: TestGateway;
let home: string[];
beforeAll(async () => {
  t = await startTestGateway(new MemoryDriver(), { hostName: "h-test" });
  home = ["--home", t.home.dir];
});
afterAll(async () => {
  await t?.close();
});

describe("fleet status and create --host on the embedded store", () => {
  it("GET /v1/fleet and `fleet status`: the one host, this gateway's, driven, with its sandboxes", async () => {
    expect((await t.api("POST", "/v1/sandboxes", { name: "one" })).status).toBe(201);
    const f = await t.api("GET", "/v1/fleet");
    expect(f.status).toBe(200);
    expect(f.body).toEqual({ store: "sqlite", host: "h-test", hosts: [{ host: "h-test", self: true, driven: true, lease: null, live: 1, total: 1 }] });
    const r = await cli([...home, "fleet", "status"]);
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^store: the embedded SQLite store/);
    expect(lines[1]).toMatch(/^HOST\s+STATE\s+LEASE HELD BY\s+EPOCH\s+SINCE\s+LIVE\s+SANDBOXES$/);
    expect(lines[2]).toMatch(/^h-test \(this\)\s+driven\s+-\s+-\s+-\s+1\s+1$/);
    const json = await cli([...home, "fleet", "status", "--json"]);
    expect(JSON.parse(json.stdout)).toEqual(f.body);
  });

  it("create --host: this host is accepted; another is refused (not a fleet) and a bad name is a usage error, each one line, nothing created", async () => {
    const own = await cli([...home, "sandbox", "create", "here", "--host", "h-test", "--no-wait"]);
    expect(own.code, own.stderr).toBe(0);
    expect((await t.api("GET", "/v1/sandboxes/here")).body.host).toBe("h-test");
    const other = await cli([...home, "sandbox", "create", "there", "--host", "h2"]);
    expect(other.code).toBe(5);
    expect(other.stderr.trim()).toBe(`sandgate: host: "h2" is not this gateway's host "h-test", and its store is not a fleet's (--store postgres://…, docs/fleet.md): leave --host out`);
    const bad = await cli([...home, "sandbox", "create", "there", "--host", "a b"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr.trim()).toBe(`sandgate: --host: "a b" is not a host name; allowed: 1–63 letters, digits, '.', '_' or '-', starting with a letter or digit`);
    expect((await t.api("GET", "/v1/sandboxes/there")).status).toBe(404);
  });
});
