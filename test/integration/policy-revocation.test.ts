// Revocation end to end on a real daemon: what a new policy revision no longer allows,
// and everything under a lockdown, is closed in the supervisor's proxy. A long-lived
// node process in the workload (exec'd straight through Docker, so it outlives a
// gateway that goes away) holds a TLS tunnel to a TLS origin container and a kept-alive
// HTTP connection to an HTTP origin container, and reports on each when told to.
// "Closed" is proven by a write after `policy set --wait` returned (or after the
// lockdown was in force): an open connection would have answered it.

import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startExec } from "../../src/driver/docker/exec-session.js";
import { issueEndpointCertificate } from "../../src/gateway/control/tls.js";
import type { EndpointTls } from "../../src/gateway/control/tls.js";
import { cli } from "../support/cli-runner.js";
import { deleteAllAndCheckMonitors, startDockerFixture, type DockerFixture } from "../support/docker-fixture.js";
import { eventually } from "../support/gateway-fixture.js";
import { createReady, startOrigin, waitPhase } from "../support/recovery-helpers.js";

let fx: DockerFixture;
let cert: EndpointTls;
const HTTP_ORIGIN = "origin-rv";
const TLS_ORIGIN = "tls-origin-rv";
// Short: the lockdown test waits it out once, and a kept-alive connection opened when the
// gateway goes away must still be inside the proxy's 5 s keep-alive idle timeout when the
// lockdown begins (else that timeout, not the lockdown, would close it).
const GRACE_MS = 1_500;

const TLS_RULE = `    - name: tls-origin
      endpoints:
        - host: ${TLS_ORIGIN}
          port: 8443
          protocol: https
          allowPrivate: ["10.0.0.0/8"]
`;
const HTTP_RULE = `    - name: http-origin
      endpoints:
        - host: ${HTTP_ORIGIN}
          port: 8080
          protocol: http
          allowPrivate: ["10.0.0.0/8"]
`;
const policy = (...rules: string[]): string => (rules.length === 0 ? "version: 1\n" : `version: 1\nnetwork:\n  rules:\n${rules.join("")}`);

/**
 * The workload side: one command per stdin line, one answer line per command.
 *   tunnel           CONNECT + TLS (the origin's certificate pinned as the CA), one echo → "open <echo>"
 *   keepalive        a raw socket, one GET → "<status>"
 *   probe-tunnel     write on that TLS tunnel → "echo <data>" or "closed"
 *   probe-keepalive  a GET on that kept-alive socket → "<status>" or "closed"
 *   connect          a fresh CONNECT → "<status>"
 *   get              a GET on a fresh connection → "<status> <reason>"
 */
