// Credentials in the egress proxy, on loopback with real parts: node's https client through a
// real CONNECT, the proxy terminating with the sandbox CA, and a TLS origin the proxy verifies
// that records what it received. The origin gets the value; the client, the refusals and the
// audit never do.
import http from "node:http";
import https from "node:https";
import net from "node:net";
import tls from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { policyFromObject, type Policy } from "../../../src/policy/index.js";
import { PolicyHolder } from "../../../src/supervisor/policy-holder.js";
import { createEgressProxy, type AuditEvent, type EgressProxy } from "../../../src/supervisor/proxy/index.js";
import { silentLogger } from "../../../src/supervisor/logger.js";
import { SecretVault } from "../../../src/supervisor/secret-vault.js";
import { LeafCertificates, issueSandboxCa, type CaMaterial } from "../../../src/supervisor/tls/leaf-certs.js";

const VALUE = "ghp_unit-S3CRET-9d2f/+=?&";
const KEY = "apikey-V4LUE-77";
let sandboxCa: CaMaterial;
let origin: https.Server;
let plainOrigin: http.Server;
let originPort: number;
let plainPort: number;
let proxy: EgressProxy;
const vault = new SecretVault();
const audit: AuditEvent[] = [];
/** What the origins received: method, url, headers (raw pairs), body. */
const received: { host: string; method: string; url: string; headers: string[]; body: string }[] = [];

const LOOPBACK = ["127.0.0.0/8"];
function makePolicy(): Policy {
  const p = policyFromObject({
    version: 1,
    network: {
      rules: [
        {
          name: "gh",
          endpoints: [
            { host: "api.test", port: originPort, protocol: "https", allowPrivate: LOOPBACK, credentials: [{ secret: "github", paths: ["/repos/**"] }] },
            { host: "upload.test", port: originPort, protocol: "https", allowPrivate: LOOPBACK, credentials: [{ secret: "github", body: { maxBytes: 256 } }] },
            { host: "keyed.test", port: originPort, protocol: "https", allowPrivate: LOOPBACK, credentials: [{ header: "X-Api-Key", value: "key {{secret:apikey}}" }] },
          ],
        },
        { name: "other", endpoints: [{ host: "other.test", port: originPort, protocol: "https", allowPrivate: LOOPBACK, tls: "terminate" }, { host: "plain.test", port: plainPort, protocol: "http", allowPrivate: LOOPBACK }] },
      ],
    },
  });
  if (!p.ok) throw new Error(p.errors.join("; "));
  return p.policy;
}

function record(req: http.IncomingMessage, res: http.ServerResponse): void {
  let body = "";
  req.on("data", (d: Buffer) => (body += d.toString("latin1")));
  req.on("end", () => {
    received.push({ host: req.headers.host ?? "", method: req.method ?? "", url: req.url ?? "", headers: req.rawHeaders, body });
    // Never echoes what it got: the client must not learn the value from this test's origin.
    res.end(`seen ${String(received.length)}`);
  });
}

beforeAll(async () => {
  sandboxCa = await issueSandboxCa("sbx_cred");
  const originCa = await issueSandboxCa("origin");
  const leafs = new LeafCertificates(originCa);
  origin = https.createServer({ SNICallback: (name, cb) => void leafs.context(name).then((c) => cb(null, c), cb) }, record);
  await new Promise<void>((r) => origin.listen(0, "127.0.0.1", r));
  originPort = (origin.address() as net.AddressInfo).port;
  plainOrigin = http.createServer(record);
  await new Promise<void>((r) => plainOrigin.listen(0, "127.0.0.1", r));
  plainPort = (plainOrigin.address() as net.AddressInfo).port;
  vault.replace(1, new Map([["github", Buffer.from(VALUE)], ["apikey", Buffer.from(KEY)]]));
  proxy = createEgressProxy({
    policy: new PolicyHolder({ policy: makePolicy(), revision: 1 }),
    resolve: () => Promise.resolve(["127.0.0.1"]),
    onAudit: (e) => audit.push(e),
    logger: silentLogger,
    tls: new LeafCertificates(sandboxCa),
    upstreamCa: originCa.certPem,
    credentials: vault,
  });
  await proxy.listen(0, "127.0.0.1");
});
afterAll(async () => {
  await proxy.close(0);
  origin.close();
  plainOrigin.close();
});

