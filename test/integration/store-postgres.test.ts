// The seed's guarantees with the state on PostgreSQL (`--store postgres://…`): a real
// server (a throwaway cluster), a real dockerd with live-restore that the test restarts.
// A daemon restart is still no false Error, the same containers are kept, exec and the
// egress policy work after it; a gateway restarted on the same database adopts its
// sandboxes as it does from its SQLite file.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deleteAllAndCheckMonitors, startDockerFixture, type DockerFixture } from "../support/docker-fixture.js";
import { startPostgres, type PostgresCluster } from "../support/postgres.js";
import { ORIGIN_POLICY, PROXY_GET, createReady, execIn, phaseLog, startOrigin, waitPhase } from "../support/recovery-helpers.js";

let pg: PostgresCluster;
let fx: DockerFixture;
let origin: string;

beforeAll(async () => {
  pg = startPostgres();
  fx = await startDockerFixture({ liveRestore: true, name: "pgs", service: { recoveryDeadlineMs: 45_000 }, store: { kind: "postgres", url: pg.createDatabase("seed") } });
  origin = await startOrigin(fx, "origin-pgs");
}, 180_000);
afterAll(async () => {
  if (fx) await deleteAllAndCheckMonitors(fx);
  await fx?.close();
  pg?.stop();
});

describe("the seed's guarantees on PostgreSQL", () => {
  it("daemon restart with live-restore: Ready → Recovering → Ready, same containers, workspace kept, exec and policy work", async () => {
    expect(fx.t.gw.sqlite).toBeNull();
    const before = await createReady(fx, "pg1", { policy: ORIGIN_POLICY(origin) });
    expect((await execIn(fx, "pg1", ["sh", "-c", "echo kept > /sandbox/note.txt"])).code).toBe(0);
    await fx.dockerd.restart({ downMs: 1500 });
    const after = await waitPhase(fx, "pg1", "Ready", 60_000);
    expect(await phaseLog(fx, "pg1")).toEqual(["-→Provisioning", "Provisioning→Ready", "Ready→Recovering", "Recovering→Ready"]);
    expect(after.runtime.workload.id).toBe(before.runtime.workload.id);
    expect(after.runtime.supervisor.id).toBe(before.runtime.supervisor.id);
    expect(after.generation).toBe(1);
    expect((await execIn(fx, "pg1", ["cat", "/sandbox/note.txt"])).stdout).toBe("kept\n");
    expect((await execIn(fx, "pg1", PROXY_GET(`http://${origin}:8080/after`))).stdout).toBe("200 hello from origin /after\n");
    expect((await execIn(fx, "pg1", PROXY_GET("http://denied.test/"))).stdout).toMatch(/^403 .*"error":"policy_denied"/);
  });

  it("a gateway restarted on the same database adopts its sandboxes: the same containers, Ready, no Error, exec works", async () => {
    const before = await createReady(fx, "pg2");
    await fx.restartGateway();
    const after = await waitPhase(fx, "pg2", "Ready", 60_000);
    expect(after.runtime.workload.id).toBe(before.runtime.workload.id);
    expect(after.runtime.supervisor.id).toBe(before.runtime.supervisor.id);
    expect((await phaseLog(fx, "pg2")).some((p) => p.includes("Error"))).toBe(false);
    expect((await execIn(fx, "pg2", ["echo", "hi"])).stdout).toBe("hi\n");
    // The other sandbox is adopted too (through its own re-verification: it may come later).
    expect((await waitPhase(fx, "pg1", "Ready", 60_000)).runtime.workload.id).toBeTruthy();
    expect((await phaseLog(fx, "pg1")).some((p) => p.includes("Error"))).toBe(false);
  });
});
