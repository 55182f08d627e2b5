// The clients of the default workload image, through the supervisor's terminated HTTPS, with
// no flag of their own: Debian's curl, Python's urllib and http.client, node 24's fetch and
// https, git's clone over https, busybox wget (documented not to work for https). The
// sandbox's trust variables (SSL_CERT_FILE, CURL_CA_BUNDLE, GIT_SSL_CAINFO,
// NODE_EXTRA_CA_CERTS) and its proxy variables (HTTPS_PROXY, https_proxy, NODE_USE_ENV_PROXY)
// are all they get. TLS origin containers on the egress network, of the default image too:
// one whose certificate the supervisor trusts (the origin CA given to the driver) serving a
// bare git repository as static files, one signed by a CA nobody trusts, and two answering
// for api.github.com and github.com (network aliases) for docs/policy.md's examples, which
// run as written. Names resolve through Docker's DNS only: the daemon's own resolver is a
// loopback server of this test that knows no name, so nothing is ever asked of the real DNS
// nor sent off this machine (checked: it was never asked for the aliased names).
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LeafCertificates } from "../../src/supervisor/tls/leaf-certs.js";
import { egressNetworkName } from "../../src/driver/docker/objects.js";
import { issueSandboxCa, type CaMaterial } from "../../src/util/x509.js";
import { CLI_MAIN } from "../support/cli-build.js";
import { runProgram } from "../support/cli-runner.js";
import { TestDnsServer } from "../support/dns-server.js";
import { deleteAllAndCheckMonitors, startDockerFixture, type DockerFixture } from "../support/docker-fixture.js";
import { eventually } from "../support/gateway-fixture.js";
import { createReady, execIn } from "../support/recovery-helpers.js";
import { NO_PROXY_ENV, docker, waitDeleted, type DockerRun } from "../support/sandbox-helpers.js";

let fx: DockerFixture;
let dns: TestDnsServer;
let dir: string;
let image: string;
const GOOD = "tls-origin-clients";
const UNTRUSTED = "tls-untrusted-clients";
/** docs/policy.md's hosts: origin containers answering for them by network alias. */
const DOC_HOSTS = ["api.github.com", "github.com"];
const SANDBOX = "clients";
const DOCS = "docs";
const PRIVATE_RANGES = `["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]`;
const PRIVATE = `allowPrivate: ${PRIVATE_RANGES}`;
const POLICY_DOC = readFileSync(new URL("../../docs/policy.md", import.meta.url), "utf8");

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
 * A policy of docs/policy.md as written, but for one line after each `protocol: https`:
 * allowPrivate, since its origins here are containers on a private address.
 */
function docPolicy(yaml: string): string {
  const withPrivate = yaml.replace(/^(\s+)(- )?(protocol: https\b.*)$/gm, (line: string, indent: string, dash: string | undefined) => `${line}\n${indent}${dash === undefined ? "" : "  "}${PRIVATE}`);
  if (withPrivate === yaml) throw new Error("the policy has no https endpoint");
  return withPrivate;
}

/** The first fenced block of `lang` after `marker` in docs/policy.md. */
function docBlock(marker: string, lang: string): string {
  const at = POLICY_DOC.indexOf(marker);
  if (at < 0) throw new Error(`docs/policy.md has no ${marker}`);
  const m = new RegExp("```" + lang + "\\n([\\s\\S]*?)```").exec(POLICY_DOC.slice(at));
  if (!m) throw new Error(`docs/policy.md has no ${lang} block after ${marker}`);
  return m[1]!;
}

/**
 * The origin: a bare repository made at start (git update-server-info, so the dumb HTTP
 * protocol can clone it as static files) served under /allowed/repo.git/, /denied/repo.git/
 * and /o/r.git/ alike; /repos/... answers a JSON document with the Authorization header it
 * got; any other path answers "origin <method> <url>".
 */
