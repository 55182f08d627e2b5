// The clients people run, through the supervisor's terminated HTTPS, with no flag of their
// own: Debian's curl, Python's urllib, node's https and git's dumb-HTTP clone, in a sandbox
// of the client test image (test/support/client-image.ts). The sandbox's trust variables
// (SSL_CERT_FILE, CURL_CA_BUNDLE, GIT_SSL_CAINFO, NODE_EXTRA_CA_CERTS) and its proxy
// variables are all they get. TLS origin containers on the egress network: one whose
// certificate the supervisor trusts (the origin CA given to the driver) serving a bare git
// repository as static files, one signed by a CA nobody trusts.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LeafCertificates } from "../../src/supervisor/tls/leaf-certs.js";
import { egressNetworkName } from "../../src/driver/docker/objects.js";
import { issueSandboxCa, type CaMaterial } from "../../src/util/x509.js";
import { ensureClientImage } from "../support/client-image.js";
import { deleteAllAndCheckMonitors, startDockerFixture, type DockerFixture } from "../support/docker-fixture.js";
import { eventually } from "../support/gateway-fixture.js";
import { createReady, execIn } from "../support/recovery-helpers.js";
import { docker, type DockerRun } from "../support/sandbox-helpers.js";
import { NODE_TUNNEL_AGENT } from "../support/tunnel-agent.js";

let fx: DockerFixture;
let clientImage: string;
const GOOD = "tls-origin-clients";
const UNTRUSTED = "tls-untrusted-clients";
const SANDBOX = "clients";
const PRIVATE = `allowPrivate: ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]`;

const POLICY = `version: 1
network:
  rules:
    - name: allowed-tree
      endpoints:
        - host: ${GOOD}
          port: 8443
          protocol: https
          ${PRIVATE}
          rules:
            - methods: [GET, HEAD]
              paths: ["/allowed/**"]
    - name: untrusted
      endpoints:
        - host: ${UNTRUSTED}
          port: 8443
          protocol: https
          ${PRIVATE}
          rules:
            - methods: [GET]
`;

/**
 * The origin: a bare repository made at start (git update-server-info, so the dumb HTTP
 * protocol can clone it as static files) served under /allowed/repo.git/ and
 * /denied/repo.git/ alike; any other path answers "origin <method> <url>".
 */
const ORIGIN_SERVER = `const fs=require("fs"),path=require("path");const ROOT="/tmp/repo.git";
require("https").createServer({cert:process.env.CERT,key:process.env.KEY},(q,s)=>{
  const u=new URL(q.url,"https://origin");const m=/^\\/(allowed|denied)\\/repo\\.git(\\/.*)$/.exec(u.pathname);
  if(!m){s.end("origin "+q.method+" "+q.url);return}
  const f=path.join(ROOT,path.normalize(m[2]));
  if(!f.startsWith(ROOT+"/")){s.writeHead(400);s.end();return}
  fs.readFile(f,(e,b)=>{if(e){s.writeHead(404);s.end()}else{s.writeHead(200,{"content-type":"application/octet-stream"});s.end(b)}});
}).listen(8443)`;
const ORIGIN_START = `set -e; export HOME=/tmp; cd /tmp; rm -rf src repo.git
git init -q src; cd src; echo "hello from the repo" > README
git add README; git -c user.name=t -c user.email=t@example.invalid commit -qm init
cd /tmp; git clone -q --bare src repo.git; git -C repo.git update-server-info
exec node -e "$SERVER"`;

async function startTlsOrigin(name: string, pem: { certPem: string; keyPem: string }): Promise<void> {
  const created = await fx.engine.createContainer(name, {
    Image: clientImage,
    Cmd: ["sh", "-c", ORIGIN_START],
    Env: [`CERT=${pem.certPem}`, `KEY=${pem.keyPem}`, `SERVER=${ORIGIN_SERVER}`],
    HostConfig: { NetworkMode: egressNetworkName(fx.driver.gatewayId), RestartPolicy: { Name: "always" } },
  });
  if (created.kind !== "ok") throw new Error(`${name} create: ${JSON.stringify(created)}`);
  expect((await fx.engine.startContainer(created.body.Id)).kind).toBe("ok");
}

const url = (host: string, path: string): string => `https://${host}:8443${path}`;

/** Every client prints one last line "<status> <X-Proxy-Error or -> <body>" (curl: body, newline, status line). */
interface Answer {
  code: number;
  status: string;
  proxyError: string;
  body: string;
  stderr: string;
}

