// What a CONNECT tunnel is (tcp, blind https, terminated https) and whether an open one may
// stay open: every combination of endpoints and deny entries for one host:port, against an
// oracle written from the rules in docs/policy.md ("CONNECT tunnels").
import { describe, expect, it } from "vitest";
import { decideTunnel, policyFromObject, tunnelKind, tunnelStaysOpen, type Policy, type TunnelKind } from "../../../src/policy/index.js";

const HOST = "svc.example.test";
const PORT = 7000;

type HttpsEndpoint = "none" | "passthrough" | "terminate";
type DenyEntry = "none" | "any" | "http" | "https" | "tcp" | "other-port" | "other-host";

/** enforce; deny entries in audit mode; the whole policy in audit mode. */
type Mode = "enforce" | "audit-deny" | "audit-policy";

function build(tcp: boolean, https: HttpsEndpoint, deny: DenyEntry, mode: Mode = "enforce"): Policy {
  const rules: object[] = [];
  // Rule names say which endpoint allowed a tunnel.
  if (tcp) rules.push({ name: "raw", endpoints: [{ host: HOST, port: PORT, protocol: "tcp" }] });
  if (https === "passthrough") rules.push({ name: "tls", endpoints: [{ host: HOST, port: PORT, protocol: "https" }] });
  if (https === "terminate") rules.push({ name: "tls", endpoints: [{ host: HOST, port: PORT, protocol: "https", rules: [{ methods: ["GET"] }] }] });
  const denies: object[] = [];
  if (deny === "any") denies.push({ name: "no", host: HOST });
  if (deny === "http" || deny === "https" || deny === "tcp") denies.push({ name: "no", host: HOST, port: PORT, protocol: deny });
  if (deny === "other-port") denies.push({ name: "no", host: HOST, port: PORT + 1 });
  if (deny === "other-host") denies.push({ name: "no", host: "other.example.test" });
  const audited = mode === "audit-deny" ? denies.map((d) => ({ ...d, enforcement: "audit" })) : denies;
  const r = policyFromObject({ version: 1, network: { rules, deny: audited, ...(mode === "audit-policy" && { enforcement: "audit" }) } });
  if (!r.ok) throw new Error(r.errors.join("; "));
  return r.policy;
}

type Expected =
  | { allow: true; protocol: "tcp" | "https"; kind: TunnelKind; rule?: string; wouldDeny?: string }
  | { allow: false; protocol: "tcp" | "https"; reason: string };

/**
 * Audit mode, as docs/policy.md states it: what enforcing allows is unchanged; what it denies
 * goes through as a would-deny — with the endpoint's own TLS mode when an endpoint grants it
 * and a deny entry flags it, raw when no rule grants it. An audit-mode deny entry flags the
 * readings its protocol covers that a rule grants (tcp, https, or any); under the whole
 * policy's audit mode every entry flags what it covers, http included.
 */
function auditOracle(tcp: boolean, https: HttpsEndpoint, deny: DenyEntry, mode: Exclude<Mode, "enforce">): Expected {
  if (mode === "audit-policy") {
    // Every reading sees its deny entry (none is needed to cover it); what no rule grants goes raw.
    const flagged = deny === "any" || deny === "tcp" || deny === "https" || deny === "http";
    const httpsHit = deny === "any" || deny === "https";
    const kind = https === "terminate" ? "https-terminated" : "https-blind";
    if (tcp && !flagged) return { allow: true, protocol: "tcp", kind: "tcp", rule: "raw" };
    if (https !== "none" && !httpsHit) return { allow: true, protocol: "https", kind, rule: "tls" };
    if (https !== "none") return { allow: true, protocol: "https", kind, rule: "tls", wouldDeny: "explicit_deny" };
    return { allow: true, protocol: "tcp", kind: "tcp", ...(tcp && { rule: "raw" }), wouldDeny: flagged ? "explicit_deny" : "no_matching_rule" };
  }
  const tcpFlag = deny === "any" || deny === "tcp";
  const httpsFlag = https !== "none" && (deny === "any" || deny === "https");
  const httpsKind = https === "terminate" ? "https-terminated" : "https-blind";
  if (tcp && !tcpFlag && !httpsFlag) return { allow: true, protocol: "tcp", kind: "tcp", rule: "raw" };
  if (https !== "none" && !httpsFlag) return { allow: true, protocol: "https", kind: httpsKind, rule: "tls" };
  if (https !== "none") return { allow: true, protocol: "https", kind: httpsKind, rule: "tls", wouldDeny: "explicit_deny" };
  if (tcp) return { allow: true, protocol: "tcp", kind: "tcp", rule: "raw", wouldDeny: "explicit_deny" };
  return { allow: false, protocol: "https", reason: "no_matching_rule" };
}

