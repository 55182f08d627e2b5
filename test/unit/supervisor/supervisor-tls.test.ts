// The egress proxy terminating https where the policy has L7 rules: a real TLS client
// (node's https, trusting only the sandbox CA) through a real CONNECT, the proxy, and a
// TLS origin on loopback whose certificate the proxy verifies.
import http from "node:http";
import https from "node:https";
import net from "node:net";
import tls from "node:tls";
import { eventually } from "../../support/gateway-fixture.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { policyFromObject, type Policy } from "../../../src/policy/index.js";
import { PolicyHolder } from "../../../src/supervisor/policy-holder.js";
import { createEgressProxy, type AuditEvent, type EgressProxy } from "../../../src/supervisor/proxy/index.js";
import { silentLogger } from "../../../src/supervisor/logger.js";
import { LeafCertificates, issueSandboxCa, type CaMaterial } from "../../../src/supervisor/tls/leaf-certs.js";
import { lazyLeafSource } from "../../../src/supervisor/tls/lazy-leaves.js";

let sandboxCa: CaMaterial;
let originCa: CaMaterial;
let origin: https.Server;
let originPort: number;
let proxy: EgressProxy;
let noCaProxy: EgressProxy;
let holder: PolicyHolder;
const audit: AuditEvent[] = [];
const originSaw: string[] = [];

function policy(endpoints: object[]): Policy {
  const p = policyFromObject({ version: 1, network: { rules: [{ name: "gh", endpoints }] } });
  if (!p.ok) throw new Error(p.errors.join("; "));
  return p.policy;
}
const LOOPBACK = ["127.0.0.0/8"];
const withRules = () => policy([{ host: "api.test", port: originPort, protocol: "https", allowPrivate: LOOPBACK, rules: [{ methods: ["GET"], paths: ["/repos/**"] }] }]);

beforeAll(async () => {
  sandboxCa = await issueSandboxCa("sbx_tls");
  originCa = await issueSandboxCa("origin");
  const originLeafs = new LeafCertificates(originCa);
  origin = https.createServer({ SNICallback: (name, cb) => void originLeafs.context(name === "wrong.test" ? "other.test" : name).then((c) => cb(null, c), cb) }, (req, res) => {
    originSaw.push(`${req.method} ${req.url} ${req.headers.host}`);
    res.end(`origin: ${req.method} ${req.url}`);
  });
  await new Promise<void>((r) => origin.listen(0, "127.0.0.1", r));
  originPort = (origin.address() as net.AddressInfo).port;
  holder = new PolicyHolder({ policy: withRules(), revision: 1 });
  const common = { policy: holder, resolve: () => Promise.resolve(["127.0.0.1"]), onAudit: (e: AuditEvent) => audit.push(e), logger: silentLogger };
  // The supervisor's own leaf source: the certificate code is loaded on the first terminated tunnel.
  proxy = createEgressProxy({ ...common, tls: lazyLeafSource(sandboxCa), upstreamCa: originCa.certPem });
  await proxy.listen(0, "127.0.0.1");
  noCaProxy = createEgressProxy(common);
  await noCaProxy.listen(0, "127.0.0.1");
});
afterAll(async () => {
  await proxy.close(0);
  await noCaProxy.close(0);
  origin.close();
});

const portOf = (p: EgressProxy): number => (p.server.address() as net.AddressInfo).port;

/** CONNECT, then TLS trusting only the sandbox CA, then one request. */
function viaProxy(host: string, method: string, path: string, p = proxy): Promise<{ status: number; body: string; headers: http.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const c = http.request({ host: "127.0.0.1", port: portOf(p), method: "CONNECT", path: `${host}:${originPort}` });
    c.on("connect", (res, socket, head) => {
      if (res.statusCode !== 200) {
        let body = head.toString();
        socket.on("data", (d: Buffer) => (body += d.toString()));
        socket.on("close", () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
        return;
      }
      const secure = tls.connect({ socket, servername: host, ca: sandboxCa.certPem });
      secure.on("error", reject);
      const req = https.request({ createConnection: () => secure, method, path, headers: { host } }, (r) => {
        let body = "";
        r.on("data", (d: Buffer) => (body += d.toString()));
        r.on("end", () => {
          resolve({ status: r.statusCode ?? 0, body, headers: r.headers });
          secure.destroy();
        });
      });
      req.on("error", reject);
      req.end();
    });
    c.on("error", reject);
    c.end();
  });
}