async function inSandbox(cmd: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return execIn(fx, SANDBOX, cmd);
}

// curl: no -k, no --cacert, no --proxy. --fail-with-body: an HTTP error is exit 22, body still shown.
async function curl(target: string): Promise<Answer> {
  const r = await inSandbox(["curl", "-sS", "--fail-with-body", "-w", "\n%{http_code} %header{x-proxy-error}", target]);
  const nl = r.stdout.lastIndexOf("\n");
  const [status = "", proxyError = ""] = r.stdout.slice(nl + 1).split(" ");
  return { code: r.code, status, proxyError: proxyError || "-", body: r.stdout.slice(0, Math.max(0, nl)), stderr: r.stderr };
}

// urllib.request.urlopen with its defaults: the proxy from https_proxy, trust from SSL_CERT_FILE.
const PYTHON = `import sys, urllib.request, urllib.error
try:
    r = urllib.request.urlopen(sys.argv[1], timeout=20)
    print(r.status, r.headers.get("x-proxy-error") or "-", r.read().decode())
except urllib.error.HTTPError as e:
    print(e.code, e.headers.get("x-proxy-error") or "-", e.read().decode())
    sys.exit(3)
`;

// node's https with a tunnelling agent (node 20 reads no HTTPS_PROXY itself, see
// tunnel-agent.ts) and node's default trust: no ca option, NODE_EXTRA_CA_CERTS from the sandbox.
const NODE = `const net=require("net"),tls=require("tls"),https=require("https");
${NODE_TUNNEL_AGENT}
https.get(process.argv[1],{agent:new TunnelAgent(process.env.HTTPS_PROXY)},(res)=>{let o="";res.on("data",(d)=>o+=d);res.on("end",()=>{
  console.log(res.statusCode+" "+(res.headers["x-proxy-error"]||"-")+" "+o);process.exit(res.statusCode===200?0:3)})})
  .on("error",(e)=>{console.error("ERR "+(e.code||e.message));process.exit(4)});`;

async function line(cmd: string[]): Promise<Answer> {
  const r = await inSandbox(cmd);
  const last = r.stdout.trim().split("\n").at(-1) ?? "";
  const [status = "", proxyError = "", ...rest] = last.split(" ");
  return { code: r.code, status, proxyError, body: rest.join(" "), stderr: r.stderr };
}

const CLIENTS: { name: string; get: (target: string) => Promise<Answer> }[] = [
  { name: "curl", get: curl },
  { name: "python urllib", get: (t) => line(["python3", "-c", PYTHON, t]) },
  { name: "node https", get: (t) => line(["node", "-e", NODE, t]) },
];

beforeAll(async () => {
  const originCa: CaMaterial = await issueSandboxCa("test origins");
  fx = await startDockerFixture({ liveRestore: true, name: "clients", originCaPem: originCa.certPem });
  clientImage = (await ensureClientImage(fx.engine)).ref;
  await startTlsOrigin(GOOD, await new LeafCertificates(originCa).issuePem(GOOD));
  await startTlsOrigin(UNTRUSTED, await new LeafCertificates(await issueSandboxCa("stranger")).issuePem(UNTRUSTED));
  await createReady(fx, SANDBOX, { policy: POLICY, image: clientImage });
  // Each origin builds its repository before it listens: asked from inside it, so that
  // waiting depends on nothing the sandbox's trust is tested for.
  for (const origin of [GOOD, UNTRUSTED]) {
    let last: DockerRun | undefined;
    try {
      await eventually(async () => ((last = await docker(fx, "exec", origin, "curl", "-sk", "-o", "/dev/null", "-w", "%{http_code}", "https://localhost:8443/ready")).stdout === "200" ? true : undefined), 60_000, `${origin} to answer`);
    } catch (err) {
      const logs = await docker(fx, "logs", origin);
      throw new Error(`${(err as Error).message}; last answer ${JSON.stringify(last)}; origin log: ${logs.stdout} ${logs.stderr}`, { cause: err });
    }
  }
});

afterAll(async () => {
  if (fx) await deleteAllAndCheckMonitors(fx);
  await fx?.close();
});

