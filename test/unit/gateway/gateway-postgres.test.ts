// The gateway on PostgreSQL (`--store postgres://…`): a real server (a throwaway cluster,
// test/support/postgres.ts) behind the real API, on the in-memory driver test double.
// What the embedded store does the shared one does too, and an outage of the database is
// a 503 with one clear line, not a crash; when it is back, nothing is lost.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MemoryDriver } from "../../support/memory-driver.js";
import { eventually, startTestGateway } from "../../support/gateway-fixture.js";
import { startPostgres, type PostgresCluster } from "../../support/postgres.js";

let pg: PostgresCluster;
beforeAll(() => {
  pg = startPostgres();
});
afterAll(() => pg.stop());

describe("a gateway on PostgreSQL", () => {
  it("creates, lists by label, reads events of and deletes sandboxes as on SQLite", async () => {
    const url = pg.createDatabase("gw_basic");
    const t = await startTestGateway(new MemoryDriver(), { store: { kind: "postgres", url } });
    try {
      expect(t.gw.sqlite).toBeNull();
      expect((await t.api("POST", "/v1/sandboxes", { name: "one", labels: { team: "x" } })).status).toBe(201);
      await eventually(async () => ((await t.api("GET", "/v1/sandboxes/one")).body.phase === "Ready" ? true : undefined), 30_000, "one Ready");
      const list = await t.api("GET", "/v1/sandboxes?label=team=x");
      expect(list.body.sandboxes.map((s: { name: string }) => s.name)).toEqual(["one"]);
      const events = await t.api("GET", "/v1/sandboxes/one/events");
      expect(events.body.events.filter((e: { kind: string }) => e.kind === "phase").map((e: { newPhase: string | null }) => e.newPhase)).toEqual(["Provisioning", "Ready"]);
      expect((await t.api("DELETE", "/v1/sandboxes/one")).status).toBeLessThan(300);
      await eventually(async () => ((await t.api("GET", "/v1/sandboxes/one")).status === 404 ? true : undefined), 30_000, "one deleted");
      expect((await t.api("POST", "/v1/sandboxes", { name: "two" })).status).toBe(201);
      await eventually(async () => ((await t.api("GET", "/v1/sandboxes/two")).body.phase === "Ready" ? true : undefined), 30_000, "two Ready");
    } finally {
      await t.close();
    }
  });

  it("PostgreSQL stopped: what needs the store answers 503 with one line; the gateway keeps running; restarted: the sandboxes are all there and a create works", async () => {
    const cluster = startPostgres();
    try {
      const url = cluster.createDatabase("gw_outage");
      const t = await startTestGateway(new MemoryDriver(), { store: { kind: "postgres", url } });
      try {
        expect((await t.api("POST", "/v1/sandboxes", { name: "kept" })).status).toBe(201);
        await eventually(async () => ((await t.api("GET", "/v1/sandboxes/kept")).body.phase === "Ready" ? true : undefined), 30_000, "kept Ready");
        cluster.stopServer();
        const down = await t.api("GET", "/v1/sandboxes");
        expect(down.status).toBe(503);
        expect(down.body.error.code).toBe("unavailable");
        expect(down.body.error.message).toMatch(/^the state database \(PostgreSQL\) cannot be reached: .*; try again when it is back$/);
        expect(down.body.error.message).not.toContain("\n");
        expect((await t.api("POST", "/v1/sandboxes", { name: "refused" })).status).toBe(503);
        cluster.startServer();
        const back = await eventually(async () => {
          const r = await t.api("GET", "/v1/sandboxes");
          return r.status === 200 ? r : undefined;
        }, 30_000, "the list to answer again");
        expect(back.body.sandboxes.map((s: { name: string; phase: string }) => [s.name, s.phase])).toEqual([["kept", "Ready"]]);
        expect((await t.api("POST", "/v1/sandboxes", { name: "after" })).status).toBe(201);
        await eventually(async () => ((await t.api("GET", "/v1/sandboxes/after")).body.phase === "Ready" ? true : undefined), 30_000, "after Ready");
      } finally {
        await t.close();
      }
    } finally {
      cluster.stop();
    }
  });

  it("a database that cannot be reached stops the start with one line that names it without its password", async () => {
    const url = `postgres://sandgate:hunter2@localhost/none?host=${encodeURIComponent(`${pg.dir}/nowhere`)}`;
    const err = (await startTestGateway(new MemoryDriver(), { store: { kind: "postgres", url } }).catch((e: unknown) => e)) as Error;
    expect(err.message).toMatch(/^cannot use the state database postgres:\/\/sandgate:\*\*\*@localhost\/none\?host=.*: the state database \(PostgreSQL\) cannot be reached/);
    expect(err.message).not.toContain("hunter2");
    expect(err.message).not.toContain("\n");
  });
});
