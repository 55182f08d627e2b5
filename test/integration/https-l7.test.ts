// L7 rules on HTTPS end to end on a real daemon: the gateway issues the sandbox's CA, the
// supervisor terminates the workload's TLS for an endpoint with rules, and node's own TLS
// client in the workload trusts it with no flag of its own (NODE_EXTRA_CA_CERTS, set by the
// sandbox). TLS origin containers on the egress network: one whose certificate the
// supervisor trusts (SANDGATE_ORIGIN_CA's role, given to the driver), one it does not.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LeafCertificates } from "../../src/supervisor/tls/leaf-certs.js";
import { issueSandboxCa, type CaMaterial } from "../../src/util/x509.js";
import { deleteAllAndCheckMonitors, startDockerFixture, type DockerFixture } from "../support/docker-fixture.js";
import { eventually } from "../support/gateway-fixture.js";
import { createReady, execIn } from "../support/recovery-helpers.js";

const out = async (name: string, cmd: string[]): Promise<string> => (await execIn(fx, name, cmd)).stdout;

let fx: DockerFixture;
let originCa: CaMaterial;
const GOOD = "tls-origin-l7";
const UNTRUSTED = "tls-untrusted-l7";

const POLICY = `version: 1
network:
  rules:
    - name: repos-read
      endpoints:
        - host: ${GOOD}
          port: 8443
          protocol: https
          allowPrivate: ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]
          rules:
            - methods: [GET]
              paths: ["/repos/**"]
    - name: untrusted
      endpoints:
        - host: ${UNTRUSTED}
          port: 8443
          protocol: https
          allowPrivate: ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]
          rules:
            - methods: [GET]
`;

/** From the workload: CONNECT through its proxy, TLS with node's default trust (no ca option), one request. Prints "<status> <body>". */
const HTTPS = (host: string, method: string, path: string): string[] => [
  "node",
  "-e",
  `const net=require("net"),tls=require("tls"),https=require("https");
   const p=new URL(process.env.HTTPS_PROXY);
   const s=net.connect(Number(p.port),p.hostname,()=>s.write("CONNECT ${host}:8443 HTTP/1.1\\r\\nHost: ${host}:8443\\r\\n\\r\\n"));
   let b="";const onData=(d)=>{b+=d.toString("latin1");const e=b.indexOf("\\r\\n\\r\\n");if(e<0)return;s.off("data",onData);
     const st=b.split(" ")[1];if(st!=="200"){console.log("CONNECT "+st+" "+b.slice(e+4));process.exit(0)}
     const t=tls.connect({socket:s,servername:"${host}"});
     t.on("error",(err)=>{console.log("TLS "+err.code);process.exit(0)});
     const r=https.request({createConnection:()=>t,method:"${method}",path:"${path}",headers:{host:"${host}"}},(res)=>{let o="";res.on("data",(d)=>o+=d);res.on("end",()=>{console.log(res.statusCode+" "+(res.headers["x-proxy-error"]||"-")+" "+o);process.exit(0)})});
     r.on("error",(err)=>{console.log("ERR "+err.code);process.exit(0)});r.end()};
   s.on("data",onData);s.on("error",(e)=>console.log("ERR "+e.code));`,
];

async function startTlsOrigin(name: string, pem: { certPem: string; keyPem: string }): Promise<void> {
  const created = await fx.engine.createContainer(name, {
    Image: fx.driver.imageRefs!.workload.id,
    Cmd: ["node", "-e", 'require("https").createServer({ cert: process.env.CERT, key: process.env.KEY }, (q, s) => s.end("origin " + q.method + " " + q.url)).listen(8443)'],
    Env: [`CERT=${pem.certPem}`, `KEY=${pem.keyPem}`],
    HostConfig: { NetworkMode: `sandgate-egress-${fx.driver.gatewayId}`, RestartPolicy: { Name: "always" } },
  });
  if (created.kind !== "ok") throw new Error(`${name} create: ${JSON.stringify(created)}`);
  expect((await fx.engine.startContainer(created.body.Id)).kind).toBe("ok");
}