interface Answer {
  status: number;
  body: string;
  headers: http.IncomingHttpHeaders;
}

/** CONNECT, TLS trusting only the sandbox CA, one request. */
function viaProxy(host: string, method: string, path: string, headers: Record<string, string> = {}, body?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const c = http.request({ host: "127.0.0.1", port: (proxy.server.address() as net.AddressInfo).port, method: "CONNECT", path: `${host}:${String(originPort)}` });
    c.on("connect", (res, socket) => {
      if (res.statusCode !== 200) return reject(new Error(`CONNECT ${String(res.statusCode)}`));
      const secure = tls.connect({ socket, servername: host, ca: sandboxCa.certPem });
      secure.on("error", reject);
      const req = https.request({ createConnection: () => secure, method, path, headers: { host, ...headers } }, (r) => {
        let text = "";
        r.on("data", (d: Buffer) => (text += d.toString()));
        r.on("end", () => {
          resolve({ status: r.statusCode ?? 0, body: text, headers: r.headers });
          secure.destroy();
        });
      });
      req.on("error", reject);
      req.end(body);
    });
    c.on("error", reject);
    c.end();
  });
}

const last = () => received.at(-1)!;
const header = (name: string) => {
  const h = last().headers;
  const i = h.findIndex((x, k) => k % 2 === 0 && x.toLowerCase() === name);
  return i < 0 ? undefined : h[i + 1];
};

describe("placeholders swapped where the policy binds them", () => {
  it("a bearer header, a query value, a path segment and Basic auth: the origin receives the value, the client never", async () => {
    const basic = `Basic ${Buffer.from("x-access-token:sandgate:secret:github").toString("base64")}`;
    const r = await viaProxy("api.test", "GET", "/repos/sandgate:secret:github/x?token=sandgate%3Asecret%3Agithub&a=1", { authorization: "Bearer sandgate:secret:github", "x-basic": "no" });
    expect(r.status).toBe(200);
    const enc = encodeURIComponent(VALUE).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
    expect(last().url).toBe(`/repos/${enc}/x?token=${enc}&a=1`);
    expect(header("authorization")).toBe(`Bearer ${VALUE}`);
    expect(r.body).not.toContain(VALUE);
    await viaProxy("api.test", "GET", "/repos/y", { authorization: basic });
    expect(Buffer.from(header("authorization")!.slice(6), "base64").toString()).toBe(`x-access-token:${VALUE}`);
    // The audit keeps the path as the workload sent it: the placeholder, not the value.
    expect(JSON.stringify(audit)).not.toContain(VALUE);
    expect(audit.some((e) => e.path === "/repos/sandgate:secret:github/x" && e.decision === "allow")).toBe(true);
  });

  it("an injected header is set by the supervisor, replacing what the workload sent", async () => {
    await viaProxy("keyed.test", "GET", "/v1", { "x-api-key": "mine" });
    expect(last().headers.filter((_x, i) => i % 2 === 0 && last().headers[i]!.toLowerCase() === "x-api-key")).toHaveLength(1);
    expect(header("x-api-key")).toBe(`key ${KEY}`);
  });

  it("a body on an endpoint that opts in: swapped and re-framed; over the bound 413, encoded 415, nothing sent", async () => {
    const r = await viaProxy("upload.test", "POST", "/up", { "content-type": "application/json" }, '{"t":"sandgate:secret:github"}');
    expect(r.status).toBe(200);
    expect(JSON.parse(last().body)).toEqual({ t: VALUE });
    expect(header("content-length")).toBe(String(Buffer.byteLength(JSON.stringify({ t: VALUE }))));
    const before = received.length;
    const big = await viaProxy("upload.test", "POST", "/up", { "content-type": "text/plain" }, "x".repeat(257));
    expect(big.status).toBe(413);
    expect(JSON.parse(big.body)).toMatchObject({ error: "credential_body_too_large" });
    const gz = await viaProxy("upload.test", "POST", "/up", { "content-encoding": "gzip" }, "sandgate:secret:github");
    expect(gz.status).toBe(415);
    expect(received.length).toBe(before);
    // Exactly at the bound is read and sent.
    expect((await viaProxy("upload.test", "POST", "/up", { "content-type": "text/plain" }, "y".repeat(256))).status).toBe(200);
    // Where bodies are not opted in they pass untouched: the placeholder is not looked for.
    await viaProxy("api.test", "POST", "/repos/z", {}, "sandgate:secret:github");
    expect(last().body).toBe("sandgate:secret:github");
  });
});