const CLIENT = `
const net = require("net"), tls = require("tls");
const proxy = new URL(process.env.HTTPS_PROXY || process.env.HTTP_PROXY);
const [caBase64, tlsHost, httpHost] = process.argv.slice(1);
const ca = Buffer.from(caBase64, "base64").toString();
const say = (s) => process.stdout.write(s + "\\n");
let tunnel, kept;
const track = (s) => { s.closedFlag = false; s.on("close", () => (s.closedFlag = true)); s.on("error", () => {}); return s; };
function next(s) {
  return new Promise((resolve) => {
    if (s.closedFlag || s.destroyed) return resolve("closed");
    const onData = (d) => { s.off("close", onClose); resolve("data " + d.toString()); };
    const onClose = () => { s.off("data", onData); resolve("closed"); };
    s.once("data", onData); s.once("close", onClose);
  });
}
function connectRaw(authority) {
  return new Promise((resolve) => {
    const s = track(net.connect(Number(proxy.port), proxy.hostname));
    let buf = "";
    const onData = (d) => {
      buf += d.toString("latin1");
      const end = buf.indexOf("\\r\\n\\r\\n");
      if (end < 0) return;
      s.off("data", onData); s.pause();
      resolve({ status: buf.split(" ")[1], s });
    };
    s.on("data", onData);
    s.on("close", () => resolve({ status: "closed", s }));
    s.write("CONNECT " + authority + " HTTP/1.1\\r\\nHost: " + authority + "\\r\\n\\r\\n");
  });
}
function request(s, url) {
  return new Promise((resolve) => {
    if (s.closedFlag || s.destroyed) return resolve("closed");
    let buf = "";
    const onData = (d) => {
      buf += d.toString("latin1");
      const end = buf.indexOf("\\r\\n\\r\\n");
      if (end < 0) return;
      const len = /content-length: (\\d+)/i.exec(buf.slice(0, end));
      if (!len || buf.length < end + 4 + Number(len[1])) return;
      done(buf.split(" ")[1] + " " + buf.slice(end + 4, end + 4 + Number(len[1])));
    };
    const onClose = () => done("closed");
    const done = (r) => { s.off("data", onData); s.off("close", onClose); resolve(r); };
    s.on("data", onData); s.once("close", onClose);
    s.write("GET " + url + " HTTP/1.1\\r\\nHost: " + new URL(url).host + "\\r\\n\\r\\n");
  });
}
const commands = {
  async tunnel() {
    const c = await connectRaw(tlsHost + ":8443");
    if (c.status !== "200") return "connect " + c.status;
    // SNI is the CONNECT host (a blind tunnel checks it); the certificate is pinned, its name not checked.
    tunnel = track(tls.connect({ socket: c.s, ca, servername: tlsHost, checkServerIdentity: () => undefined }));
    await new Promise((r, j) => { tunnel.once("secureConnect", r); tunnel.once("error", j); });
    const answer = next(tunnel); tunnel.write("ping"); return "open " + (await answer);
  },
  async keepalive() {
    kept = track(net.connect(Number(proxy.port), proxy.hostname));
    return request(kept, "http://" + httpHost + ":8080/first");
  },
  async "probe-tunnel"() {
    const answer = next(tunnel); if (!tunnel.closedFlag && tunnel.writable) tunnel.write("after"); return answer;
  },
  async "probe-keepalive"() { return request(kept, "http://" + httpHost + ":8080/again"); },
  async connect() { const c = await connectRaw(tlsHost + ":8443"); c.s.destroy(); return c.status; },
  async get() {
    const s = track(net.connect(Number(proxy.port), proxy.hostname));
    const r = await request(s, "http://" + httpHost + ":8080/fresh");
    s.destroy();
    const reason = /"reason":"([^"]+)"/.exec(r);
    return r.split(" ")[0] + " " + (reason ? reason[1] : "-");
  },
};
let chain = Promise.resolve();
const rl = require("readline").createInterface({ input: process.stdin });
rl.on("line", (line) => {
  chain = chain.then(() => commands[line]()).then((r) => say(line + ": " + r), (e) => say(line + ": ERR " + e.message));
});
// Stdin closed: exit, even with connections still open.
rl.on("close", () => chain.then(() => process.exit(0)));
`;

interface Client {
  run: (command: string) => Promise<string>;
  close: () => Promise<void>;
}

/** Starts CLIENT in the workload straight through Docker; run(cmd) answers its line. */
async function startClient(workloadId: string): Promise<Client> {
  const s = await startExec(fx.engine, workloadId, { cmd: ["node", "-e", CLIENT, Buffer.from(cert.certPem).toString("base64"), TLS_ORIGIN, HTTP_ORIGIN], tty: false });
  let stderr = "";
  s.stderr.on("data", (b: Buffer) => (stderr += b.toString()));
  const waiting: ((line: string) => void)[] = [];
  let exited = false;
  // A client that died answers every command (pending or later) with its exit and stderr.
  void s.exitCode.then((code) => {
    exited = true;
    for (const w of waiting.splice(0)) w(`exited ${String(code)}: ${stderr}`);
  });
  let buf = "";
  s.stdout.on("data", (b: Buffer) => {
    buf += b.toString();
    for (let i = buf.indexOf("\n"); i >= 0; i = buf.indexOf("\n")) {
      waiting.shift()?.(buf.slice(0, i));
      buf = buf.slice(i + 1);
    }
  });
  return {
    run: (command) =>
      new Promise<string>((resolve, reject) => {
        if (exited) return reject(new Error(`workload client exited: ${stderr}`));
        waiting.push((line) => {
          if (process.env.SANDGATE_TEST_DEBUG) process.stderr.write(`[client] ${command} -> ${line}\n`);
          if (line.startsWith(`${command}: `)) resolve(line.slice(command.length + 2));
          else reject(new Error(`${command}: unexpected answer ${JSON.stringify(line)} (stderr: ${stderr})`));
        });
        s.stdin.write(`${command}\n`);
      }),
    close: async () => {
      s.stdin.end();
      await s.exitCode;
    },
  };
}

