// Launch tokens (real Ed25519 JWTs) and the endpoint certificate, with their key files.
import { generateKeyPairSync } from "node:crypto";
import { X509Certificate } from "node:crypto";
import { mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SignJWT, decodeJwt, decodeProtectedHeader } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LaunchTokens, SIGNING_KEY_FILE, ensureSigningKey } from "../../../src/gateway/control/launch-tokens.js";
import { TLS_CERT_FILE, TLS_KEY_FILE, certificateFingerprint, ensureEndpointTls } from "../../../src/gateway/control/tls.js";
import { normalizeFingerprint } from "../../../src/protocol/wire.js";

let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "sandgate-keys-"));
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const mode = async (path: string): Promise<number> => (await stat(path)).mode & 0o777;

describe("launch tokens", () => {
  it("keeps one Ed25519 signing key in the state dir, mode 0600, stable across opens", async () => {
    const a = LaunchTokens.open(dir, "gw-1");
    const token = (await a.mint({ sandboxId: "sb", generation: 2, nonce: "n" })).token;
    expect(await mode(join(dir, SIGNING_KEY_FILE))).toBe(0o600);
    // A "restarted gateway" opening the same dir verifies tokens minted before.
    const b = LaunchTokens.open(dir, "gw-1");
    expect(await b.verify(token)).toMatchObject({ ok: true, claims: { sandboxId: "sb", generation: 2, nonce: "n" } });
    expect(ensureSigningKey(dir).asymmetricKeyType).toBe("ed25519");
  });

  it("binds sub, gen, nonce, aud, iss, jti and a 30-day exp, typed and EdDSA-signed", async () => {
    const t = LaunchTokens.open(dir, "gw-1");
    const before = Math.floor(Date.now() / 1000);
    const minted = await t.mint({ sandboxId: "sb-x", generation: 7, nonce: "secret" });
    const claims = decodeJwt(minted.token);
    expect(decodeProtectedHeader(minted.token)).toEqual({ alg: "EdDSA", typ: "sandgate-launch+jwt" });
    expect(claims).toMatchObject({ sub: "sb-x", gen: 7, nonce: "secret", aud: "sandgate-supervisor", iss: "gw-1", jti: minted.jti });
    expect((claims.exp ?? 0) - before).toBeGreaterThanOrEqual(30 * 24 * 3600 - 1);
    expect((claims.exp ?? 0) - before).toBeLessThanOrEqual(30 * 24 * 3600 + 1);
    const other = await t.mint({ sandboxId: "sb-x", generation: 7, nonce: "secret" });
    expect(other.jti).not.toBe(minted.jti);
  });

  it("names why a token is refused", async () => {
    const t = LaunchTokens.open(dir, "gw-1");
    const good = (await t.mint({ sandboxId: "sb", generation: 1, nonce: "n" })).token;
    const forger = new LaunchTokens(generateKeyPairSync("ed25519").privateKey, "gw-1");
    const otherGateway = new LaunchTokens(ensureSigningKey(dir), "gw-2");
    const old = new LaunchTokens(ensureSigningKey(dir), "gw-1", { now: () => Date.now() - 40 * 24 * 3600_000 });
    const key = ensureSigningKey(dir);
    const wrongAud = await new SignJWT({ gen: 1, nonce: "n" }).setProtectedHeader({ alg: "EdDSA", typ: "sandgate-launch+jwt" }).setIssuer("gw-1").setAudience("someone-else").setSubject("sb").setJti("j").setExpirationTime("1h").sign(key);
    const noNonce = await new SignJWT({ gen: 1 }).setProtectedHeader({ alg: "EdDSA", typ: "sandgate-launch+jwt" }).setIssuer("gw-1").setAudience("sandgate-supervisor").setSubject("sb").setJti("j").setExpirationTime("1h").sign(key);
    const [h, p] = good.split(".");
    const unsigned = `${Buffer.from(JSON.stringify({ alg: "none", typ: "sandgate-launch+jwt" })).toString("base64url")}.${p ?? ""}.`;
    const tampered = `${h ?? ""}.${Buffer.from(JSON.stringify({ ...decodeJwt(good), sub: "sb-other" })).toString("base64url")}.${good.split(".")[2] ?? ""}`;

    const reasons = async (token: string): Promise<string> => {
      const r = await t.verify(token);
      return r.ok ? "ok" : r.reason;
    };
    expect(await reasons(good)).toBe("ok");
    expect(await reasons((await forger.mint({ sandboxId: "sb", generation: 1, nonce: "n" })).token)).toBe("bad_signature");
    expect(await reasons(tampered)).toBe("bad_signature");
    expect(await reasons((await otherGateway.mint({ sandboxId: "sb", generation: 1, nonce: "n" })).token)).toBe("wrong_issuer");
    expect(await reasons((await old.mint({ sandboxId: "sb", generation: 1, nonce: "n" })).token)).toBe("expired");
    expect(await reasons(wrongAud)).toBe("wrong_audience");
    expect(await reasons(noNonce)).toBe("bad_claims");
    expect(await reasons(unsigned)).toBe("malformed_token");
    expect(await reasons("not-a-jwt")).toBe("malformed_token");
  });
});

describe("endpoint certificate", () => {
  it("issues a P-256 self-signed server certificate once, key mode 0600, same fingerprint on reload", async () => {
    const first = await ensureEndpointTls(dir);
    expect(await mode(join(dir, TLS_KEY_FILE))).toBe(0o600);
    const cert = new X509Certificate(first.certPem);
    expect(cert.publicKey.asymmetricKeyDetails).toMatchObject({ namedCurve: "prime256v1" });
    expect(cert.verify(cert.publicKey)).toBe(true); // self-signed
    expect(cert.issuer).toBe(cert.subject);
    expect(cert.ca).toBe(false);
    expect(new Date(cert.validTo).getTime()).toBeGreaterThan(Date.now() + 365 * 24 * 3600_000);
    expect(first.fingerprint).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(first.fingerprint).toBe(normalizeFingerprint(cert.fingerprint256));

    const again = await ensureEndpointTls(dir);
    expect(again.fingerprint).toBe(first.fingerprint);
    expect(again.keyPem).toBe(first.keyPem);
    expect(certificateFingerprint(again.certPem)).toBe(first.fingerprint);
    expect(await stat(join(dir, TLS_CERT_FILE))).toBeTruthy();
  });

  it("normalizes fingerprints from both spellings and rejects anything else", () => {
    const hex = "ab".repeat(32);
    expect(normalizeFingerprint(`sha256:${hex}`)).toBe(`sha256:${hex}`);
    expect(normalizeFingerprint(hex.toUpperCase().replace(/(..)(?!$)/g, "$1:"))).toBe(`sha256:${hex}`);
    expect(normalizeFingerprint("sha256:abc")).toBeNull();
    expect(normalizeFingerprint("")).toBeNull();
  });
});
