// The supervisor as the sandbox's security boundary, end to end on a real daemon:
// policy enforcement and hot revisions over the authenticated control session,
// refusal of forged and misused tokens, fail-closed lockdown when the gateway
// goes away, and no secret visible from the workload.

import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { PassThrough } from "node:stream";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startExec } from "../../src/driver/docker/exec-session.js";
import { LaunchTokens } from "../../src/gateway/control/launch-tokens.js";
import { createJsonLogger } from "../../src/supervisor/logger.js";
import { ControlSession } from "../../src/supervisor/control-session.js";
import { LockdownPolicyHolder } from "../../src/supervisor/lockdown.js";
import { cli } from "../support/cli-runner.js";
import { deleteAllAndCheckMonitors, startDockerFixture, type DockerFixture } from "../support/docker-fixture.js";
import { eventually } from "../support/gateway-fixture.js";
import { PROXY_GET, createReady, execIn, phase, startOrigin, waitPhase } from "../support/recovery-helpers.js";

let fx: DockerFixture;
let origin: string;
// Long enough that a request the test makes right after the gateway is gone is
// surely inside it, even on a loaded machine.
const GRACE_MS = 5_000;

const policyFor = (methods: string[]): string => `version: 1
network:
  rules:
    - name: origin
      endpoints:
        - host: ORIGIN
          port: 8080
          protocol: http
          allowPrivate: ["10.0.0.0/8"]
          rules:
            - methods: [${methods.join(", ")}]
              paths: ["/**"]
`;

/** From the workload: a request with any method through the proxy → "<status> <x-proxy-error> <body>". */
const PROXY_REQ = (method: string, url: string): string[] => [
  "node",
  "-e",
  `const u=new URL(process.env.HTTP_PROXY),t=new URL(${JSON.stringify(url)});
   const r=require("http").request({method:${JSON.stringify(method)},agent:false,host:u.hostname,port:u.port,path:t.href,headers:{host:t.host}},res=>{let b="";res.on("data",d=>b+=d);res.on("end",()=>console.log(res.statusCode+" "+(res.headers["x-proxy-error"]||"-")+" "+b))});
   r.on("error",e=>console.log("ERR "+e.code));r.end(${method === "GET" ? "" : '"x"'});`,
];

/**
 * A node process in the workload, started straight through Docker before the gateway
 * goes away: per line of stdin, a GET through the proxy, answered "<status> <body>".
 * Its requests need no process start, so they are quick even on a loaded machine.
 */
async function startProber(containerId: string): Promise<{ get: (url: string) => Promise<string>; close: () => Promise<void> }> {
  const program = `const u=new URL(process.env.HTTP_PROXY);
   require("readline").createInterface({input:process.stdin}).on("line",(line)=>{const t=new URL(line);
   require("http").get({agent:false,host:u.hostname,port:u.port,path:t.href,headers:{host:t.host},timeout:20000},r=>{let b="";r.on("data",d=>b+=d);r.on("end",()=>console.log(r.statusCode+" "+b))})
   .on("error",e=>console.log("ERR "+e.code)).on("timeout",function(){this.destroy(new Error("timeout"))});});`;
  const s = await startExec(fx.engine, containerId, { cmd: ["node", "-e", program], tty: false });
  s.stderr.resume();
  const waiting: ((line: string) => void)[] = [];
  let buf = "";
  s.stdout.on("data", (b: Buffer) => {
    buf += b.toString();
    for (let i = buf.indexOf("\n"); i >= 0; i = buf.indexOf("\n")) {
      waiting.shift()?.(buf.slice(0, i + 1));
      buf = buf.slice(i + 1);
    }
  });
  return {
    get: (url) =>
      new Promise<string>((resolve) => {
        waiting.push(resolve);
        s.stdin.write(`${url}\n`);
      }),
    close: async () => {
      s.stdin.end();
      await s.exitCode;
    },
  };
}

/** Exec straight through Docker, for when the gateway is down on purpose. */
async function dockerExec(containerId: string, cmd: string[]): Promise<string> {
  const s = await startExec(fx.engine, containerId, { cmd, tty: false });
  s.stdin.end();
  let out = "";
  s.stdout.on("data", (b: Buffer) => (out += b.toString()));
  s.stderr.resume();
  await s.exitCode;
  return out;
}

beforeAll(async () => {
  fx = await startDockerFixture({ liveRestore: true, name: "sup", supervisorGraceMs: GRACE_MS });
  origin = await startOrigin(fx, "origin-sup");
});
afterAll(async () => {
  if (fx) await deleteAllAndCheckMonitors(fx);
  await fx?.close();
});