/**
 * PUT /v1/sandboxes/:name/policy with wait, which is what \`policy set --wait\` sends: for the
 * kept-alive steps, where the CLI's own start-up could outlast the proxy's 5 s keep-alive idle
 * timeout and let that timeout, not the revision, close the connection.
 */
async function putPolicyAndWait(name: string, text: string): Promise<{ enforced: boolean; connectionsClosed: number | null }> {
  const r = await whileRecovering(name, async () => {
    const put = await fx.t.api("PUT", `/v1/sandboxes/${name}/policy`, { policy: text, wait: 30 });
    return { refusedRecovering: put.status !== 200 && JSON.stringify(put.body).includes("it is Recovering"), value: put };
  });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body as { enforced: boolean; connectionsClosed: number | null };
}

/**
 * A policy change is refused, changing nothing, while the sandbox is Recovering (on a loaded
 * machine the gateway's Docker watchdog can briefly put it there); try again once it is Ready.
 */
async function whileRecovering<T>(name: string, attempt: () => Promise<{ refusedRecovering: boolean; value: T }>): Promise<T> {
  for (let i = 0; ; i++) {
    const r = await attempt();
    if (!r.refusedRecovering || i >= 5) return r.value;
    await waitPhase(fx, name, "Ready", 60_000);
  }
}

async function policySet(name: string, text: string): Promise<{ code: number | null; stdout: string; stderr: string; closed: number }> {
  const file = join(fx.cliEnv.SANDGATE_HOME!, `${name}-${Date.now()}.yaml`);
  writeFileSync(file, text);
  const r = await whileRecovering(name, async () => {
    const run = await cli(["policy", "set", name, "--policy", file, "--wait"], fx.cliEnv);
    return { refusedRecovering: run.code !== 0 && run.stderr.includes("it is Recovering"), value: run };
  });
  const m = /; closed (\d+) connections?\n$/.exec(r.stdout);
  return { ...r, closed: m === null ? -1 : Number(m[1]) };
}

beforeAll(async () => {
  fx = await startDockerFixture({ liveRestore: true, name: "revoke", supervisorGraceMs: GRACE_MS });
  cert = await issueEndpointCertificate({ commonName: "tls-origin" });
  await startOrigin(fx, HTTP_ORIGIN);
  const created = await fx.engine.createContainer(TLS_ORIGIN, {
    Image: fx.driver.imageRefs!.workload.id,
    Cmd: ["node", "-e", 'require("tls").createServer({ cert: process.env.CERT, key: process.env.KEY }, (s) => { s.on("error", () => {}); s.pipe(s); }).listen(8443)'],
    Env: [`CERT=${cert.certPem}`, `KEY=${cert.keyPem}`],
    HostConfig: { NetworkMode: `sandgate-egress-${fx.driver.gatewayId}`, RestartPolicy: { Name: "always" } },
  });
  if (created.kind !== "ok") throw new Error(`tls origin create: ${JSON.stringify(created)}`);
  expect((await fx.engine.startContainer(created.body.Id)).kind).toBe("ok");
});

afterAll(async () => {
  if (fx) await deleteAllAndCheckMonitors(fx);
  await fx?.close();
});

