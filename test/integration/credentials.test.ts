// Credentials the workload never sees, end to end on a real daemon: the workload holds only a
// placeholder (GITHUB_TOKEN=sandgate:secret:github), node's own TLS client in the workload
// sends it, the supervisor swaps it for the value where the policy binds it and refuses it
// elsewhere. TLS origin containers answer with SHA-256 digests of what they received, so the
// test can tell the value arrived while nothing of it goes back to the workload. Then: no
// secret byte in anything the workload can read, nor in the gateway's logs, events, audit or
// API answers, nor in the supervisor's log.
import { createHash, randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LeafCertificates } from "../../src/supervisor/tls/leaf-certs.js";
import { issueSandboxCa, type CaMaterial } from "../../src/util/x509.js";
import { deleteAllAndCheckMonitors, startDockerFixture, type DockerFixture } from "../support/docker-fixture.js";
import { eventually } from "../support/gateway-fixture.js";
import { createReady, execIn } from "../support/recovery-helpers.js";

const VALUE = `ghp_it-${randomBytes(12).toString("hex")}`;
const VALUE2 = `ghp_it2-${randomBytes(12).toString("hex")}`;
const KEY = `key_it-${randomBytes(12).toString("hex")}`;
const SECRET_FORMS = [VALUE, VALUE2, KEY].flatMap((v) => [v, Buffer.from(v).toString("base64"), Buffer.from(`x-access-token:${v}`).toString("base64")]);
const sha = (s: string): string => createHash("sha256").update(s).digest("hex");

const BOUND = "cred-origin";
const OTHER = "cred-other";
const PRIVATE = `["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]`;
const POLICY = `version: 1
network:
  rules:
    - name: github
      endpoints:
        - host: ${BOUND}
          port: 8443
          protocol: https
          allowPrivate: ${PRIVATE}
          credentials:
            - secret: github
              paths: ["/repos/**"]
              body: true
            - header: X-Api-Key
              value: "key {{secret:apikey}}"
    - name: other
      endpoints:
        - host: ${OTHER}
          port: 8443
          protocol: https
          tls: terminate
          allowPrivate: ${PRIVATE}
`;

let fx: DockerFixture;
let originCa: CaMaterial;
const logLines: string[] = [];

/** The origin: digests of what it received, never the bytes themselves. */
const ORIGIN = `const h=(s)=>require("crypto").createHash("sha256").update(s??"").digest("hex");
require("https").createServer({cert:process.env.CERT,key:process.env.KEY},(q,s)=>{let b="";q.on("data",(d)=>b+=d);q.on("end",()=>{
  const basic=/^Basic (.*)$/.exec(q.headers.authorization??"");
  s.end(JSON.stringify({url:h(q.url),auth:h(q.headers.authorization),basic:basic?h(Buffer.from(basic[1],"base64").toString()):null,key:h(q.headers["x-api-key"]),body:h(b)}))})}).listen(8443)`;

async function startTlsOrigin(name: string): Promise<void> {
  const pem = await new LeafCertificates(originCa).issuePem(name);
  const created = await fx.engine.createContainer(name, {
    Image: fx.driver.imageRefs!.workload.id,
    Cmd: ["node", "-e", ORIGIN],
    Env: [`CERT=${pem.certPem}`, `KEY=${pem.keyPem}`],
    HostConfig: { NetworkMode: `sandgate-egress-${fx.driver.gatewayId}`, RestartPolicy: { Name: "always" } },
  });
  if (created.kind !== "ok") throw new Error(`${name} create: ${JSON.stringify(created)}`);
  expect((await fx.engine.startContainer(created.body.Id)).kind).toBe("ok");
}

interface Req {
  host: string;
  method?: string;
  path: string;
  headers?: Record<string, string>;
  body?: string;
}

/**
 * From the workload: CONNECT through its proxy, TLS with node's default trust, one request.
 * "$TOKEN" in the path, headers and body is the workload's own GITHUB_TOKEN (the placeholder).
 */
