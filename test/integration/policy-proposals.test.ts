// A policy proposal end to end on a real daemon: the workload is denied an origin, an
// agent's client proposes a rule for it (API token only) and cannot approve it; a person
// approves it with the CLI (`policy approve --wait`, the approver token from the home),
// and the supervisor enforces the new revision: the same request from the workload now
// reaches the origin. The proposal's detail replays the denial the workload met.

import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cli } from "../support/cli-runner.js";
import { deleteAllAndCheckMonitors, startDockerFixture, type DockerFixture } from "../support/docker-fixture.js";
import { eventually } from "../support/gateway-fixture.js";
import { ORIGIN_POLICY, PROXY_GET, createReady, execIn, startOrigin, waitPhase } from "../support/recovery-helpers.js";

let fx: DockerFixture;
const ORIGIN = "origin-pp";

beforeAll(async () => {
  fx = await startDockerFixture({ liveRestore: true, name: "proposals" });
  await startOrigin(fx, ORIGIN);
});

afterAll(async () => {
  if (fx) await deleteAllAndCheckMonitors(fx);
  await fx?.close();
});

const get = async (name: string): Promise<string> => (await execIn(fx, name, PROXY_GET(`http://${ORIGIN}:8080/x`))).stdout.trim();

/**
 * The CLI, again once the sandbox is Ready when a policy change was refused because it was
 * Recovering (on a loaded machine the Docker watchdog can briefly put it there; nothing changed).
 */
async function cliWhileRecovering(name: string, args: string[]) {
  for (let i = 0; ; i++) {
    const r = await cli(args, fx.cliEnv);
    if (r.code === 0 || !r.stderr.includes("it is Recovering") || i >= 5) return r;
    await waitPhase(fx, name, "Ready", 60_000);
  }
}

describe("a proposal approved by a person is enforced by the supervisor", () => {
  it("denied → proposed (the API token cannot approve it) → approved with the CLI → the same request reaches the origin", async () => {
    await createReady(fx, "pp");
    expect(await get("pp")).toMatch(/^403 /);

    const proposed = await fx.t.api("POST", "/v1/sandboxes/pp/policy/proposals", { policy: ORIGIN_POLICY(ORIGIN), reason: "the task needs the origin", by: "mcp" });
    expect(proposed.status, JSON.stringify(proposed.body)).toBe(201);
    const id = proposed.body.id as string;

    // The agent's side holds the API token only: refused, and the boundary is unchanged.
    const refused = await fx.t.api("POST", `/v1/sandboxes/pp/policy/proposals/${id}/approve`, {});
    expect(refused.status).toBe(403);
    expect(await get("pp")).toMatch(/^403 /);

    // The person's review: the denial the workload met is what the proposal would newly allow.
    const detail = await eventually(async () => {
      const r = await fx.t.api("GET", `/v1/sandboxes/pp/policy/proposals/${id}`);
      return r.body.replay.newlyAllowed.length > 0 ? r.body : undefined;
    }, 30_000, "the denial in the audit trail");
    expect(detail.replay.newlyAllowed[0]).toMatchObject({ request: `GET http://${ORIGIN}:8080/x`, because: "rule origin" });

    const r = await cliWhileRecovering("pp", ["policy", "approve", "pp", id, "--wait"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`^pp {2}policy proposal ${id} approved: revision 2; enforced by the supervisor; closed \\d+ connections?\\n$`));
    expect(await get("pp")).toBe("200 hello from origin /x");

    const events = await cli(["sandbox", "events", "pp"], fx.cliEnv);
    expect(events.stdout).toMatch(new RegExp(`policy proposal ${id} by mcp against revision 1: the task needs the origin[\\s\\S]*policy revision 2 accepted[\\s\\S]*policy proposal ${id} approved by cli:`));
  });

  it("a proposal made stale by policy set is refused (exit 5) and the revision set meanwhile stays enforced", async () => {
    await createReady(fx, "ps", { policy: ORIGIN_POLICY(ORIGIN) });
    expect(await get("ps")).toBe("200 hello from origin /x");
    const proposed = await fx.t.api("POST", "/v1/sandboxes/ps/policy/proposals", { policy: "version: 1\n" });
    expect(proposed.status).toBe(201);
    const file = join(fx.cliEnv.SANDGATE_HOME!, "ps-same.yaml");
    writeFileSync(file, ORIGIN_POLICY(ORIGIN).replace("name: origin", "name: origin-again"));
    expect((await cliWhileRecovering("ps", ["policy", "set", "ps", "--policy", file, "--wait"])).code).toBe(0);
    const r = await cliWhileRecovering("ps", ["policy", "approve", "ps", proposed.body.id, "--wait"]);
    expect(r.code).toBe(5);
    expect(r.stderr).toMatch(/^sandgate: the policy changed since; the proposal is stale: /);
    expect(await get("ps")).toBe("200 hello from origin /x");
  });
});
