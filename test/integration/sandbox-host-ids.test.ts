// Container users are nobody on the host. Without user namespaces a container's uid
// is the host's: a host user holding it could read the supervisor's launch token
// through /proc/PID/root, read the containers' environments, and read or write the
// workspace. Host users made by this test, with the ids containers used to run as
// (1000 workload, 1001 supervisor) and with a random low id, can do none of it; root
// (the positive control) can. Ids a host account already holds are refused at start,
// and so is a policy's process.user that a host account (or the supervisor) holds.

import { randomBytes, randomInt } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DockerDriver } from "../../src/driver/docker/docker-driver.js";
import { roleIds } from "../../src/driver/docker/host-ids.js";
import { EngineClient } from "../../src/driver/docker/engine/client.js";
import { DEFAULT_IDS } from "../../src/driver/docker/rootfs.js";
import { LAUNCH_DIR, LAUNCH_TOKEN_FILE } from "../../src/protocol/launch.js";
import { CLI_TEST_TIMEOUT_MS, cli } from "../support/cli-runner.js";
import { startDockerFixture, type DockerFixture } from "../support/docker-fixture.js";
import { HostUsers, freeLowId, hostIdTaken, shAs as as } from "../support/host-user.js";
import { cliExec, engineGet, getSandbox, waitPhase } from "../support/sandbox-helpers.js";

let fx: DockerFixture;
/** Host users this test made (removed in afterAll). */
const accounts = new HostUsers();
const makeUser = async (role: string, uid: number): Promise<string> => accounts.nameOf(await accounts.make(role, uid));

beforeAll(async () => {
  fx = await startDockerFixture({ liveRestore: true, name: "hostids" });
  const r = await fx.t.api("POST", "/v1/sandboxes", { name: "ids", disk: "64M" });
  if (r.status !== 201) throw new Error(`create: ${JSON.stringify(r.body)}`);
  await waitPhase(fx, "ids", "Ready", { generation: 1 });
});

afterAll(async () => {
  await accounts.removeAll();
  await fx?.close();
  // Nothing of ours is left in the account databases.
  expect(readFileSync("/etc/passwd", "utf8")).not.toContain(accounts.prefix);
  expect(readFileSync("/etc/group", "utf8")).not.toContain(accounts.prefix);
});