const HTTPS = (r: Req): string[] => [
  "node",
  "-e",
  `const r=JSON.parse(process.argv[1]);const sub=(v)=>v.split("$TOKEN").join(process.env.GITHUB_TOKEN);
   const basic=(v)=>v.replace(/^Basic64 (.*)$/,(_m,c)=>"Basic "+Buffer.from(c).toString("base64"));
   const headers={host:r.host};for(const [k,v] of Object.entries(r.headers||{}))headers[k]=basic(sub(v));
   const net=require("net"),tls=require("tls"),https=require("https");const p=new URL(process.env.HTTPS_PROXY);
   const s=net.connect(Number(p.port),p.hostname,()=>s.write("CONNECT "+r.host+":8443 HTTP/1.1\\r\\nHost: "+r.host+":8443\\r\\n\\r\\n"));
   let b="";const onData=(d)=>{b+=d.toString("latin1");const e=b.indexOf("\\r\\n\\r\\n");if(e<0)return;s.off("data",onData);
     const st=b.split(" ")[1];if(st!=="200"){console.log("CONNECT "+st);process.exit(0)}
     const t=tls.connect({socket:s,servername:r.host});t.on("error",(err)=>{console.log("TLS "+err.code);process.exit(0)});
     const q=https.request({createConnection:()=>t,method:r.method||"GET",path:sub(r.path),headers},(res)=>{let o="";res.on("data",(d)=>o+=d);res.on("end",()=>{console.log(res.statusCode+" "+(res.headers["x-proxy-error"]||"-")+" "+o);process.exit(0)})});
     q.on("error",(err)=>{console.log("ERR "+err.code);process.exit(0)});q.end(r.body===undefined?undefined:sub(r.body))};
   s.on("data",onData);s.on("error",(e)=>console.log("ERR "+e.code));`,
  JSON.stringify(r),
];

async function send(r: Req): Promise<{ status: number; proxyError: string; body: any }> {
  const line = (await execIn(fx, "cred", HTTPS(r))).stdout.trim();
  const [status, proxyError, ...rest] = line.split(" ");
  let body: unknown = rest.join(" ");
  try {
    body = JSON.parse(rest.join(" "));
  } catch {
    // not JSON: kept as text
  }
  return { status: Number(status), proxyError: proxyError ?? "", body };
}

beforeAll(async () => {
  originCa = await issueSandboxCa("test origins");
  fx = await startDockerFixture({ liveRestore: true, name: "cred", originCaPem: originCa.certPem, logSink: (line) => void logLines.push(line) });
  await startTlsOrigin(BOUND);
  await startTlsOrigin(OTHER);
  expect((await fx.t.api("PUT", "/v1/secrets/github", { value: VALUE })).status).toBe(200);
  expect((await fx.t.api("PUT", "/v1/secrets/apikey", { value: KEY })).status).toBe(200);
  await createReady(fx, "cred", { policy: POLICY, env: { GITHUB_TOKEN: "sandgate:secret:github" } });
  // The origin containers may still be starting.
  await eventually(async () => ((await send({ host: BOUND, path: "/repos/warm" })).status === 200 ? true : undefined), 60_000, "the origin answering");
  await eventually(async () => ((await send({ host: OTHER, path: "/warm" })).status === 200 ? true : undefined), 60_000, "the other origin answering");
});

afterAll(async () => {
  if (fx) await deleteAllAndCheckMonitors(fx);
  await fx?.close();
});

