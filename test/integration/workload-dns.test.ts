// The workload has no DNS channel out. Docker's embedded DNS (127.0.0.11) answers
// every container on a user-defined network, internal ones included, and on
// affected versions (20.10 here; CVE-2024-29018) forwards names to the host's
// resolvers from the host's own network namespace when those are loopback
// addresses: a way out that no egress policy sees. Here the private daemon's host
// resolver is a loopback DNS server the test runs and records.

import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TestDnsServer } from "../support/dns-server.js";
import { deleteAllAndCheckMonitors, startDockerFixture, type DockerFixture } from "../support/docker-fixture.js";
import { eventually } from "../support/gateway-fixture.js";
import { createReady, execIn } from "../support/recovery-helpers.js";

let dir: string;
let dns: TestDnsServer;
let fx: DockerFixture;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "sg-dns-"));
  // A loopback address of its own: a second copy of the suite may run this file at the same time.
  dns = await TestDnsServer.startOnFreeLoopback("127.77");
  const resolvConf = join(dir, "resolv.conf");
  writeFileSync(resolvConf, `nameserver ${dns.address}\n`);
  fx = await startDockerFixture({ liveRestore: true, name: "dns", resolvConf });
});
afterAll(async () => {
  if (fx) await deleteAllAndCheckMonitors(fx);
  await fx?.close();
  await dns?.close();
  rmSync(dir, { recursive: true, force: true });
});

/**
 * POSITIVE CONTROL: a plain container on an internal network of the same daemon
 * asks Docker's embedded DNS; the name reaches the host's loopback resolver.
 */
async function controlQuery(name: string): Promise<void> {
  const net = `dns-control-${randomBytes(3).toString("hex")}`;
  const created = await fx.engine.createNetwork({ Name: net, Driver: "bridge", Internal: true, CheckDuplicate: true, Options: { "com.docker.network.bridge.inhibit_ipv4": "true" } });
  expect(created.kind).toBe("ok");
  const c = await fx.engine.createContainer(`${net}-c`, {
    Image: fx.driver.imageRefs!.workload.id,
    Cmd: ["nslookup", name, "127.0.0.11"],
    HostConfig: { NetworkMode: net },
  });
  if (c.kind !== "ok") throw new Error(`control container: ${JSON.stringify(c)}`);
  expect((await fx.engine.startContainer(c.body.Id)).kind).toBe("ok");
  await eventually(() => (dns.names().includes(name) ? true : undefined), 30_000, `the control name ${name} at the host resolver`);
  await fx.engine.removeContainer(c.body.Id, { force: true });
  await fx.engine.removeNetwork(net);
}

describe("the workload's DNS", () => {
  it("names the workload asks Docker's embedded DNS (directly or through its resolver) never reach the host's resolvers", async () => {
    const tag = randomBytes(4).toString("hex");
    await controlQuery(`before-${tag}.exfil.test`);

    await createReady(fx, "dns-probe");
    const asked = [`direct-${tag}.exfil.test`, `libc-${tag}.exfil.test`, `wget-${tag}.exfil.test`];
    // Straight at the embedded server, as a hostile workload would.
    const direct = await execIn(fx, "dns-probe", ["nslookup", asked[0]!, "127.0.0.11"]);
    expect(direct.code).not.toBe(0);
    // Through its own resolver configuration, and through a tool that resolves names.
    expect((await execIn(fx, "dns-probe", ["nslookup", asked[1]!])).code).not.toBe(0);
    expect((await execIn(fx, "dns-probe", ["sh", "-c", `wget -q -T 2 -O /dev/null http://${asked[2]!}/ ; echo $?`])).stdout.trim()).not.toBe("0");

    // A later control query arrives: anything forwarded before it would have arrived too.
    await controlQuery(`after-${tag}.exfil.test`);
    expect(dns.names().filter((n) => n.includes(tag) && !n.startsWith("before-") && !n.startsWith("after-"))).toEqual([]);
  }, 180_000);
});
