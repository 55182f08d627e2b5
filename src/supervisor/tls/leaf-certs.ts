// Leaf certificates for terminated TLS: the sandbox's CA signs one per host, on demand,
// kept in a bounded cache so issuing stays off the request path after a host's first
// request. One key pair serves every leaf (signing is cheap; key generation is not).
import "reflect-metadata";
import { createPrivateKey, randomBytes, webcrypto } from "node:crypto";
import { isIP } from "node:net";
import tls from "node:tls";
import * as x509 from "@peculiar/x509";
import { ECDSA_P256 as ALG, pem, type CaMaterial } from "../../util/x509.js";
import { CIPHERS_FAST_FIRST, type LeafSource } from "./ciphers.js";

export { issueSandboxCa, type CaMaterial } from "../../util/x509.js";

export interface LeafCacheOptions {
  /** Hosts whose contexts are kept; the least recently used goes first. */
  maxEntries?: number;
  validDays?: number;
}


export class LeafCertificates implements LeafSource {
  private readonly contexts = new Map<string, Promise<tls.SecureContext>>();
  private readonly max: number;
  private readonly validDays: number;
  private readonly caCert: x509.X509Certificate;
  private caKey: Promise<webcrypto.CryptoKey> | undefined;
  private leafKeys: Promise<webcrypto.CryptoKeyPair> | undefined;
  private leafKeyPem: Promise<string> | undefined;
  issued = 0;

  constructor(
    private readonly ca: CaMaterial,
    opts: LeafCacheOptions = {},
  ) {
    this.max = opts.maxEntries ?? 1024;
    this.validDays = opts.validDays ?? 30;
    this.caCert = new x509.X509Certificate(ca.certPem);
  }

  get size(): number {
    return this.contexts.size;
  }

  /** The TLS context presenting a leaf for `host` (a name or an IP literal), signed by the sandbox CA. */
  context(host: string): Promise<tls.SecureContext> {
    const key = host.toLowerCase();
    const hit = this.contexts.get(key);
    if (hit) {
      // Most recently used goes last: Map keeps insertion order.
      this.contexts.delete(key);
      this.contexts.set(key, hit);
      return hit;
    }
    const made = this.issue(key);
    this.contexts.set(key, made);
    made.catch(() => this.contexts.delete(key));
    while (this.contexts.size > this.max) this.contexts.delete(this.contexts.keys().next().value!);
    return made;
  }

  private async issue(host: string): Promise<tls.SecureContext> {
    const { certPem, keyPem } = await this.issuePem(host);
    return tls.createSecureContext({ cert: certPem, key: keyPem, ciphers: CIPHERS_FAST_FIRST, honorCipherOrder: true });
  }

  /** A leaf for `host` as PEM (its chain: the leaf, then the CA), uncached. */
  async issuePem(host: string): Promise<{ certPem: string; keyPem: string }> {
    this.caKey ??= webcrypto.subtle.importKey("pkcs8", createPrivateKey(this.ca.keyPem).export({ format: "der", type: "pkcs8" }), ALG, false, ["sign"]);
    this.leafKeys ??= webcrypto.subtle.generateKey(ALG, true, ["sign", "verify"]);
    const keys = await this.leafKeys;
    this.leafKeyPem ??= webcrypto.subtle.exportKey("pkcs8", keys.privateKey).then((der) => pem("PRIVATE KEY", der));
    const now = Date.now();
    const san = isIP(host) !== 0 ? { type: "ip" as const, value: host } : { type: "dns" as const, value: host };
    const cert = await x509.X509CertificateGenerator.create(
      {
        serialNumber: "01" + randomBytes(15).toString("hex"),
        subject: `CN=${isIP(host) !== 0 ? host : host.slice(0, 64)}`,
        issuer: this.caCert.subject,
        notBefore: new Date(now - 3600_000),
        notAfter: new Date(now + this.validDays * 24 * 3600_000),
        publicKey: keys.publicKey,
        signingKey: await this.caKey,
        signingAlgorithm: ALG,
        extensions: [
          new x509.BasicConstraintsExtension(false, undefined, true),
          new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
          new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
          new x509.SubjectAlternativeNameExtension([san]),
        ],
      },
      webcrypto,
    );
    this.issued++;
    return { certPem: cert.toString("pem") + "\n" + this.ca.certPem, keyPem: await this.leafKeyPem };
  }
}