describe("real clients through terminated HTTPS, trusting the sandbox CA with no flags", () => {
  it("the client image has Debian's python (not a pyenv shim), curl with OpenSSL and git", async () => {
    const py = await inSandbox(["python3", "-c", "import sys, ssl; print(sys.executable, sys.prefix, ssl.OPENSSL_VERSION.split()[0])"]);
    expect(py.stdout.trim()).toBe("/usr/bin/python3 /usr OpenSSL");
    expect((await inSandbox(["git", "--version"])).stdout).toMatch(/^git version 2\./);
    expect((await inSandbox(["curl", "--version"])).stdout).toMatch(/^curl 7\.\d+\.\d+ .*OpenSSL/);
  });

  for (const client of CLIENTS) {
    it(`${client.name}: allowed path 200 from the origin, denied path 403 with the policy body, untrusted origin 502`, async () => {
      const ok = await client.get(url(GOOD, "/allowed/a?x=1"));
      expect(ok, ok.stderr).toMatchObject({ code: 0, status: "200", proxyError: "-", body: "origin GET /allowed/a?x=1" });

      const denied = await client.get(url(GOOD, "/denied/a"));
      expect(denied.code, denied.stderr).not.toBe(0);
      expect(denied).toMatchObject({ status: "403", proxyError: "sandgate-policy" });
      expect(JSON.parse(denied.body)).toMatchObject({ error: "policy_denied", reason: "path_not_allowed", method: "GET", path: "/denied/a" });

      const bad = await client.get(url(UNTRUSTED, "/x"));
      expect(bad.code, bad.stderr).not.toBe(0);
      expect(bad).toMatchObject({ status: "502", proxyError: "sandgate-upstream-tls" });
      expect(JSON.parse(bad.body)).toMatchObject({ error: "upstream_certificate" });
    });
  }

  it("git: clone over https (dumb HTTP) succeeds on an allowed path, fails with 403 on a denied one and 502 on an untrusted origin", async () => {
    const dir = `/tmp/clone-${Date.now().toString(36)}`;
    const ok = await inSandbox(["sh", "-c", `git clone -q ${url(GOOD, "/allowed/repo.git")} ${dir} && cat ${dir}/README`]);
    expect(ok, ok.stderr).toMatchObject({ code: 0, stdout: "hello from the repo\n" });

    const denied = await inSandbox(["git", "clone", "-q", url(GOOD, "/denied/repo.git"), `${dir}-denied`]);
    expect(denied.code).toBe(128);
    expect(denied.stderr).toContain("The requested URL returned error: 403");

    const bad = await inSandbox(["git", "clone", "-q", url(UNTRUSTED, "/repo.git"), `${dir}-bad`]);
    expect(bad.code).toBe(128);
    expect(bad.stderr).toContain("The requested URL returned error: 502");
  });

  it("audit mode: curl's refused path reaches the origin and is recorded would_deny (OCSF, with its traffic); enforcing again refuses it", async () => {
    const audited = POLICY.replace("    - name: allowed-tree\n", "    - name: allowed-tree\n      enforcement: audit\n");
    expect(audited).not.toBe(POLICY);
    const set = await fx.t.api("PUT", `/v1/sandboxes/${SANDBOX}/policy`, { policy: audited, wait: 60 });
    expect(set.body, JSON.stringify(set.body)).toMatchObject({ enforced: true });
    const through = await curl(url(GOOD, "/denied/audit-me"));
    expect(through, through.stderr).toMatchObject({ code: 0, status: "200", proxyError: "-", body: "origin GET /denied/audit-me" });
    const rec = await eventually(async () => {
      const r = await fx.t.api("GET", `/v1/sandboxes/${SANDBOX}/audit?decision=would_deny&format=ocsf&tail=50`);
      return (r.body.audit as { http_request?: { url?: { path?: string } } }[]).find((e) => e.http_request?.url?.path === "/denied/audit-me");
    }, 30_000, "the would-deny record");
    expect(rec).toMatchObject({ class_uid: 4002, action: "Allowed", disposition: "Logged", status_detail: "path_not_allowed", firewall_rule: { name: "allowed-tree" }, http_response: { code: 200 }, unmapped: { decision: "would_deny", policy_revision: set.body.revision } });
    expect((rec as unknown as { traffic: { bytes_in: number } }).traffic.bytes_in).toBeGreaterThan(0);

    const back = await fx.t.api("PUT", `/v1/sandboxes/${SANDBOX}/policy`, { policy: POLICY, wait: 60 });
    expect(back.body).toMatchObject({ enforced: true });
    const denied = await curl(url(GOOD, "/denied/audit-me"));
    expect(denied).toMatchObject({ status: "403", proxyError: "sandgate-policy" });
  }, 180_000);
});
