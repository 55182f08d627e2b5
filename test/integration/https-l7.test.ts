// L7 rules on HTTPS end to end on a real daemon: the gateway issues the sandbox's CA, the
// supervisor terminates the workload's TLS for an endpoint with rules, and node's own TLS
// client in the workload trusts it with no flag of its own (NODE_EXTRA_CA_CERTS, set by the
// sandbox). TLS origin containers on the egress network: one whose certificate the
// supervisor trusts (SANDGATE_ORIGIN_CA's role, given to the driver), one it does not; the
// trusted one also answers WebSocket upgrades (a hand-made echo). Tunnels that are not raw
// holes: the same origin tunnelled blind (its ClientHello checked), and a raw TCP echo
// container behind a tcp endpoint.
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
const RAW = "raw-echo-l7";
const PRIVATE = `["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]`;

/** The trusted origin tunnelled blind (no rules), and the raw echo behind a tcp endpoint. */
const TUNNELS = `version: 1
network:
  rules:
    - name: blind
      endpoints:
        - { host: ${GOOD}, port: 8443, protocol: https, allowPrivate: ${PRIVATE} }
    - name: raw
      endpoints:
        - { host: ${RAW}, port: 9000, protocol: tcp, allowPrivate: ${PRIVATE} }
`;

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

/**
 * From the workload, through its proxy: CONNECT host:port, then by mode
 *   raw <text>     send text raw → "echo <text>" or "closed"
 *   tls <sni>      TLS pinning the origins' CA (argv 4, base64), SNI <sni>, one GET → "secure <body>", "TLS <code>" or "closed"
 *   ws <path>      TLS with node's default trust, an Upgrade to <path> and one frame → "101 <echo>" or "<status> <body>"
 */
const TUNNEL = (mode: string, host: string, port: number, arg: string): string[] => [
  "node",
  "-e",
  `const net=require("net"),tls=require("tls");const [mode,host,port,arg,ca]=process.argv.slice(1);
   const out=(x)=>{console.log(x);process.exit(0)};const p=new URL(process.env.HTTPS_PROXY);
   const s=net.connect(Number(p.port),p.hostname,()=>s.write("CONNECT "+host+":"+port+" HTTP/1.1\\r\\nHost: "+host+":"+port+"\\r\\n\\r\\n"));
   s.on("error",(e)=>out("ERR "+e.code));let b="";
   const collect=(t,done)=>{let got=Buffer.alloc(0);t.on("data",(d)=>{got=Buffer.concat([got,d]);done(got,false)});t.on("close",()=>done(got,true))};
   const onData=(d)=>{b+=d.toString("latin1");const e=b.indexOf("\\r\\n\\r\\n");if(e<0)return;s.off("data",onData);
     const st=b.split(" ")[1];if(st!=="200")out("CONNECT "+st);
     if(mode==="raw"){collect(s,(g,closed)=>out(closed&&g.length===0?"closed":"echo "+g));s.write(arg);return}
     const t=mode==="tls"?tls.connect({socket:s,servername:arg,ca:Buffer.from(ca,"base64").toString()}):tls.connect({socket:s,servername:host});
     t.on("error",(err)=>out("TLS "+err.code));
     if(mode==="tls"){let up=false;t.on("secureConnect",()=>{up=true;collect(t,(g,closed)=>{if(closed)out("secure "+g.toString().split("\\r\\n\\r\\n")[1])});t.write("GET /x HTTP/1.1\\r\\nHost: "+host+"\\r\\nConnection: close\\r\\n\\r\\n")});t.on("close",()=>{if(!up)out("closed")});return}
     t.on("secureConnect",()=>{collect(t,(g,closed)=>{const h=g.indexOf("\\r\\n\\r\\n");if(h<0){if(closed)out("closed");return}
       const head=g.subarray(0,h).toString(),rest=g.subarray(h+4),code=head.split(" ")[1];
       if(code!=="101"){if(closed)out(code+" "+rest);return}
       if(rest.length>=2&&rest.length>=2+(rest[1]&127))out("101 "+rest.subarray(2,2+(rest[1]&127)))});
       const f=Buffer.from("hi"),m=Buffer.from([1,2,3,4]);
       t.write("GET "+arg+" HTTP/1.1\\r\\nHost: "+host+"\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\\r\\nSec-WebSocket-Version: 13\\r\\n\\r\\n");
       t.write(Buffer.concat([Buffer.from([0x81,0x80|f.length]),m,Buffer.from(f.map((x,i)=>x^m[i%4]))]))})};
   s.on("data",onData);`,
  mode,
  host,
  String(port),
  arg,
  Buffer.from(originCa.certPem).toString("base64"),
];