describe("container users are nobody on the host", () => {
  it("runs the workload and the supervisor as distinct ids that no host account or group holds", async () => {
    expect(DEFAULT_IDS.workload).not.toBe(DEFAULT_IDS.supervisor);
    expect(hostIdTaken(DEFAULT_IDS.workload)).toBe(false);
    expect(hostIdTaken(DEFAULT_IDS.supervisor)).toBe(false);
    const s = await waitPhase(fx, "ids", "Ready", { generation: 1 });
    for (const role of ["workload", "supervisor"] as const) {
      const c = await engineGet(fx, `/containers/${s.runtime![role].id}/json`);
      // The process as the host's kernel sees it.
      const status = readFileSync(`/proc/${c.State.Pid}/status`, "utf8");
      const ids = (k: string): string[] => /^(\w+):\s+(.*)$/m.exec(status.split("\n").find((l) => l.startsWith(`${k}:`))!)![2]!.split(/\s+/);
      expect(ids("Uid")).toEqual(Array(4).fill(String(DEFAULT_IDS[role])));
      expect(ids("Gid")).toEqual(Array(4).fill(String(DEFAULT_IDS[role])));
    }
    // Workspace files on the host belong to the workload id.
    expect((await cliExec(fx, "ids", ["sh", "-c", "echo hello > /sandbox/f && id -u"])).stdout).toBe(`${DEFAULT_IDS.workload}\n`);
    const { stdout } = await as("root", `stat -c '%u:%g' ${fx.driver.workspaces.dataPath(s.id)} ${fx.driver.workspaces.dataPath(s.id)}/f`);
    expect(stdout).toBe(`${DEFAULT_IDS.workload}:${DEFAULT_IDS.workload}\n`.repeat(2));
  });

  it("a host user with the old workload id, the old supervisor id or a random low id reads and writes nothing of either container", async () => {
    const s = await waitPhase(fx, "ids", "Ready");
    const secret = `secret-${randomBytes(6).toString("hex")}`;
    expect((await cliExec(fx, "ids", ["sh", "-c", `echo ${secret} > /sandbox/secret.txt && chmod 644 /sandbox/secret.txt`])).code).toBe(0);
    const supPid = (await engineGet(fx, `/containers/${s.runtime!.supervisor.id}/json`)).State.Pid as number;
    const wlPid = (await engineGet(fx, `/containers/${s.runtime!.workload.id}/json`)).State.Pid as number;
    const workspace = fx.driver.workspaces.dataPath(s.id);
    const tokenOnHost = join(fx.cliEnv.SANDGATE_HOME!, "launch", `${s.id}-g1`, LAUNCH_TOKEN_FILE);
    const token = readFileSync(tokenOnHost, "utf8").trim();

    const low = freeLowId();
    const users = [
      { role: "oldwl", uid: 1000 },
      { role: "oldsup", uid: 1001 },
      { role: "low", uid: low },
    ];
    for (const u of users) await makeUser(u.role, u.uid);

    const reads = {
      "supervisor's token through /proc/PID/root": `cat /proc/${supPid}/root${LAUNCH_DIR}/${LAUNCH_TOKEN_FILE}`,
      "supervisor's launch dir through /proc/PID/root": `ls /proc/${supPid}/root${LAUNCH_DIR}`,
      "supervisor's environment": `cat /proc/${supPid}/environ`,
      "supervisor's open files": `ls /proc/${supPid}/fd`,
      "workload's environment": `cat /proc/${wlPid}/environ`,
      "workspace through /proc/PID/root": `cat /proc/${wlPid}/root/sandbox/secret.txt`,
      "workspace on the host": `cat ${workspace}/secret.txt`,
      "workspace listing on the host": `ls ${workspace}`,
      "launch token on the host": `cat ${tokenOnHost}`,
    };
    const writes = {
      "into the workspace through /proc/PID/root": `echo x > /proc/${wlPid}/root/sandbox/planted`,
      "into the workspace on the host": `echo x > ${workspace}/planted`,
      "over the workspace's file through /proc/PID/root": `echo x >> /proc/${wlPid}/root/sandbox/secret.txt`,
    };
    for (const u of users) {
      for (const [what, script] of Object.entries({ ...reads, ...writes })) {
        const r = await as(u.uid, script);
        expect({ user: u.uid, what, code: r.code === 0 ? 0 : "failed", denied: /Permission denied|Operation not permitted/.test(r.stderr) }).toEqual({ user: u.uid, what, code: "failed", denied: true });
        expect(r.stdout).not.toContain(secret);
        expect(r.stdout).not.toContain(token);
      }
    }
    // Positive control: root reads all of it, so the denials above are about the ids.
    expect((await as("root", reads["supervisor's token through /proc/PID/root"])).stdout.trim()).toBe(token);
    expect((await as("root", reads["workspace through /proc/PID/root"])).stdout.trim()).toBe(secret);
    expect((await as("root", reads["workspace on the host"])).stdout.trim()).toBe(secret);
    expect((await as("root", reads["supervisor's environment"])).stdout).toContain("SANDGATE_LAUNCH_CONFIG=");
    // Nothing was planted, the secret is unchanged.
    // (Whatever else earlier tests left in /sandbox: this test may run first.)
    expect((await cliExec(fx, "ids", ["sh", "-c", "ls /sandbox | grep -c planted; cat /sandbox/secret.txt"])).stdout).toBe(`0\n${secret}\n`);
  });

  it("keeps the launch files readable by the supervisor id only", async () => {
    const s = await waitPhase(fx, "ids", "Ready");
    const dir = join(fx.cliEnv.SANDGATE_HOME!, "launch", `${s.id}-g1`);
    const { stdout } = await as("root", `stat -c '%n %u:%g %a' ${dir} ${dir}/launch.json ${dir}/token`);
    const sup = DEFAULT_IDS.supervisor;
    expect(stdout).toBe(`${dir} ${sup}:${sup} 700\n${dir}/launch.json ${sup}:${sup} 400\n${dir}/token ${sup}:${sup} 400\n`);
  });

  it("refuses, at start, ids that a host account holds, naming the account", async () => {
    let uid = randomInt(3_000_000, 4_000_000);
    while (hostIdTaken(uid) || hostIdTaken(uid + 1)) uid = randomInt(3_000_000, 4_000_000);
    // The supervisor's id (base + 1) taken by a user made for this.
    const name = await makeUser("taken", uid + 1);
    const driver = new DockerDriver({
      engine: new EngineClient({ socketPath: fx.dockerd.socketPath }),
      gatewayId: "hostids-check",
      launchRoot: join(fx.dockerd.dir, "launch-check"),
      ids: roleIds(uid),
      log: pino({ level: "silent" }),
    });
    try {
      await expect(driver.prepare()).rejects.toThrow(`supervisor id ${uid + 1} is the uid of host user ${name} (/etc/passwd)`);
    } finally {
      await driver.close();
    }
    // The same through the CLI: one line, a usage error, no gateway left running.
    const r = await cli(["--home", join(fx.dockerd.dir, "home-check"), "gateway", "start", "--uid-base", String(uid)], { DOCKER_HOST: fx.dockerd.dockerHost });
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split("\n")).toHaveLength(1);
    expect(r.stderr).toContain(`supervisor id ${uid + 1} is the uid of host user ${name}`);
    expect(r.stderr).toContain(`gid of host group ${name}`);
  });

  it("validates --uid-base and SANDGATE_UID_BASE with a one-line error naming the value and the range", async () => {
    const home = join(fx.dockerd.dir, "home-check");
    for (const [args, env, shown] of [
      [["--uid-base", "12ab"], {}, '"12ab"'],
      [["--uid-base", "1000"], {}, "1000"],
      [["--uid-base", "2147483647"], {}, "2147483647"],
      [[], { SANDGATE_UID_BASE: "-5" }, '"-5"'],
    ] as const) {
      const r = await cli(["--home", home, "gateway", "start", ...args], { DOCKER_HOST: fx.dockerd.dockerHost, ...env });
      expect(r.code).toBe(2);
      // One line names the value and the allowed range (the CLI may add its usual help hint).
      const line = r.stderr.split("\n").find((l) => l.includes("invalid uid base"));
      expect(line).toContain(`invalid uid base ${shown}: expected an integer from 65536 to 2147483646`);
    }
  });
});

