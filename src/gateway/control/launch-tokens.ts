// Launch-scoped tokens: one EdDSA (Ed25519) JWT per launch, binding the sandbox, its
// generation and the launch nonce. Only the supervisor container gets it. The gateway's
// signing key lives in its state dir (mode 0600) and survives restarts, so running
// supervisors can re-authenticate to a restarted gateway.
import { createPrivateKey, createPublicKey, generateKeyPairSync, randomUUID } from "node:crypto";
import type { KeyObject } from "node:crypto";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { SignJWT, errors, jwtVerify } from "jose";
import { TOKEN_AUDIENCE, TOKEN_TYPE } from "../../protocol/wire.js";
import { errorMessage } from "../../util/error-message.js";
import { writeSecretFileOnce } from "../../util/secret-file.js";

export const SIGNING_KEY_FILE = "launch-signing-key.pem";
/** Long enough for any sandbox lifetime; a new generation gets a new token anyway. */
export const DEFAULT_TOKEN_TTL_SECONDS = 30 * 24 * 3600;

export interface LaunchClaims {
  sandboxId: string;
  generation: number;
  nonce: string;
  jti: string;
  /** Seconds since the epoch. */
  expiresAt: number;
}

export type TokenRefusal = "malformed_token" | "bad_signature" | "expired" | "wrong_audience" | "wrong_issuer" | "bad_claims";

export type TokenCheck = { ok: true; claims: LaunchClaims } | { ok: false; reason: TokenRefusal; detail: string };

export interface MintRequest {
  sandboxId: string;
  generation: number;
  nonce: string;
  ttlSeconds?: number;
}

export interface MintedToken {
  token: string;
  jti: string;
  expiresAt: Date;
}

/** Loads the Ed25519 signing key from `stateDir`, creating it (0600) on first use. */
export function ensureSigningKey(stateDir: string): KeyObject {
  mkdirSync(stateDir, { recursive: true, mode: 0o700 });
  const path = join(stateDir, SIGNING_KEY_FILE);
  const key = createPrivateKey(writeSecretFileOnce(path, () => generateKeyPairSync("ed25519").privateKey.export({ type: "pkcs8", format: "pem" })));
  if (key.asymmetricKeyType !== "ed25519") throw new Error(`${path} is not an Ed25519 private key`);
  return key;
}

export class LaunchTokens {
  readonly #privateKey: KeyObject;
  readonly #publicKey: KeyObject;
  readonly #issuer: string;
  readonly #now: () => number;

  /** `issuer` is the gateway id; tokens of another gateway are refused. */
  constructor(privateKey: KeyObject, issuer: string, opts: { now?: () => number } = {}) {
    this.#privateKey = privateKey;
    this.#publicKey = createPublicKey(privateKey);
    this.#issuer = issuer;
    this.#now = opts.now ?? Date.now;
  }

  static open(stateDir: string, issuer: string): LaunchTokens {
    return new LaunchTokens(ensureSigningKey(stateDir), issuer);
  }

  get issuer(): string {
    return this.#issuer;
  }

  async mint(req: MintRequest): Promise<MintedToken> {
    const jti = randomUUID();
    const iat = Math.floor(this.#now() / 1000);
    const exp = iat + (req.ttlSeconds ?? DEFAULT_TOKEN_TTL_SECONDS);
    const token = await new SignJWT({ gen: req.generation, nonce: req.nonce })
      .setProtectedHeader({ alg: "EdDSA", typ: TOKEN_TYPE })
      .setIssuer(this.#issuer)
      .setAudience(TOKEN_AUDIENCE)
      .setSubject(req.sandboxId)
      .setJti(jti)
      .setIssuedAt(iat)
      .setExpirationTime(exp)
      .sign(this.#privateKey);
    return { token, jti, expiresAt: new Date(exp * 1000) };
  }

  /** Signature, type, issuer, audience and expiry. Binding to the current launch is the caller's check. */
  async verify(token: string): Promise<TokenCheck> {
    try {
      const { payload } = await jwtVerify(token, this.#publicKey, {
        algorithms: ["EdDSA"],
        typ: TOKEN_TYPE,
        issuer: this.#issuer,
        audience: TOKEN_AUDIENCE,
        requiredClaims: ["sub", "exp", "jti"],
        currentDate: new Date(this.#now()),
        clockTolerance: 30,
      });
      const { sub, gen, nonce, jti, exp } = payload;
      if (typeof sub !== "string" || sub === "" || typeof gen !== "number" || !Number.isSafeInteger(gen) || gen < 0 || typeof nonce !== "string" || nonce === "" || typeof jti !== "string" || typeof exp !== "number") {
        return { ok: false, reason: "bad_claims", detail: "sub, gen, nonce, jti and exp are required" };
      }
      return { ok: true, claims: { sandboxId: sub, generation: gen, nonce, jti, expiresAt: exp } };
    } catch (err) {
      return refusal(err);
    }
  }
}

function refusal(err: unknown): TokenCheck & { ok: false } {
  const detail = errorMessage(err);
  if (err instanceof errors.JWTExpired) return { ok: false, reason: "expired", detail };
  if (err instanceof errors.JWSSignatureVerificationFailed) return { ok: false, reason: "bad_signature", detail };
  if (err instanceof errors.JWTClaimValidationFailed) {
    if (err.claim === "aud") return { ok: false, reason: "wrong_audience", detail };
    if (err.claim === "iss") return { ok: false, reason: "wrong_issuer", detail };
    return { ok: false, reason: "bad_claims", detail };
  }
  return { ok: false, reason: "malformed_token", detail };
}