beforeAll(async () => {
  originCa = await issueSandboxCa("test origins");
  fx = await startDockerFixture({ liveRestore: true, name: "l7tls", originCaPem: originCa.certPem });
  await startTlsOrigin(GOOD, await new LeafCertificates(originCa).issuePem(GOOD));
  // Signed by a CA the supervisor does not trust.
  await startTlsOrigin(UNTRUSTED, await new LeafCertificates(await issueSandboxCa("stranger")).issuePem(UNTRUSTED));
});

afterAll(async () => {
  if (fx) await deleteAllAndCheckMonitors(fx);
  await fx?.close();
});

describe("HTTPS with L7 rules, terminated in the boundary", () => {
  it("GET on an allowed path reaches the origin; POST and another path are 403 with the policy body; node trusts the sandbox CA without flags", async () => {
    await createReady(fx, "l7", { policy: POLICY });
    // The origin container may still be starting.
    const ok = await eventually(async () => {
      const r = (await out("l7", HTTPS(GOOD, "GET", "/repos/a/b?x=1"))).trim();
      return r.startsWith("200 ") ? r : undefined;
    }, 30_000, "the allowed request");
    expect(ok).toBe("200 - origin GET /repos/a/b?x=1");
    const post = (await out("l7", HTTPS(GOOD, "POST", "/repos/a"))).trim();
    expect(post).toMatch(/^403 sandgate-policy /);
    expect(JSON.parse(post.split(" ").slice(2).join(" "))).toMatchObject({ error: "policy_denied", reason: "method_not_allowed", method: "POST", path: "/repos/a" });
    const user = (await out("l7", HTTPS(GOOD, "GET", "/user"))).trim();
    expect(JSON.parse(user.split(" ").slice(2).join(" "))).toMatchObject({ reason: "path_not_allowed" });
    // The audit trail has the decided requests, with method and path.
    await eventually(async () => {
      const a = (await fx.t.api("GET", `/v1/sandboxes/l7/audit?decision=deny`)).body as { audit: { event: { method?: string; path?: string } }[] };
      return a.audit.some((r) => r.event.method === "POST" && r.event.path === "/repos/a") ? true : undefined;
    }, 15_000, "the denial in the audit trail");
  });

  it("an origin whose certificate the supervisor does not trust is a 502 sandgate-upstream-tls", async () => {
    await createReady(fx, "l7-bad", { policy: POLICY });
    const r = await eventually(async () => {
      const o = (await out("l7-bad", HTTPS(UNTRUSTED, "GET", "/x"))).trim();
      return o.startsWith("502 ") ? o : undefined;
    }, 30_000, "the 502");
    expect(r).toMatch(/^502 sandgate-upstream-tls .*"error":"upstream_certificate"/);
  });

  it("the workload has the CA certificate and the trust variables, never the CA key", async () => {
    await createReady(fx, "l7-trust", { policy: POLICY });
    const env = await out("l7-trust", ["env"]);
    for (const v of ["SSL_CERT_FILE=/etc/sandgate/ca-bundle.pem", "REQUESTS_CA_BUNDLE=/etc/sandgate/ca-bundle.pem", "CURL_CA_BUNDLE=/etc/sandgate/ca-bundle.pem", "GIT_SSL_CAINFO=/etc/sandgate/ca-bundle.pem", "NODE_EXTRA_CA_CERTS=/etc/sandgate/ca.pem"]) {
      expect(env).toContain(v);
    }
    expect(await out("l7-trust", ["sh", "-c", "grep -c 'BEGIN CERTIFICATE' /etc/sandgate/ca-bundle.pem"])).not.toBe("1\n");
    // Nothing the workload can read holds a private key.
    expect(await out("l7-trust", ["sh", "-c", "grep -rl 'PRIVATE KEY' /etc /sandbox /tmp /proc/1/environ 2>/dev/null; true"])).toBe("");
  });
});