describe("placeholders refused anywhere else", () => {
  it("another allowed host: 403 credential_endpoint_mismatch naming the binding, not the value; the origin never sees it", async () => {
    const before = received.length;
    const r = await viaProxy("other.test", "GET", "/x", { authorization: "Bearer sandgate:secret:github" });
    expect(r.status).toBe(403);
    expect(r.headers["x-proxy-error"]).toBe("sandgate-credential");
    const body = JSON.parse(r.body) as Record<string, unknown>;
    expect(body).toMatchObject({ error: "credential_endpoint_mismatch", secret: "github", where: "header", host: "other.test", bindings: [{ host: "api.test", paths: ["/repos/**"] }, { host: "upload.test" }] });
    expect(r.body).not.toContain(VALUE);
    // A path the binding does not cover is "anywhere else" too.
    expect((await viaProxy("api.test", "GET", "/user?t=sandgate:secret:github")).status).toBe(403);
    expect(received.length).toBe(before);
    expect(audit.at(-1)).toMatchObject({ decision: "deny", reason: "credential_endpoint_mismatch", host: "api.test", path: "/user" });
  });

  it("an unknown placeholder fails closed: 403 credential_unknown", async () => {
    const before = received.length;
    const r = await viaProxy("api.test", "GET", "/repos/a", { "x-token": "sandgate:secret:nope" });
    expect(r.status).toBe(403);
    expect(JSON.parse(r.body)).toMatchObject({ error: "credential_unknown", secret: "nope", bindings: [] });
    expect(received.length).toBe(before);
  });

  it("plain http carries no credential: a placeholder there is refused", async () => {
    const before = received.length;
    const r = await new Promise<Answer>((resolve, reject) => {
      http
        .get({ host: "127.0.0.1", port: (proxy.server.address() as net.AddressInfo).port, path: `http://plain.test:${String(plainPort)}/x`, headers: { authorization: "Bearer sandgate:secret:github" }, agent: false }, (res) => {
          let text = "";
          res.on("data", (d: Buffer) => (text += d.toString()));
          res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text, headers: res.headers }));
        })
        .on("error", reject);
    });
    expect(r.status).toBe(403);
    expect(JSON.parse(r.body)).toMatchObject({ error: "credential_endpoint_mismatch", host: "plain.test" });
    expect(received.length).toBe(before);
  });

  it("values dropped (lockdown): every placeholder fails closed, the injected header too", async () => {
    vault.clear();
    try {
      const r = await viaProxy("api.test", "GET", "/repos/a", { authorization: "Bearer sandgate:secret:github" });
      expect(JSON.parse(r.body)).toMatchObject({ error: "credential_unknown", message: 'the supervisor holds no value for secret "github" (not set, or deleted)' });
      expect(JSON.parse((await viaProxy("keyed.test", "GET", "/")).body)).toMatchObject({ error: "credential_unknown", secret: "apikey" });
    } finally {
      vault.replace(2, new Map([["github", Buffer.from(VALUE)], ["apikey", Buffer.from(KEY)]]));
    }
    expect((await viaProxy("api.test", "GET", "/repos/a", { authorization: "Bearer sandgate:secret:github" })).status).toBe(200);
  });
});
