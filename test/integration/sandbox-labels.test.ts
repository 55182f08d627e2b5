// User labels never reach Docker: on a real private dockerd, a labelled sandbox's
// containers, network and volume carry exactly the gateway's identity labels (plus the
// image's own), and a create that tries to set an identity label is refused before any
// Docker object exists. The labelled sandbox is then filtered, re-verified after a
// gateway restart (its identity intact) and pruned through the real CLI.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LABEL, containerLabels, sandboxLabels } from "../../src/driver/docker/objects.js";
import { cli } from "../support/cli-runner.js";
import { startDockerFixture, type DockerFixture } from "../support/docker-fixture.js";
import { engineGet, waitDeleted, waitPhase, type SandboxJson } from "../support/sandbox-helpers.js";

let fx: DockerFixture;

beforeAll(async () => {
  fx = await startDockerFixture({ liveRestore: true, name: "labels" });
});

afterAll(async () => {
  await fx.close();
});

/** Every object on the daemon that carries a label key or value given here. */
async function objectsLabelled(filter: string): Promise<number> {
  const filters = { label: [filter] };
  const c = await fx.engine.listContainers({ all: true, filters });
  const n = await fx.engine.listNetworks({ filters });
  const v = await fx.engine.listVolumes({ filters });
  if (c.kind !== "ok" || n.kind !== "ok" || v.kind !== "ok") throw new Error("listing objects failed");
  return c.body.length + n.body.length + (v.body.Volumes ?? []).length;
}

describe("user labels and Docker", () => {
  const USER = { app: "web", "example.com/team": "infra", tier: "sandgate-lookalike" };

  it("a labelled sandbox's containers carry exactly the gateway's identity labels and the image's, none of the user's", async () => {
    const created = await fx.t.api("POST", "/v1/sandboxes", { name: "lbl", labels: USER });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const s: SandboxJson & { runtime: { nonce: string } } = (await waitPhase(fx, "lbl", "Ready", { generation: 1 })) as never;
    const input = { gatewayId: fx.driver.gatewayId, sandboxId: s.id, name: "lbl", generation: 1, nonce: s.runtime.nonce };
    for (const role of ["workload", "supervisor"] as const) {
      const c = await engineGet(fx, `/containers/${s.runtime[role].id}/json`);
      const image = await engineGet(fx, `/images/${c.Image}/json`);
      expect(c.Config.Labels, role).toEqual({ ...(image.Config.Labels ?? {}), ...containerLabels(input, role) });
    }
    const net = await engineGet(fx, `/networks/sandgate-${s.id}-net`);
    expect(net.Labels).toEqual(sandboxLabels(input));
    for (const filter of ["app", "example.com/team", "tier", "app=web"]) expect(await objectsLabelled(filter), filter).toBe(0);
    // The gateway shows them, and filters on them.
    expect((await fx.t.api("GET", "/v1/sandboxes/lbl")).body.labels).toEqual(USER);
    const ls = await cli(["sandbox", "list", "--label", "app=web", "-q"], fx.cliEnv);
    expect(ls.stdout).toBe("lbl\n");
  });

  it("an attempt to set or shadow an identity label is refused before any Docker object is made", async () => {
    const lbl = (await fx.t.api("GET", "/v1/sandboxes/lbl")).body as SandboxJson;
    const spoofs = [
      { [LABEL.gateway]: "another-gateway" },
      { [LABEL.sandbox]: lbl.id },
      { [LABEL.name]: "lbl" },
      { [LABEL.generation]: "1", [LABEL.role]: "workload" },
      { [LABEL.nonce]: "guessed" },
      { "SANDGATE.GATEWAY": fx.driver.gatewayId },
      { "org.sandgate.image": "workload" },
    ];
    const before = await objectsLabelled(`${LABEL.gateway}=${fx.driver.gatewayId}`);
    for (const labels of spoofs) {
      const r = await fx.t.api("POST", "/v1/sandboxes", { name: "spoof", labels });
      expect(r.status, JSON.stringify(labels)).toBe(400);
      expect(r.body.error.message).toMatch(/^labels: label key ".*" is reserved/);
    }
    const cliSpoof = await cli(["sandbox", "create", "spoof", "--label", `${LABEL.sandbox}=${lbl.id}`], fx.cliEnv);
    expect(cliSpoof.code).toBe(2);
    expect((await fx.t.api("GET", "/v1/sandboxes/spoof")).status).toBe(404);
    expect(await objectsLabelled(`${LABEL.name}=spoof`)).toBe(0);
    expect(await objectsLabelled(`${LABEL.gateway}=${fx.driver.gatewayId}`)).toBe(before);
  });

  it("after a gateway restart the labelled sandbox is re-verified as the same instance (Ready), its labels kept; prune deletes it once stopped", async () => {
    await fx.restartGateway();
    const s = await waitPhase(fx, "lbl", "Ready", { generation: 1 });
    expect((await fx.t.api("GET", "/v1/sandboxes/lbl")).body.labels).toEqual(USER);
    expect((await fx.t.api("POST", "/v1/sandboxes/lbl/stop")).status).toBe(202);
    await waitPhase(fx, "lbl", "Stopped");
    const pruned = await cli(["sandbox", "prune", "--label", "app=web", "--force"], fx.cliEnv);
    expect(pruned.code, pruned.stderr).toBe(0);
    expect(pruned.stdout).toBe("lbl  deleted\npruned 1 of 1 sandbox\n");
    await waitDeleted(fx, "lbl");
    expect(await objectsLabelled(`${LABEL.sandbox}=${s.id}`)).toBe(0);
  });
});