const expected = (tcp: boolean, https: HttpsEndpoint, deny: DenyEntry, mode: Mode): Expected =>
  mode === "enforce" ? oracle(tcp, https, deny) : auditOracle(tcp, https, deny, mode);

/** The documented rules, stated directly. */
function oracle(tcp: boolean, https: HttpsEndpoint, deny: DenyEntry): Expected {
  const applies = deny === "any" || deny === "http" || deny === "https" || deny === "tcp";
  // A raw tunnel can carry any protocol: any deny entry at host:port refuses it.
  const rawRefused = applies;
  // The https reading is refused by an entry for every protocol or for https.
  const httpsRefused = deny === "any" || deny === "https";
  if (tcp && !rawRefused) return { allow: true, protocol: "tcp", kind: "tcp", rule: "raw" };
  if (https !== "none" && !httpsRefused) return { allow: true, protocol: "https", kind: https === "terminate" ? "https-terminated" : "https-blind", rule: "tls" };
  if (httpsRefused) return { allow: false, protocol: "https", reason: "explicit_deny" };
  if (rawRefused) return { allow: false, protocol: "tcp", reason: "explicit_deny" };
  return { allow: false, protocol: "https", reason: "no_matching_rule" };
}

const COMBOS = (["enforce", "audit-deny", "audit-policy"] as const).flatMap((mode) =>
  [false, true].flatMap((tcp) =>
    (["none", "passthrough", "terminate"] as const).flatMap((https) =>
      (["none", "any", "http", "https", "tcp", "other-port", "other-host"] as const).map((deny) => ({ mode, tcp, https, deny })),
    ),
  ),
);

describe("decideTunnel: which protocol a CONNECT is", () => {
  it.each(COMBOS)("$mode: tcp endpoint $tcp, https endpoint $https, deny $deny", ({ mode, tcp, https, deny }) => {
    const got = decideTunnel(build(tcp, https, deny, mode), HOST, PORT);
    const want = expected(tcp, https, deny, mode);
    expect(got.protocol).toBe(want.protocol);
    if (want.allow) {
      expect(got.decision).toMatchObject({ allow: true, ...(want.rule !== undefined && { rule: want.rule }) });
      expect(got.decision.allow && got.decision.wouldDeny?.reason).toBe(want.wouldDeny);
      expect(tunnelKind(got)).toBe(want.kind);
    } else {
      expect(got.decision).toMatchObject({ allow: false, reason: want.reason });
      if (want.reason === "explicit_deny") expect(got.decision).toMatchObject({ rule: "no" });
    }
  });

  it("a tcp endpoint for another port or host allows nothing here; its own allowPrivate is the one used", () => {
    const r = policyFromObject({
      version: 1,
      network: {
        rules: [
          { name: "raw", endpoints: [{ host: HOST, port: PORT + 1, protocol: "tcp" }, { host: "*.example.test", port: PORT, protocol: "tcp", allowPrivate: ["10.0.0.0/8"] }] },
          { name: "tls", endpoints: [{ host: HOST, port: PORT, protocol: "https", allowPrivate: ["192.168.0.0/16"] }] },
        ],
      },
    });
    if (!r.ok) throw new Error(r.errors.join("; "));
    expect(decideTunnel(r.policy, HOST, PORT)).toEqual({ protocol: "tcp", decision: { allow: true, rule: "raw", allowPrivate: ["10.0.0.0/8"] } });
    expect(decideTunnel(r.policy, "svc.other.test", PORT).decision).toMatchObject({ allow: false, reason: "no_matching_rule" });
    expect(decideTunnel(r.policy, HOST, PORT + 2).decision).toMatchObject({ allow: false, reason: "no_matching_rule" });
  });
});

describe("tunnelStaysOpen: an open tunnel under a new policy", () => {
  const KINDS: TunnelKind[] = ["tcp", "https-blind", "https-terminated"];
  const cases = KINDS.flatMap((kind) => COMBOS.map((c) => ({ kind, ...c })));
  it.each(cases)("$kind under $mode: tcp $tcp, https $https, deny $deny", ({ kind, mode, tcp, https, deny }) => {
    const now = expected(tcp, https, deny, mode);
    // Raw bytes were never checked: only a tcp grant keeps them. A blind tunnel closes when
    // requests must now be seen. A terminated one stays on any grant (each request is decided).
    const stays = now.allow && (kind === "tcp" ? now.kind === "tcp" : kind === "https-blind" ? now.kind !== "https-terminated" : true);
    const d = tunnelStaysOpen(build(tcp, https, deny, mode), kind, HOST, PORT);
    expect(d.allow).toBe(stays);
  });
});