describe("credentials the workload never sees", () => {
  it("the origin receives the value: bearer header, Basic auth, query value, path segment, JSON body; and the injected header", async () => {
    const bearer = await send({ host: BOUND, path: "/repos/a?token=$TOKEN&page=1", headers: { authorization: "Bearer $TOKEN" } });
    expect(bearer.status).toBe(200);
    expect(bearer.body).toMatchObject({ auth: sha(`Bearer ${VALUE}`), url: sha(`/repos/a?token=${VALUE}&page=1`), key: sha(`key ${KEY}`) });
    const basic = await send({ host: BOUND, path: "/repos/$TOKEN/b", headers: { authorization: "Basic64 x-access-token:$TOKEN" } });
    expect(basic.body).toMatchObject({ basic: sha(`x-access-token:${VALUE}`), url: sha(`/repos/${VALUE}/b`) });
    const body = await send({ host: BOUND, method: "POST", path: "/repos/c", headers: { "content-type": "application/json" }, body: '{"token":"$TOKEN"}' });
    expect(body.body).toMatchObject({ body: sha(`{"token":"${VALUE}"}`) });
  });

  it("another allowed host carrying the placeholder gets the 403 naming the binding; a path outside it too; an unknown placeholder fails closed", async () => {
    const other = await send({ host: OTHER, path: "/x", headers: { authorization: "Bearer $TOKEN" } });
    expect(other).toMatchObject({ status: 403, proxyError: "sandgate-credential", body: { error: "credential_endpoint_mismatch", secret: "github", host: OTHER, bindings: [{ rule: "github", host: BOUND, ports: [8443], paths: ["/repos/**"] }] } });
    // The same host without the placeholder is allowed: the refusal is the placeholder's.
    expect((await send({ host: OTHER, path: "/x" })).status).toBe(200);
    expect(await send({ host: BOUND, path: "/user?t=$TOKEN" })).toMatchObject({ status: 403, body: { error: "credential_endpoint_mismatch", path: "/user" } });
    expect(await send({ host: BOUND, path: "/repos/a", headers: { authorization: "Bearer sandgate:secret:nope" } })).toMatchObject({ status: 403, body: { error: "credential_unknown", secret: "nope" } });
  });

  it("a changed secret reaches the running sandbox with an ack (set --wait), and its requests carry the new value", async () => {
    const set = await fx.t.api("PUT", "/v1/secrets/github", { value: VALUE2, wait: 60 });
    expect(set.body).toMatchObject({ usedBy: ["cred"], pushed: ["cred"], acknowledged: ["cred"], pending: [] });
    const r = await send({ host: BOUND, path: "/repos/a", headers: { authorization: "Bearer $TOKEN" } });
    expect(r.body).toMatchObject({ auth: sha(`Bearer ${VALUE2}`) });
  });

  it("the workload searching its environment, every file it can read and /proc finds no secret byte", async () => {
    expect((await execIn(fx, "cred", ["sh", "-c", "echo $GITHUB_TOKEN"])).stdout).toBe("sandgate:secret:github\n");
    // The patterns come on stdin (never argv or a file); the search skips its own /proc entry.
    const SEARCH = `const fs=require("fs");const pats=require("fs").readFileSync(0,"utf8").split("\\n").filter(Boolean).map((p)=>Buffer.from(p));
      const self=String(process.pid);let files=0;const hits=[];
      const scan=(f)=>{let b;try{b=fs.readFileSync(f)}catch{return}files++;for(const p of pats)if(b.indexOf(p)>=0)hits.push(f)};
      const walk=(d,depth)=>{let es;try{es=fs.readdirSync(d,{withFileTypes:true})}catch{return}
        for(const e of es){const f=(d==="/"?"":d)+"/"+e.name;
          if(d==="/"&&(e.name==="sys"||e.name==="proc"))continue;
          if(e.isDirectory())walk(f,depth+1);else if(e.isFile())scan(f)}};
      walk("/",0);
      for(const pid of fs.readdirSync("/proc")){if(!/^[0-9]+$/.test(pid)||pid===self)continue;
        let es;try{es=fs.readdirSync("/proc/"+pid,{withFileTypes:true})}catch{continue}
        for(const e of es)if(e.isFile()&&!["mem","pagemap","clear_refs","kpageflags"].includes(e.name))scan("/proc/"+pid+"/"+e.name)}
      for(const e of fs.readdirSync("/proc",{withFileTypes:true}))if(e.isFile()&&e.name!=="kmsg"&&e.name!=="kcore")scan("/proc/"+e.name);
      console.log(JSON.stringify({files,hits}))`;
    const session = await fx.t.gw.service.exec("cred", { cmd: ["node", "-e", SEARCH], tty: false });
    let stdout = "";
    session.stdout.on("data", (b: Buffer) => (stdout += b.toString()));
    session.stdin.end(SECRET_FORMS.join("\n") + "\n");
    expect(await session.exitCode).toBe(0);
    const found = JSON.parse(stdout) as { files: number; hits: string[] };
    // It did read the filesystem (node's own files, /etc, /proc of its processes).
    expect(found.files).toBeGreaterThan(100);
    expect(found.hits).toEqual([]);
  });

  it("the gateway's logs, events, audit and API answers, and the supervisor's log, contain none", async () => {
    const s = (await fx.t.api("GET", "/v1/sandboxes/cred")).body;
    const supervisorLog = await fx.engine.containerLogs(s.runtime.supervisor.id, 100_000);
    expect(supervisorLog.kind).toBe("ok");
    const supLines = supervisorLog.kind === "ok" ? supervisorLog.body.join("\n") : "";
    // Positive controls: the secrets travelled, the refusal was audited.
    expect(logLines.join("")).toContain("supervisor_secrets_sent");
    expect(supLines).toContain("secrets received");
    const audit = await eventually(async () => {
      const a = (await fx.t.api("GET", "/v1/sandboxes/cred/audit")).body;
      return JSON.stringify(a).includes("credential_endpoint_mismatch") ? a : undefined;
    }, 30_000, "the refusal in the audit trail");
    const everything = [
      logLines.join(""),
      supLines,
      JSON.stringify(audit),
      JSON.stringify((await fx.t.api("GET", "/v1/sandboxes/cred/events")).body),
      JSON.stringify(s),
      JSON.stringify((await fx.t.api("GET", "/v1/secrets")).body),
      JSON.stringify((await fx.t.api("GET", "/v1/sandboxes/cred/policy")).body),
      JSON.stringify((await fx.t.api("GET", "/v1/status")).body),
    ].join("\n");
    for (const form of SECRET_FORMS) expect(everything).not.toContain(form);
  });
});