describe("a policy's process.user is no host account", () => {
  const policyYaml = (user: string): string => `version: 1\nprocess:\n  user: "${user}"\n`;
  const policyFile = (user: string): string => {
    const file = join(fx.dockerd.dir, `policy-${user.replace(":", "-")}.yaml`);
    writeFileSync(file, policyYaml(user));
    return file;
  };
  const containerCount = async (): Promise<number> => ((await engineGet(fx, "/containers/json?all=1")) as unknown[]).length;

  /**
   * What `uid` gets of sandbox NAME's workload from the host: a file the workload wrote
   * (read through /proc/PID/root) and its environment. "no such sandbox" when none was made.
   */
  async function workloadAs(uid: number | "root", name: string): Promise<string> {
    if ((await getSandbox(fx, name)).status === 404) return "no such sandbox";
    const s = await waitPhase(fx, name, "Ready");
    const secret = `secret-${randomBytes(6).toString("hex")}`;
    expect((await cliExec(fx, name, ["sh", "-c", `echo ${secret} > /tmp/secret.txt`])).code).toBe(0);
    const pid = (await engineGet(fx, `/containers/${s.runtime!.workload.id}/json`)).State.Pid as number;
    const file = await as(uid, `cat /proc/${pid}/root/tmp/secret.txt`);
    const env = await as(uid, `tr '\\0' '\\n' < /proc/${pid}/environ`);
    const got = [file.stdout.includes(secret) ? "its file" : null, env.stdout.includes("HTTP_PROXY=") ? "its environment" : null].filter((x) => x !== null);
    if (got.length > 0) return `reads ${got.join(" and ")}`;
    return /Permission denied/.test(file.stderr) && /Permission denied/.test(env.stderr) ? "denied" : `neither: ${file.stderr.trim()} / ${env.stderr.trim()}`;
  }

  it(
    "refuses at create a process.user whose ids a host account holds: exit 2, one line naming the account, nothing created",
    async () => {
      const uid = await accounts.make("pol");
      const name = accounts.nameOf(uid);
      const before = await containerCount();
      const r = await cli(["sandbox", "create", "victim", "--disk", "64M", "--policy", policyFile(`${uid}:${uid}`)], fx.cliEnv);
      // Today's main created it, and the account read the workload's files and environment.
      expect({ code: r.code, account: await workloadAs(uid, "victim") }).toEqual({ code: 2, account: "no such sandbox" });
      expect(r.stderr.trim().split("\n")).toHaveLength(1);
      expect(r.stderr).toContain(`invalid policy: process.user: uid ${uid} is the uid of host user ${name} (/etc/passwd)`);
      expect(r.stderr).toContain(`gid ${uid} is the gid of host group ${name} (/etc/group)`);
      // The API's answer; and nothing was made, in the gateway or in Docker.
      const api = await fx.t.api("POST", "/v1/sandboxes", { name: "victim", disk: "64M", policy: policyYaml(`${uid}:${uid}`) });
      expect(api.status).toBe(400);
      expect(api.body.error.code).toBe("invalid_request");
      expect(api.body.error.message).toContain(`host user ${name}`);
      expect((await getSandbox(fx, "victim")).status).toBe(404);
      expect(await containerCount()).toBe(before);
    },
    CLI_TEST_TIMEOUT_MS,
  );

  it("refuses the supervisor's id as process.user: nothing created", async () => {
    const sup = DEFAULT_IDS.supervisor;
    const r = await fx.t.api("POST", "/v1/sandboxes", { name: "as-supervisor", disk: "64M", policy: policyYaml(`${sup}:${sup}`) });
    expect({ status: r.status, code: r.body.error?.code }).toEqual({ status: 400, code: "invalid_request" });
    expect(r.body.error.message).toContain(`process.user: uid ${sup} is the supervisor's id (--uid-base + 1); gid ${sup} is the supervisor's id`);
    expect((await getSandbox(fx, "as-supervisor")).status).toBe(404);
  });

  it(
    "refuses at policy set a process.user a host account holds, naming it; the policy is unchanged",
    async () => {
      const uid = await accounts.make("set");
      const name = accounts.nameOf(uid);
      const r = await cli(["policy", "set", "ids", "--policy", policyFile(`${uid}:${uid}`)], fx.cliEnv);
      expect(r.code).toBe(2);
      expect(r.stderr.trim().split("\n")).toHaveLength(1);
      expect(r.stderr).toContain(`invalid policy: process.user: uid ${uid} is the uid of host user ${name} (/etc/passwd)`);
      expect((await fx.t.api("GET", "/v1/sandboxes/ids/policy")).body.revision).toBe(1);
    },
    CLI_TEST_TIMEOUT_MS,
  );

  it(
    "a free id creates fine and no other account reads its workload; an account that takes the id later does, and then the sandbox is not started again (a policy change still is taken)",
    async () => {
      const other = await accounts.make("other");
      const free = freeLowId();
      const file = policyFile(`${free}:${free}`);
      const r = await cli(["sandbox", "create", "freeid", "--disk", "64M", "--policy", file], fx.cliEnv);
      expect(r.code, r.stderr).toBe(0);
      expect((await cliExec(fx, "freeid", ["id", "-u"])).stdout).toBe(`${free}\n`);
      expect(await workloadAs(other, "freeid")).toBe("denied");
      // Positive control: root reads both, so "denied" is about the ids.
      expect(await workloadAs("root", "freeid")).toBe("reads its file and its environment");
      // The hole the check closes: an account holding the workload's id reads it all.
      const late = await accounts.make("late", free);
      expect(await workloadAs(late, "freeid")).toBe("reads its file and its environment");
      // A policy change is still taken (a tighter policy must always be possible)…
      const set = await cli(["policy", "set", "freeid", "--policy", file], fx.cliEnv);
      expect(set.code, set.stderr).toBe(0);
      expect((await fx.t.api("GET", "/v1/sandboxes/freeid/policy")).body.revision).toBe(2);
      // …but the sandbox is not launched again as that account: start is refused naming it, exit 2.
      expect((await cli(["sandbox", "stop", "freeid"], fx.cliEnv)).code).toBe(0);
      const start = await cli(["sandbox", "start", "freeid"], fx.cliEnv);
      expect(start.code).toBe(2);
      expect(start.stderr.trim().split("\n")).toHaveLength(1);
      expect(start.stderr).toContain(`sandbox "freeid" cannot start: process.user: uid ${free} is the uid of host user ${accounts.nameOf(late)} (/etc/passwd)`);
      expect((await fx.t.api("GET", "/v1/sandboxes/freeid")).body.phase).toBe("Stopped");
    },
    CLI_TEST_TIMEOUT_MS,
  );
});