describe("policy enforcement over the control session", () => {
  it("allowed → 200, denied host → 403 JSON, L7 allows GET and denies POST; get shows a healthy boundary", async () => {
    await createReady(fx, "pol", { policy: policyFor(["GET"]).replace("ORIGIN", origin) });
    expect((await execIn(fx, "pol", PROXY_REQ("GET", `http://${origin}:8080/a`))).stdout).toBe("200 - hello from origin /a\n");
    const post = (await execIn(fx, "pol", PROXY_REQ("POST", `http://${origin}:8080/a`))).stdout;
    expect(post).toMatch(/^403 sandgate-policy \{.*"error":"policy_denied".*"method":"POST".*"reason":"method_not_allowed"/);
    const other = (await execIn(fx, "pol", PROXY_REQ("GET", "http://elsewhere.test/"))).stdout;
    expect(other).toMatch(/^403 sandgate-policy \{.*"host":"elsewhere.test".*"reason":"no_matching_rule"/);

    const line = /^boundary\s+healthy; session up; last heartbeat \S+; enforced revision 1 of desired 1$/m;
    // On a loaded machine a heartbeat can briefly go stale; the line must show up.
    const get = await eventually(async () => {
      const r = await cli(["sandbox", "get", "pol"], fx.cliEnv);
      return line.test(r.stdout) ? r : undefined;
    }, 30_000, "healthy boundary line");
    expect(get.stdout).toMatch(line);
    // Every decision reached the gateway's audit trail (not the lifecycle event log).
    await eventually(async () => {
      const { audit } = (await fx.t.api("GET", "/v1/sandboxes/pol/audit")).body;
      const seen = (audit as any[]).map((a) => `${a.decision} ${a.event.method}`);
      return seen.includes("deny POST") && seen.includes("allow GET") ? true : undefined;
    }, 30_000, "audit records");
    const { events } = (await fx.t.api("GET", "/v1/sandboxes/pol/events")).body;
    expect((events as any[]).map((e) => e.kind).filter((k) => k !== "phase" && k !== "info")).toEqual([]);
  }, 60_000);

  it("policy set --wait changes what the running sandbox may reach, without restarting anything", async () => {
    const before = await createReady(fx, "pol-set", { policy: policyFor(["GET"]).replace("ORIGIN", origin) });
    expect((await execIn(fx, "pol-set", PROXY_REQ("POST", `http://${origin}:8080/b`))).stdout).toMatch(/^403 sandgate-policy /);
    const file = join(fx.cliEnv.SANDGATE_HOME!, "allow-post.yaml");
    await import("node:fs").then((fs) => fs.writeFileSync(file, policyFor(["GET", "POST"]).replace("ORIGIN", origin)));
    const set = await cli(["policy", "set", "pol-set", "--policy", file, "--wait"], fx.cliEnv);
    expect(set.code, set.stderr).toBe(0);
    // Nothing was open that revision 2 takes away (it only adds POST).
    expect(set.stdout).toBe("pol-set  policy revision 2 accepted; enforced by the supervisor; closed 0 connections\n");
    expect((await execIn(fx, "pol-set", PROXY_REQ("POST", `http://${origin}:8080/b`))).stdout).toBe("200 - hello from origin /b\n");
    const after = (await fx.t.api("GET", "/v1/sandboxes/pol-set")).body;
    expect(after.runtime).toEqual(before.runtime);
    expect(after.boundary).toMatchObject({ healthy: true, enforcedRevision: 2, desiredRevision: 2 });
    const check = await cli(["policy", "check", "pol-set", "--url", `http://${origin}:8080/x`, "--method", "DELETE"], fx.cliEnv);
    expect(check.stderr).toBe("");
    expect(check.stdout).toBe("deny   (method_not_allowed, rule origin, revision 2)\n");
  }, 60_000);

  it("an invalid policy is rejected with a path-precise message and the old one keeps working", async () => {
    await createReady(fx, "pol-bad", { policy: policyFor(["GET"]).replace("ORIGIN", origin) });
    const file = join(fx.cliEnv.SANDGATE_HOME!, "bad.yaml");
    await import("node:fs").then((fs) => fs.writeFileSync(file, policyFor(["GET", "POST"]).replace("ORIGIN", origin).replace("port: 8080", "port: 70000")));
    const set = await cli(["policy", "set", "pol-bad", "--policy", file, "--wait"], fx.cliEnv);
    expect(set.code).toBe(2);
    expect(set.stderr).toMatch(/network\.rules\[0\]\.endpoints\[0\]\.port: expected 1-65535, got 70000/);
    const get = JSON.parse((await cli(["policy", "get", "pol-bad", "--json"], fx.cliEnv)).stdout);
    expect(get.revision).toBe(1);
    // Revision 1 still decides: GET allowed, POST (which the rejected one would allow) denied.
    expect((await execIn(fx, "pol-bad", PROXY_REQ("GET", `http://${origin}:8080/c`))).stdout).toBe("200 - hello from origin /c\n");
    expect((await execIn(fx, "pol-bad", PROXY_REQ("POST", `http://${origin}:8080/c`))).stdout).toMatch(/^403 sandgate-policy \{.*"reason":"method_not_allowed"/);
  }, 60_000);
});

describe("authentication of supervisors", () => {
  it("refuses a forged token, a token for another sandbox and one from an older generation, and counts each", async () => {
    const a = await createReady(fx, "tok-a");
    const b = await createReady(fx, "tok-b");
    const status = (await fx.t.api("GET", "/v1/status")).body.supervisorEndpoint;
    const home = fx.cliEnv.SANDGATE_HOME!;
    const real = LaunchTokens.open(home, fx.driver.gatewayId);
    const forgerDir = mkdtempSync(join(tmpdir(), "sg-forger-"));
    const forger = LaunchTokens.open(forgerDir, fx.driver.gatewayId);
    const refusedBefore = { ...status.refused };
    const fingerprint = (JSON.parse(readFileSync(join(home, "launch", `${a.id}-g1`, "launch.json"), "utf8")) as { control: { fingerprint: string } }).control.fingerprint;

    /** One supervisor session attempt, until the gateway refuses it with `reason`. */
    const tryHello = async (sandboxId: string, generation: number, token: string, reason: string): Promise<void> => {
      const session = new ControlSession({
        url: status.url,
        fingerprint,
        token: async () => token,
        sandboxId,
        generation,
        policy: new LockdownPolicyHolder(),
        proxyListening: () => true,
        logger: createJsonLogger(new PassThrough().resume()),
        graceMs: 60_000,
      });
      session.start();
      try {
        await eventually(() => (session.status().lastError === `closed 4401 ${reason}` ? true : undefined), 30_000, `refusal ${reason}`);
      } finally {
        await session.stop();
      }
    };

    // A token signed by someone else's key.
    await tryHello(a.id, 1, (await forger.mint({ sandboxId: a.id, generation: 1, nonce: a.runtime.nonce })).token, "bad_signature");
    // Sandbox A's genuine token, presented as sandbox B.
    const tokenA = readFileSync(join(home, "launch", `${a.id}-g1`, "token"), "utf8").trim();
    await tryHello(b.id, 1, tokenA, "sandbox_mismatch");
    // A genuine token of generation 1 after B moved on to generation 2.
    const oldB = (await real.mint({ sandboxId: b.id, generation: 1, nonce: b.runtime.nonce })).token;
    await fx.t.api("POST", "/v1/sandboxes/tok-b/stop");
    await waitPhase(fx, "tok-b", "Stopped");
    await fx.t.api("POST", "/v1/sandboxes/tok-b/start");
    await waitPhase(fx, "tok-b", "Ready");
    await tryHello(b.id, 1, oldB, "stale_generation");

    const refused = (await fx.t.api("GET", "/v1/status")).body.supervisorEndpoint.refused;
    const delta = (k: string): number => (refused[k] ?? 0) - (refusedBefore[k] ?? 0);
    expect(delta("bad_signature")).toBeGreaterThanOrEqual(1);
    expect(delta("sandbox_mismatch")).toBeGreaterThanOrEqual(1);
    expect(delta("stale_generation")).toBeGreaterThanOrEqual(1);
    // The real sessions still hold: up in their own generation and healthy (a loaded
    // machine may delay a heartbeat, so wait for it rather than read one instant).
    await eventually(async () => {
      const bnd = (await fx.t.api("GET", "/v1/sandboxes/tok-a")).body.boundary;
      return bnd.session === "up" && bnd.generation === 1 && bnd.healthy ? true : undefined;
    }, 30_000, "tok-a up and healthy in generation 1");
    await eventually(async () => {
      const bnd = (await fx.t.api("GET", "/v1/sandboxes/tok-b")).body.boundary;
      return bnd.session === "up" && bnd.generation === 2 && bnd.healthy ? true : undefined;
    }, 30_000, "tok-b up and healthy in generation 2");
    expect(await phase(fx, "tok-a")).toBe("Ready");
    rmSync(forgerDir, { recursive: true, force: true });
  }, 90_000);
});

describe("fail closed without the gateway", () => {
  it("gateway gone past the grace period → the supervisor denies all egress; gateway back → session re-authenticates, egress resumes", async () => {
    const s = await createReady(fx, "lock", { policy: policyFor(["GET"]).replace("ORIGIN", origin) });
    const wid = s.runtime.workload.id;
    expect(await dockerExec(wid, PROXY_GET(`http://${origin}:8080/before`))).toBe("200 hello from origin /before\n");
    const prober = await startProber(wid);
    try {
      expect(await prober.get(`http://${origin}:8080/ready`)).toBe("200 hello from origin /ready\n");

      await fx.t.close({ keepHome: true });
      // Inside the grace period egress still follows the policy...
      expect(await prober.get(`http://${origin}:8080/grace`)).toBe("200 hello from origin /grace\n");
      // ...after it, everything is denied.
      await eventually(async () => ((await prober.get(`http://${origin}:8080/locked`)).startsWith("403 ") ? true : undefined), GRACE_MS + 60_000, "lockdown");
      expect(await prober.get(`http://${origin}:8080/locked`)).toMatch(/^403 \{.*"reason":"lockdown_/);

      await fx.restartGateway();
      await eventually(async () => ((await prober.get(`http://${origin}:8080/again`)).startsWith("200 ") ? true : undefined), 60_000, "egress resumed");
    } finally {
      await prober.close();
    }
    await waitPhase(fx, "lock", "Ready", 60_000);
    await eventually(async () => ((await fx.t.api("GET", "/v1/sandboxes/lock")).body.boundary.healthy ? true : undefined), 30_000, "lock healthy");
  }, 180_000);
});

describe("fixed sections of the policy", () => {
  it("filesystem and process map to the workload: user, limits, writable and read-only paths", async () => {
    const policy = `version: 1
filesystem:
  readOnly: ["/etc"]
  readWrite: ["/work"]
process:
  user: "1234:1234"
  limits: { memoryMb: 300 }
`;
    const s = await createReady(fx, "fixed", { policy });
    const r = await execIn(fx, "fixed", ["sh", "-c", "id -u; touch /work/x && echo work-ok; touch /etc/x 2>&1 || echo etc-refused; touch /sandbox/y 2>&1 || echo sandbox-refused"]);
    expect(r.stdout).toMatch(/^1234\nwork-ok\n.*Read-only file system\netc-refused\n/s);
    const inspect = await fx.engine.inspectContainer(s.runtime.workload.id);
    if (inspect.kind !== "ok") throw new Error("inspect failed");
    expect((inspect.body as any).HostConfig.Memory).toBe(300 * 1024 * 1024);
  }, 60_000);
});

describe("secrets stay out of the workload", () => {
  it("no token, key or certificate in the workload's environment, mounts, files or /proc", async () => {
    const s = await createReady(fx, "secret");
    const home = fx.cliEnv.SANDGATE_HOME!;
    const token = readFileSync(join(home, "launch", `${s.id}-g1`, "token"), "utf8").trim();
    const launch = JSON.parse(readFileSync(join(home, "launch", `${s.id}-g1`, "launch.json"), "utf8")) as { nonce: string; control: { fingerprint: string } };
    const dump = await execIn(fx, "secret", [
      "sh",
      "-c",
      "env; cat /proc/mounts; for p in /proc/[0-9]*; do cat $p/environ 2>/dev/null | tr '\\0' '\\n'; cat $p/cmdline 2>/dev/null | tr '\\0' ' '; done; ls -la /run /etc /sandbox 2>&1; cat /etc/resolv.conf",
    ]);
    expect(dump.code).toBe(0);
    const seen = dump.stdout + dump.stderr;
    expect(seen.length).toBeGreaterThan(200);
    expect(seen).not.toContain(token);
    expect(seen).not.toContain(token.split(".")[1]!); // not even the claims part
    expect(seen).not.toContain(launch.nonce);
    expect(seen).not.toContain(launch.control.fingerprint.replace(/^sha256:/, ""));
    expect(seen).not.toMatch(/BEGIN (EC |)PRIVATE KEY|BEGIN CERTIFICATE/);
    expect(seen).not.toContain("/run/sandgate");
    expect((await execIn(fx, "secret", ["sh", "-c", "ls /run/sandgate 2>&1; echo rc=$?"])).stdout).toMatch(/No such file or directory\nrc=1/);
  }, 60_000);
});