const ORIGIN_SERVER = `const fs=require("fs"),path=require("path");const ROOT="/tmp/repo.git";
require("https").createServer({cert:process.env.CERT,key:process.env.KEY},(q,s)=>{
  const u=new URL(q.url,"https://origin");const m=/^\\/(allowed\\/repo|denied\\/repo|o\\/r)\\.git(\\/.*)$/.exec(u.pathname);
  if(!m){if(u.pathname.startsWith("/repos/")){s.setHeader("content-type","application/json");s.end(JSON.stringify({full_name:"o/r",authorization:q.headers.authorization||null})+"\\n")}else s.end("origin "+q.method+" "+q.url);return}
  const f=path.join(ROOT,path.normalize(m[2]));
  if(!f.startsWith(ROOT+"/")){s.writeHead(400);s.end();return}
  fs.readFile(f,(e,b)=>{if(e){s.writeHead(404);s.end()}else{s.writeHead(200,{"content-type":"application/octet-stream"});s.end(b)}});
}).listen(Number(process.env.PORT))`;
const ORIGIN_START = `set -e; export HOME=/tmp; cd /tmp; rm -rf src repo.git
git init -q src; cd src; echo "hello from the repo" > README
git add README; git -c user.name=t -c user.email=t@example.invalid commit -qm init
cd /tmp; git clone -q --bare src repo.git; git -C repo.git update-server-info
exec node -e "$SERVER"`;

/** An origin container of the default image (as root: port 443) on the egress network, answering for `aliases` too. */
async function startTlsOrigin(name: string, pem: { certPem: string; keyPem: string }, port: number, aliases: string[] = []): Promise<void> {
  const network = egressNetworkName(fx.driver.gatewayId);
  const created = await fx.engine.createContainer(name, {
    Image: image,
    User: "0:0",
    Cmd: ["sh", "-c", ORIGIN_START],
    Env: [`CERT=${pem.certPem}`, `KEY=${pem.keyPem}`, `SERVER=${ORIGIN_SERVER}`, `PORT=${port}`],
    HostConfig: { NetworkMode: network, RestartPolicy: { Name: "always" } },
    NetworkingConfig: { EndpointsConfig: { [network]: { Aliases: aliases } } },
  });
  if (created.kind !== "ok") throw new Error(`${name} create: ${JSON.stringify(created)}`);
  expect((await fx.engine.startContainer(created.body.Id)).kind).toBe("ok");
}