describe("policy set --wait revokes what the new revision does not allow", () => {
  it("a TLS tunnel, then a kept-alive HTTP connection: closed before the wait returns, the ack's count in its answer, new ones denied", async () => {
    const s = await createReady(fx, "rv", { policy: policy(TLS_RULE, HTTP_RULE) });
    const client = await startClient(s.runtime.workload.id);
    try {
      // The origins may still be starting: the first tunnel is retried until it opens.
      await eventually(async () => ((await client.run("tunnel")) === "open data ping" ? true : undefined), 30_000, "the TLS tunnel");
      expect(await client.run("probe-tunnel")).toBe("data after");

      // Revision 2 drops the TLS rule only.
      const set2 = await policySet("rv", policy(HTTP_RULE));
      expect(set2.code, set2.stderr).toBe(0);
      // A machine loaded enough to miss the monitor's pings has the sandbox Recovering meanwhile, and says so.
      expect(set2.stdout).toMatch(/^rv {2}policy revision 2 accepted; enforced by the supervisor; closed \d+ connections?(; the sandbox is Recovering: Ready again once Docker answers and re-verifies it)?\n$/);
      expect(set2.closed).toBeGreaterThanOrEqual(1);
      // After --wait returned: the tunnel is gone, a new one is refused.
      expect(await client.run("probe-tunnel")).toBe("closed");
      expect(await client.run("connect")).toBe("403");

      // A revision that still allows the kept-alive connection leaves it open; its next request is judged under it.
      expect(await client.run("keepalive")).toBe("200 hello from origin /first");
      expect(await putPolicyAndWait("rv", policy(HTTP_RULE, TLS_RULE.replace("tls-origin\n", "tls-origin-again\n")))).toEqual(expect.objectContaining({ enforced: true, connectionsClosed: 0 }));
      expect(await client.run("probe-keepalive")).toBe("200 hello from origin /again");

      // Revision 4 drops the HTTP rule too.
      expect(await client.run("keepalive")).toBe("200 hello from origin /first");
      const set4 = await putPolicyAndWait("rv", policy());
      expect(set4.enforced).toBe(true);
      expect(set4.connectionsClosed).toBeGreaterThanOrEqual(1);
      expect(await client.run("probe-keepalive")).toBe("closed");
      expect(await client.run("get")).toBe("403 no_matching_rule");
    } finally {
      await client.close();
    }
    // The origins outlived all of it: what changed is the policy, nothing else.
    expect((await fx.t.api("GET", "/v1/sandboxes/rv")).body.runtime).toEqual(s.runtime);
  }, 120_000);
});

describe("a lockdown revokes everything at once", () => {
  it("gateway gone past the grace period: the tunnel and the kept-alive connection are closed when the lockdown begins", async () => {
    const s = await createReady(fx, "rv-lock", { policy: policy(TLS_RULE, HTTP_RULE) });
    const client = await startClient(s.runtime.workload.id);
    let gatewayDown = false;
    try {
      await eventually(async () => ((await client.run("tunnel")) === "open data ping" ? true : undefined), 30_000, "the TLS tunnel");

      // Opened while allowed, before the gateway goes (after its close, the 1.5 s grace may
      // already be over on a loaded machine: a CI flake).
      expect(await client.run("keepalive")).toBe("200 hello from origin /first");
      await fx.t.close({ keepHome: true });
      gatewayDown = true;
      // Once a new request is refused for the lockdown, the old connections are already closed.
      await eventually(async () => ((await client.run("get")).startsWith("403 lockdown_") ? true : undefined), GRACE_MS + 60_000, "the lockdown");
      expect(await client.run("probe-tunnel")).toBe("closed");
      expect(await client.run("probe-keepalive")).toBe("closed");
      expect(await client.run("connect")).toBe("403");

      await fx.restartGateway();
      gatewayDown = false;
      await eventually(async () => ((await client.run("get")).startsWith("200 ") ? true : undefined), 60_000, "egress resumed");
    } finally {
      await client.close();
      if (gatewayDown) await fx.restartGateway();
    }
    await waitPhase(fx, "rv-lock", "Ready", 60_000);
  }, 180_000);
});