describe("the sandbox CA, checked at start though its certificate code loads later", () => {
  it("refuses a certificate that is not a CA, and a key that is not the certificate's", async () => {
    const leaf = await new LeafCertificates(sandboxCa).issuePem("leaf.test");
    const leafCert = leaf.certPem.slice(0, leaf.certPem.indexOf("-----END CERTIFICATE-----") + 25);
    expect(() => lazyLeafSource({ certPem: leafCert, keyPem: leaf.keyPem })).toThrow("tls.caCertPem is not a CA certificate");
    expect(() => lazyLeafSource({ certPem: sandboxCa.certPem, keyPem: originCa.keyPem })).toThrow("tls.caKeyPem is not the key of tls.caCertPem");
    expect(() => lazyLeafSource(sandboxCa)).not.toThrow();
  });
});

describe("https with L7 rules is terminated in the proxy", () => {
  it("an allowed method and path reaches the origin over verified TLS; the audit records method and path", async () => {
    const r = await viaProxy("api.test", "GET", "/repos/a/b?token=x");
    expect(r.status).toBe(200);
    expect(r.body).toBe("origin: GET /repos/a/b?token=x");
    expect(originSaw.at(-1)).toBe(`GET /repos/a/b?token=x api.test:${originPort}`);
    expect(audit.at(-1)).toMatchObject({ decision: "allow", protocol: "https", host: "api.test", method: "GET", path: "/repos/a/b", rule: "gh" });
  });

  it("a denied method or path is a 403 with the policy body; the origin never sees it", async () => {
    const before = originSaw.length;
    const post = await viaProxy("api.test", "POST", "/repos/a");
    expect(post.status).toBe(403);
    expect(post.headers["x-proxy-error"]).toBe("sandgate-policy");
    expect(JSON.parse(post.body)).toMatchObject({ error: "policy_denied", reason: "method_not_allowed", method: "POST", path: "/repos/a" });
    const user = await viaProxy("api.test", "GET", "/user");
    expect(JSON.parse(user.body)).toMatchObject({ reason: "path_not_allowed" });
    const override = await viaProxy("api.test", "GET", "/repos/a?_method=DELETE");
    expect(JSON.parse(override.body)).toMatchObject({ reason: "method_override_not_allowed" });
    expect(originSaw.length).toBe(before);
  });

  it("an origin whose certificate is not for the host is a 502 naming it, never a silent pass", async () => {
    holder.replace(policy([{ host: "wrong.test", port: originPort, protocol: "https", allowPrivate: LOOPBACK, rules: [{ methods: ["GET"] }] }]), 2);
    try {
      const r = await viaProxy("wrong.test", "GET", "/x");
      expect(r.status).toBe(502);
      expect(r.headers["x-proxy-error"]).toBe("sandgate-upstream-tls");
      expect(JSON.parse(r.body)).toMatchObject({ error: "upstream_certificate", code: "ERR_TLS_CERT_ALTNAME_INVALID" });
      // Allowed by the policy, yet its own outcome in the audit: not a plain allow.
      const rec = await eventually(() => audit.find((e) => e.host === "wrong.test" && e.status !== undefined), 10_000, "the request's record");
      expect(rec).toMatchObject({ decision: "allow", method: "GET", path: "/x", status: 502, reason: "upstream_certificate" });
    } finally {
      holder.replace(withRules(), 3);
    }
  });

  it("a proxy without a sandbox CA refuses such a tunnel (403 tls_termination_unavailable), never tunnels it blind", async () => {
    const r = await viaProxy("api.test", "GET", "/repos/a", noCaProxy);
    expect(r.status).toBe(403);
    expect(JSON.parse(r.body)).toMatchObject({ reason: "tls_termination_unavailable" });
  });

  it("an https endpoint without rules is still tunnelled blind (the workload's own TLS to the origin)", async () => {
    holder.replace(policy([{ host: "api.test", port: originPort, protocol: "https", allowPrivate: LOOPBACK }]), 4);
    try {
      // The client trusts the origin's CA: the certificate it sees is the origin's own.
      const r = await new Promise<string>((resolve, reject) => {
        const c = http.request({ host: "127.0.0.1", port: portOf(proxy), method: "CONNECT", path: `api.test:${originPort}` });
        c.on("connect", (_res, socket) => {
          const s = tls.connect({ socket, servername: "api.test", ca: originCa.certPem }, () => {
            resolve(s.getPeerX509Certificate()!.issuer);
            s.destroy();
          });
          s.on("error", reject);
        });
        c.on("error", reject);
        c.end();
      });
      expect(r).toMatch(/origin CA/);
    } finally {
      holder.replace(withRules(), 5);
    }
  });
});