/** Each origin builds its repository before it listens: asked from inside it, so that waiting depends on nothing the sandbox's trust is tested for. */
async function originReady(name: string, port: number): Promise<void> {
  let last: DockerRun | undefined;
  try {
    await eventually(async () => ((last = await docker(fx, "exec", name, "curl", "-sk", "-o", "/dev/null", "-w", "%{http_code}", `https://localhost:${port}/ready`)).stdout === "200" ? true : undefined), 60_000, `${name} to answer`);
  } catch (err) {
    const logs = await docker(fx, "logs", name);
    throw new Error(`${(err as Error).message}; last answer ${JSON.stringify(last)}; origin log: ${logs.stdout} ${logs.stderr}`, { cause: err });
  }
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

async function inSandbox(cmd: string[], sandbox = SANDBOX): Promise<{ code: number; stdout: string; stderr: string }> {
  return execIn(fx, sandbox, cmd);
}

// curl: no -k, no --cacert, no --proxy. --fail-with-body: an HTTP error is exit 22, body still shown.
async function curl(target: string, extra: string[] = []): Promise<Answer> {
  const r = await inSandbox(["curl", ...extra, "-sS", "--fail-with-body", "-w", "\n%{http_code} %header{x-proxy-error}", target]);
  const nl = r.stdout.lastIndexOf("\n");
  const [status = "", proxyError = ""] = r.stdout.slice(nl + 1).split(" ");
  return { code: r.code, status, proxyError: proxyError || "-", body: r.stdout.slice(0, Math.max(0, nl)), stderr: r.stderr };
}

// urllib.request.urlopen with its defaults: the proxy from https_proxy, trust from SSL_CERT_FILE.
const PYTHON_URLLIB = `import sys, urllib.request, urllib.error
try:
    r = urllib.request.urlopen(sys.argv[1], timeout=20)
    print(r.status, r.headers.get("x-proxy-error") or "-", r.read().decode())
except urllib.error.HTTPError as e:
    print(e.code, e.headers.get("x-proxy-error") or "-", e.read().decode())
    sys.exit(3)
`;

// http.client reads no proxy variable: it is given the proxy from https_proxy, the way that
// module takes one (a connection to the proxy, set_tunnel to the origin); default trust.
const PYTHON_HTTP_CLIENT = `import os, ssl, sys, http.client, urllib.parse
p = urllib.parse.urlsplit(os.environ["https_proxy"])
u = urllib.parse.urlsplit(sys.argv[1])
c = http.client.HTTPSConnection(p.hostname, p.port, context=ssl.create_default_context(), timeout=20)
c.set_tunnel(u.hostname, u.port)
c.request("GET", u.path + ("?" + u.query if u.query else ""))
r = c.getresponse()
print(r.status, r.getheader("x-proxy-error") or "-", r.read().decode())
sys.exit(0 if r.status == 200 else 3)
`;

// node 24 with nothing but the environment: NODE_USE_ENV_PROXY=1 makes fetch and https use HTTPS_PROXY.
const NODE_FETCH = `fetch(process.argv[1]).then(async (r) => { console.log(r.status + " " + (r.headers.get("x-proxy-error") || "-") + " " + (await r.text())); process.exit(r.status === 200 ? 0 : 3); })
  .catch((e) => { console.error("ERR " + (e.cause?.code || e.cause?.message || e.message)); process.exit(4); });`;
const NODE_HTTPS = `require("https").get(process.argv[1], (res) => { let o = ""; res.on("data", (d) => (o += d)); res.on("end", () => {
  console.log(res.statusCode + " " + (res.headers["x-proxy-error"] || "-") + " " + o); process.exit(res.statusCode === 200 ? 0 : 3); }); })
  .on("error", (e) => { console.error("ERR " + (e.code || e.message)); process.exit(4); });`;

async function line(cmd: string[]): Promise<Answer> {
  const r = await inSandbox(cmd);
  const last = r.stdout.trim().split("\n").at(-1) ?? "";
  const [status = "", proxyError = "", ...rest] = last.split(" ");
  return { code: r.code, status, proxyError, body: rest.join(" "), stderr: r.stderr };
}

const CLIENTS: { name: string; get: (target: string) => Promise<Answer> }[] = [
  { name: "curl", get: curl },
  { name: "python urllib", get: (t) => line(["python3", "-c", PYTHON_URLLIB, t]) },
  { name: "python http.client", get: (t) => line(["python3", "-c", PYTHON_HTTP_CLIENT, t]) },
  { name: "node fetch", get: (t) => line(["node", "-e", NODE_FETCH, t]) },
  { name: "node https.get", get: (t) => line(["node", "-e", NODE_HTTPS, t]) },
];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "sg-clients-"));
  // The daemon's resolver: a loopback server of this test that answers no name (NXDOMAIN).
  dns = await TestDnsServer.startOnFreeLoopback("127.78");
  writeFileSync(join(dir, "resolv.conf"), `nameserver ${dns.address}\n`);
  const originCa: CaMaterial = await issueSandboxCa("test origins");
  fx = await startDockerFixture({ liveRestore: true, name: "clients", originCaPem: originCa.certPem, resolvConf: join(dir, "resolv.conf") });
  image = fx.driver.imageRefs!.workload.ref;
  const leaves = new LeafCertificates(originCa);
  await startTlsOrigin(GOOD, await leaves.issuePem(GOOD), 8443);
  await startTlsOrigin(UNTRUSTED, await new LeafCertificates(await issueSandboxCa("stranger")).issuePem(UNTRUSTED), 8443);
  for (const host of DOC_HOSTS) await startTlsOrigin(`doc-${host.replaceAll(".", "-")}`, await leaves.issuePem(host), 443, [host]);
  await createReady(fx, SANDBOX, { policy: POLICY });
  for (const origin of [GOOD, UNTRUSTED]) await originReady(origin, 8443);
  for (const host of DOC_HOSTS) await originReady(`doc-${host.replaceAll(".", "-")}`, 443);
});

afterAll(async () => {
  try {
    if (fx) await deleteAllAndCheckMonitors(fx);
    await fx?.close();
  } finally {
    await dns?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  }
});

