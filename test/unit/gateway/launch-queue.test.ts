// Launches wait their turn: at most --launch-concurrency are provisioned, started and verified
// at once, the rest stay Provisioning and say so, in the order they came; a queued sandbox
// stopped or deleted leaves the line without ever being launched. A real gateway on the
// in-memory driver TEST DOUBLE, whose gate holds every launch in provision().
import { afterEach, describe, expect, it } from "vitest";
import { eventually, startTestGateway, type TestGateway } from "../../support/gateway-fixture.js";
import { MemoryDriver } from "../../support/memory-driver.js";

let t: TestGateway | undefined;
afterEach(async () => {
  await t?.close();
  t = undefined;
});

const phase = async (g: TestGateway, name: string): Promise<string | undefined> => ((await g.api("GET", `/v1/sandboxes/${name}`)).body as { phase?: string }).phase;
const provisioned = (d: MemoryDriver): string[] => d.calls.filter((c) => c.startsWith("provision ")).map((c) => c.split(" ")[1]!);

describe("the launch queue", () => {
  it("at most N launches at once, the others Provisioning in line and saying so; all Ready in the order they came", async () => {
    const driver = new MemoryDriver();
    let open!: () => void;
    driver.gate = new Promise<void>((r) => (open = r));
    t = await startTestGateway(driver, { service: { launchConcurrency: 2 } });
    const names = ["q0", "q1", "q2", "q3", "q4"];
    for (const name of names) expect((await t.api("POST", "/v1/sandboxes", { name })).status).toBe(201);
    await eventually(() => (provisioned(driver).length === 2 ? true : undefined), 10_000, "two launches under way");
    for (const name of names) expect(await phase(t, name)).toBe("Provisioning");
    const events = (await t.api("GET", "/v1/sandboxes/q4/events")).body as { events: { message: string }[] };
    expect(events.events.map((e) => e.message)).toContain("waiting to launch: 2 ahead, 2 at once (gateway start --launch-concurrency)");
    expect(provisioned(driver)).toEqual(["q0", "q1"]);
    open();
    for (const name of names) await eventually(async () => ((await phase(t!, name)) === "Ready" ? true : undefined), 10_000, `${name} Ready`);
    expect(provisioned(driver)).toEqual(names);
  });

  it("a queued sandbox deleted or stopped leaves the line at once, never launched, while the launches ahead still hold their turns", async () => {
    const driver = new MemoryDriver();
    let open!: () => void;
    driver.gate = new Promise<void>((r) => (open = r));
    t = await startTestGateway(driver, { service: { launchConcurrency: 1 } });
    for (const name of ["first", "gone", "halted", "last"]) expect((await t.api("POST", "/v1/sandboxes", { name })).status).toBe(201);
    await eventually(() => (provisioned(driver).length === 1 ? true : undefined), 10_000, "the first launch under way");
    expect((await t.api("DELETE", "/v1/sandboxes/gone")).status).toBe(202);
    expect((await t.api("POST", "/v1/sandboxes/halted/stop")).status).toBe(202);
    // Done while the first still holds the only turn.
    await eventually(async () => ((await t!.api("GET", "/v1/sandboxes/gone")).status === 404 ? true : undefined), 10_000, "gone deleted");
    await eventually(async () => ((await phase(t!, "halted")) === "Stopped" ? true : undefined), 10_000, "halted stopped");
    expect(await phase(t, "first")).toBe("Provisioning");
    open();
    await eventually(async () => ((await phase(t!, "last")) === "Ready" ? true : undefined), 10_000, "last Ready");
    expect(provisioned(driver)).toEqual(["first", "last"]);
  });
});
