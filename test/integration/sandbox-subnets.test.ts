// Sandbox networks take their /28 from the gateway's range, not from Docker's address pools
// (a stock daemon's pools hold 31 networks). A subnet Docker refuses as overlapping is passed
// over for the next; a range with none free fails only that launch, naming the range.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { networkName } from "../../src/driver/docker/objects.js";
import { startDockerFixture, type DockerFixture } from "../support/docker-fixture.js";
import { waitDeleted, waitPhase } from "../support/sandbox-helpers.js";

const RANGE = "198.18.42.0/24"; // 16 subnets of /28
const subnets = Array.from({ length: 16 }, (_, i) => `198.18.42.${i * 16}/28`);

let fx: DockerFixture;

beforeAll(async () => {
  fx = await startDockerFixture({ liveRestore: true, name: "subnets", sandboxSubnets: RANGE });
}, 180_000);

afterAll(async () => {
  await fx?.close();
});

async function subnetOf(sandboxId: string): Promise<string | undefined> {
  const r = await fx.engine.inspectNetwork(networkName(sandboxId));
  return r.kind === "ok" ? r.body.IPAM.Config?.[0]?.Subnet : undefined;
}

async function occupy(name: string, subnet: string): Promise<void> {
  const r = await fx.engine.createNetwork({ Name: name, Driver: "bridge", Internal: true, Options: { "com.docker.network.bridge.inhibit_ipv4": "true" }, IPAM: { Driver: "default", Config: [{ Subnet: subnet }] } });
  if (r.kind !== "ok") throw new Error(`occupy ${subnet}: ${JSON.stringify(r)}`);
}

describe("sandbox subnets", () => {
  it("with all but one /28 of the range taken, a sandbox gets that one and is Ready; with none left the next fails naming the range", async () => {
    const free = subnets[11]!;
    for (const [i, s] of subnets.entries()) if (s !== free) await occupy(`taken-${i}`, s);
    expect((await fx.t.api("POST", "/v1/sandboxes", { name: "fits" })).status).toBe(201);
    const fits = await waitPhase(fx, "fits", "Ready");
    expect(await subnetOf(fits.id)).toBe(free);

    expect((await fx.t.api("POST", "/v1/sandboxes", { name: "full" })).status).toBe(201);
    const full = await waitPhase(fx, "full", "Error");
    expect(full.reason).toMatchObject({ code: "ProvisioningFailed" });
    expect(JSON.stringify(full.reason)).toContain(`no free /28 for the sandbox network in ${RANGE} (16 tried)`);
    expect((await fx.t.api("GET", "/v1/status")).status).toBe(200);

    for (const n of ["fits", "full"]) {
      expect((await fx.t.api("DELETE", `/v1/sandboxes/${n}`)).status).toBe(202);
      await waitDeleted(fx, n);
    }
    // Its /28 is free again once the sandbox is gone: the next sandbox may take it.
    expect((await fx.t.api("POST", "/v1/sandboxes", { name: "again" })).status).toBe(201);
    const again = await waitPhase(fx, "again", "Ready");
    expect(await subnetOf(again.id)).toBe(free);
    expect((await fx.t.api("DELETE", "/v1/sandboxes/again")).status).toBe(202);
    await waitDeleted(fx, "again");
  }, 300_000);
});