describe("the default workload image's clients through terminated HTTPS, trusting the sandbox CA, with the workload's proxy variables", () => {
  it("the default image has Debian's python, curl with OpenSSL, git, OpenSSH's ssh, node 24 with npm and busybox; the workload has the proxy and trust variables", async () => {
    const py = await inSandbox(["python3", "-c", "import sys, ssl, json, socket, http.client, urllib.request; print(sys.executable, sys.prefix, ssl.OPENSSL_VERSION.split()[0])"]);
    expect(py.stdout.trim(), py.stderr).toBe("/usr/bin/python3 /usr OpenSSL");
    expect((await inSandbox(["git", "--version"])).stdout).toMatch(/^git version 2\./);
    expect((await inSandbox(["curl", "--version"])).stdout).toMatch(/^curl 7\.\d+\.\d+ .*OpenSSL/);
    expect((await inSandbox(["ssh", "-V"])).stderr).toMatch(/^OpenSSH_\d/);
    expect((await inSandbox(["node", "--version"])).stdout.trim()).toBe(process.version);
    const npm = await inSandbox(["npm", "--version"]);
    expect(npm.stdout.trim(), npm.stderr).toMatch(/^\d+\.\d+\.\d+$/);
    expect((await inSandbox(["sh", "-c", "echo hi | wc -c; ls / | sort | head -1"])).stdout).toBe("3\nbin\n");
    const env = Object.fromEntries((await inSandbox(["env"])).stdout.trim().split("\n").map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]));
    expect(env.HTTPS_PROXY).toMatch(/^http:\/\/[\d.]+:3128$/);
    expect(env).toMatchObject({ HTTP_PROXY: env.HTTPS_PROXY, http_proxy: env.HTTPS_PROXY, https_proxy: env.HTTPS_PROXY, NODE_USE_ENV_PROXY: "1" });
    expect(env).toMatchObject({ SSL_CERT_FILE: "/etc/sandgate/ca-bundle.pem", CURL_CA_BUNDLE: "/etc/sandgate/ca-bundle.pem", GIT_SSL_CAINFO: "/etc/sandgate/ca-bundle.pem", REQUESTS_CA_BUNDLE: "/etc/sandgate/ca-bundle.pem", NODE_EXTRA_CA_CERTS: "/etc/sandgate/ca.pem" });
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
    const at = `/tmp/clone-${Date.now().toString(36)}`;
    const ok = await inSandbox(["sh", "-c", `git clone -q ${url(GOOD, "/allowed/repo.git")} ${at} && cat ${at}/README`]);
    expect(ok, ok.stderr).toMatchObject({ code: 0, stdout: "hello from the repo\n" });

    const denied = await inSandbox(["git", "clone", "-q", url(GOOD, "/denied/repo.git"), `${at}-denied`]);
    expect(denied.code).toBe(128);
    expect(denied.stderr).toContain("The requested URL returned error: 403");

    const bad = await inSandbox(["git", "clone", "-q", url(UNTRUSTED, "/repo.git"), `${at}-bad`]);
    expect(bad.code).toBe(128);
    expect(bad.stderr).toContain("The requested URL returned error: 502");
  });

  it("busybox wget: https through the proxy does not work (it sends GET https://… to the proxy, which answers 400), as docs/policy.md says", async () => {
    const r = await inSandbox(["wget", "-q", "-O", "-", url(GOOD, "/allowed/a")]);
    expect(r.code).not.toBe(0);
    expect(r.stdout).toBe("");
    expect(r.stderr).toMatch(/400/);
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

// http.client straight to the origin: a socket and ssl, no proxy of any kind.
const PYTHON_DIRECT = `import ssl, sys, http.client, urllib.parse
u = urllib.parse.urlsplit(sys.argv[1])
c = http.client.HTTPSConnection(u.hostname, u.port, context=ssl.create_default_context(), timeout=20)
c.request("GET", u.path + ("?" + u.query if u.query else ""))
r = c.getresponse()
print(r.status, r.getheader("x-proxy-error") or "-", r.read().decode())
sys.exit(0 if r.status == 200 else 3)
`;

// A socket and ssl by hand, HTTP/1.1 written out: nothing of any HTTP library.
const PYTHON_RAW_TLS = `import socket, ssl, sys, urllib.parse
u = urllib.parse.urlsplit(sys.argv[1])
ctx = ssl.create_default_context()
data = b""
with socket.create_connection((u.hostname, u.port), timeout=20) as raw:
    with ctx.wrap_socket(raw, server_hostname=u.hostname) as s:
        target = u.path + ("?" + u.query if u.query else "")
        s.sendall(("GET %s HTTP/1.1\\r\\nHost: %s:%d\\r\\nConnection: close\\r\\n\\r\\n" % (target, u.hostname, u.port)).encode())
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
head, _, body = data.partition(b"\\r\\n\\r\\n")
lines = head.decode("latin1").split("\\r\\n")
status = lines[0].split(" ")[1]
headers = {l.split(":", 1)[0].strip().lower(): l.split(":", 1)[1].strip() for l in lines[1:] if ":" in l}
if headers.get("transfer-encoding") == "chunked":
    out = b""
    while True:
        size, _, rest = body.partition(b"\\r\\n")
        n = int(size.split(b";")[0], 16)
        if n == 0:
            break
        out += rest[:n]
        body = rest[n + 2:]
    body = out
print(status, headers.get("x-proxy-error") or "-", body.decode())
sys.exit(0 if status == "200" else 3)
`;

const DIRECT_CLIENTS: { name: string; get: (target: string) => Promise<Answer> }[] = [
  { name: "curl --noproxy '*'", get: (t) => curl(t, ["--noproxy", "*"]) },
  { name: "python urllib, no proxy variables", get: (t) => line([...NO_PROXY_ENV, "python3", "-c", PYTHON_URLLIB, t]) },
  { name: "python http.client straight to the origin", get: (t) => line(["python3", "-c", PYTHON_DIRECT, t]) },
  { name: "python socket + ssl by hand", get: (t) => line(["python3", "-c", PYTHON_RAW_TLS, t]) },
  { name: "node fetch, no proxy variables", get: (t) => line([...NO_PROXY_ENV, "node", "-e", NODE_FETCH, t]) },
  { name: "node https.get, no proxy variables", get: (t) => line([...NO_PROXY_ENV, "node", "-e", NODE_HTTPS, t]) },
];

describe("the same clients with no proxy at all: the transparent path gives them the same policy, trust and answers", () => {
  DIRECT_CLIENTS.forEach((client, i) => {
    it(`${client.name}: allowed path 200 from the origin, denied path 403 with the policy body, untrusted origin 502; recorded via transparent`, async () => {
      // Paths of its own, so the records found are this client's whatever the others left.
      const allowed = `/allowed/direct-${i}`;
      const deniedPath = `/denied/direct-${i}`;
      const ok = await client.get(url(GOOD, `${allowed}?x=1`));
      expect(ok, ok.stderr).toMatchObject({ code: 0, status: "200", proxyError: "-", body: `origin GET ${allowed}?x=1` });

      const denied = await client.get(url(GOOD, deniedPath));
      expect(denied.code, denied.stderr).not.toBe(0);
      expect(denied).toMatchObject({ status: "403", proxyError: "sandgate-policy" });
      expect(JSON.parse(denied.body)).toMatchObject({ error: "policy_denied", reason: "path_not_allowed", method: "GET", path: deniedPath });

      const bad = await client.get(url(UNTRUSTED, "/x"));
      expect(bad.code, bad.stderr).not.toBe(0);
      expect(bad).toMatchObject({ status: "502", proxyError: "sandgate-upstream-tls" });

      // Each request is recorded once, via the transparent path; the order two connections' records arrive in is not promised.
      const records = await eventually(async () => {
        const r = await fx.t.api("GET", `/v1/sandboxes/${SANDBOX}/audit?tail=50`);
        const mine = (r.body.audit as { event: { path?: string; via?: string; decision?: string } }[]).map((a) => a.event).filter((e) => e.path === allowed || e.path === deniedPath);
        return mine.length >= 2 ? mine : undefined;
      }, 30_000, "the two records");
      expect(records.map((e) => [e.path, e.decision, e.via]).sort()).toEqual([
        [allowed, "allow", "transparent"],
        [deniedPath, "deny", "transparent"],
      ]);
    });
  });

  it("git clone with no proxy variables: allowed path cloned, denied path 403", async () => {
    const at = `/tmp/direct-clone-${Date.now().toString(36)}`;
    const ok = await inSandbox(["sh", "-c", `${NO_PROXY_ENV.join(" ")} git clone -q ${url(GOOD, "/allowed/repo.git")} ${at} && cat ${at}/README`]);
    expect(ok, ok.stderr).toMatchObject({ code: 0, stdout: "hello from the repo\n" });
    const denied = await inSandbox([...NO_PROXY_ENV, "git", "clone", "-q", url(GOOD, "/denied/repo.git"), `${at}-denied`]);
    expect(denied.code).toBe(128);
    expect(denied.stderr).toContain("The requested URL returned error: 403");
  });
});

describe("docs/policy.md's workload examples, as written, in the default image", () => {
  /** Its hosts resolve to our origin containers through Docker's DNS, and never reached the test's resolver (nothing asked of real DNS). */
  async function docHostsAreOurs(): Promise<void> {
    for (const host of DOC_HOSTS) {
      const origin = `doc-${host.replaceAll(".", "-")}`;
      const ip = (await docker(fx, "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", origin)).stdout;
      const seen = await docker(fx, "exec", origin, "nslookup", host, "127.0.0.11");
      expect(seen.stdout, seen.stderr).toContain(`Address: ${ip}`);
    }
  }
  afterAll(() => {
    // Run last: every name asked above was answered by Docker, none forwarded to the daemon's resolver.
    for (const host of DOC_HOSTS) expect(dns.names().filter((n) => n === host || n.startsWith(`${host}.`))).toEqual([]);
  });

  it("the clients' lines after <!-- workload-examples -->: the allowed ones print the origin's answer, the denied one the policy's 403", async () => {
    await docHostsAreOurs();
    const rule = docBlock("### HTTPS with L7 rules", "yaml");
    const policy = docPolicy(`version: 1\nnetwork:\n  rules:\n${rule.replace(/^/gm, "    ")}`);
    await createReady(fx, DOCS, { policy });
    const lines = docBlock("<!-- workload-examples -->", "sh").split("\n").filter((l) => l.trim() !== "");
    expect(lines.length).toBeGreaterThanOrEqual(6);
    for (const l of lines) {
      const r = await inSandbox(["sh", "-c", l], DOCS);
      if (l.includes("403")) {
        expect(JSON.parse(r.stdout), l).toMatchObject({ error: "policy_denied", reason: "path_not_allowed" });
      } else {
        expect({ line: l, code: r.code, stderr: r.stderr }).toEqual({ line: l, code: 0, stderr: "" });
        expect(r.stdout, l).toMatch(/^\{"full_name":"o\/r","authorization":null\}\n+$|^hello from the repo\n$/);
      }
    }
  });

  it("Credentials: the block that sets the secrets, creates `agent` and runs curl in it, on the host as written; the origin gets the secret, the workload holds the placeholder", async () => {
    await docHostsAreOurs();
    const at = mkdtempSync(join(dir, "doc-"));
    const marker = "The workload holds only **placeholders**";
    writeFileSync(join(at, "policy.yaml"), docPolicy(docBlock(marker, "yaml")));
    // `sandgate` is this build's CLI, pointed at this gateway.
    writeFileSync(join(at, "sandgate"), `#!/bin/sh\nexec ${process.execPath} ${CLI_MAIN} "$@"\n`, { mode: 0o755 });
    const block = docBlock(marker, "sh");
    expect(block).toContain("sandgate sandbox exec agent -- sh -c 'curl");
    try {
      // Not spawnSync: the gateway answering the block's CLI runs in this process.
      const r = await runProgram("bash", ["--norc", "-euo", "pipefail", "-c", block], {
        cwd: at,
        env: { ...process.env, PATH: `${at}:${process.env.PATH ?? ""}`, ...fx.cliEnv, GITHUB_TOKEN: "ghp_not_a_real_token_0123456789", SEARCH_KEY: "search-key-for-the-test" },
      });
      expect(r.code, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout.trim().split("\n").at(-1)!)).toEqual({ full_name: "o/r", authorization: "Bearer ghp_not_a_real_token_0123456789" });
      expect((await inSandbox(["sh", "-c", 'echo "$GITHUB_TOKEN"'], "agent")).stdout).toBe("sandgate:secret:github\n");
      // The same request from a client that ignores the proxy: the transparent path swaps the placeholder too.
      const direct = await inSandbox(["sh", "-c", `curl -sS --noproxy '*' -H "Authorization: Bearer $GITHUB_TOKEN" https://api.github.com/repos/o/r`], "agent");
      expect(JSON.parse(direct.stdout.trim()), direct.stderr).toEqual({ full_name: "o/r", authorization: "Bearer ghp_not_a_real_token_0123456789" });
    } finally {
      await fx.t.api("DELETE", "/v1/sandboxes/agent");
      await waitDeleted(fx, "agent", 60_000);
    }
  });
});