/** An https origin ("origin <method> <url>") that also echoes WebSocket text frames (small, one per chunk). */
const TLS_ORIGIN = `const https=require("https"),crypto=require("crypto");
  const s=https.createServer({cert:process.env.CERT,key:process.env.KEY},(q,r)=>r.end("origin "+q.method+" "+q.url));
  s.on("upgrade",(q,sock)=>{const a=crypto.createHash("sha1").update(q.headers["sec-websocket-key"]+"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest("base64");
    sock.write("HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\nSec-WebSocket-Accept: "+a+"\\r\\n\\r\\n");
    sock.on("data",(d)=>{const n=d[1]&127,m=d.subarray(2,6),o=Buffer.from("echo "+Buffer.from(d.subarray(6,6+n).map((b,i)=>b^m[i%4])));sock.write(Buffer.concat([Buffer.from([0x81,o.length]),o]))})});
  s.listen(8443);`;

async function startTlsOrigin(name: string, pem: { certPem: string; keyPem: string }): Promise<void> {
  await startOrigin(name, ["node", "-e", TLS_ORIGIN], [`CERT=${pem.certPem}`, `KEY=${pem.keyPem}`]);
}

async function startOrigin(name: string, cmd: string[], env: string[] = []): Promise<void> {
  const created = await fx.engine.createContainer(name, {
    Image: fx.driver.imageRefs!.workload.id,
    Cmd: cmd,
    Env: env,
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
  await startOrigin(RAW, ["node", "-e", 'require("net").createServer((s) => s.pipe(s)).listen(9000)']);
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

describe("tunnels that are not raw holes, and WebSocket upgrades", () => {
  it("a blind https tunnel: the right SNI reaches the origin; another SNI and non-TLS bytes are closed and audited", async () => {
    await createReady(fx, "tun", { policy: TUNNELS });
    const ok = await eventually(async () => {
      const r = (await out("tun", TUNNEL("tls", GOOD, 8443, GOOD))).trim();
      return r.startsWith("secure ") ? r : undefined;
    }, 30_000, "the blind tunnel to the origin");
    // The workload's own TLS to the origin (pinning its CA): the proxy never saw the request.
    expect(ok).toBe("secure origin GET /x");
    expect((await out("tun", TUNNEL("tls", GOOD, 8443, "other.example"))).trim()).toMatch(/^(closed|TLS ECONNRESET)$/);
    expect((await out("tun", TUNNEL("raw", GOOD, 8443, "GET / HTTP/1.1\r\n\r\n"))).trim()).toBe("closed");
    await eventually(async () => {
      const a = (await fx.t.api("GET", `/v1/sandboxes/tun/audit?decision=deny`)).body as { audit: { event: { reason?: string } }[] };
      const reasons = a.audit.map((r) => r.event.reason);
      return reasons.includes("tls_sni_mismatch") && reasons.includes("not_tls") ? true : undefined;
    }, 15_000, "both closings in the audit trail");
  });

  it("a tcp endpoint carries raw bytes to an origin container", async () => {
    await createReady(fx, "tun-raw", { policy: TUNNELS });
    const r = await eventually(async () => {
      const o = (await out("tun-raw", TUNNEL("raw", RAW, 9000, "SSH-2.0-sandgate"))).trim();
      return o.startsWith("echo ") ? o : undefined;
    }, 30_000, "the raw echo");
    expect(r).toBe("echo SSH-2.0-sandgate");
    await eventually(async () => {
      const a = (await fx.t.api("GET", `/v1/sandboxes/tun-raw/audit?decision=allow`)).body as { audit: { event: { protocol?: string; host?: string } }[] };
      return a.audit.some((x) => x.event.protocol === "tcp" && x.event.host === RAW) ? true : undefined;
    }, 15_000, "the tcp allow in the audit trail");
  });

  it("a WebSocket inside a terminated tunnel: an allowed path upgrades and echoes, another is 403 with the policy body", async () => {
    await createReady(fx, "tun-ws", { policy: POLICY });
    const ok = await eventually(async () => {
      const r = (await out("tun-ws", TUNNEL("ws", GOOD, 8443, "/repos/live"))).trim();
      return r.startsWith("101 ") ? r : undefined;
    }, 30_000, "the allowed WebSocket");
    expect(ok).toBe("101 echo hi");
    const denied = (await out("tun-ws", TUNNEL("ws", GOOD, 8443, "/live"))).trim();
    expect(denied).toMatch(/^403 /);
    expect(JSON.parse(denied.slice(4))).toMatchObject({ error: "policy_denied", reason: "path_not_allowed", method: "GET", path: "/live" });
  });
});
