// The gateway's TLS identities: self-signed ECDSA P-256 certificates kept in its home, one
// for the supervisor endpoint and one for the API's TCP listeners. Each is trusted by its
// SHA-256 fingerprint (pinned in each launch config, or by an API client from the home's
// certificate file), not through a CA, so the certificate names do not matter and it must
// stay stable across gateway restarts: rotating it strands every running supervisor.
import "reflect-metadata";
import { X509Certificate, randomBytes, webcrypto } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import * as x509 from "@peculiar/x509";
import { normalizeFingerprint } from "../../protocol/wire.js";
import { ECDSA_P256, pem } from "../../util/x509.js";

export const TLS_KEY_FILE = "supervisor-endpoint.key";
export const TLS_CERT_FILE = "supervisor-endpoint.crt";

export interface EndpointTls {
  certPem: string;
  keyPem: string;
  /** "sha256:<hex>" of the DER certificate: the value supervisors pin. */
  fingerprint: string;
}

/** Canonical "sha256:<hex>" fingerprint of a PEM certificate. */
export function certificateFingerprint(certPem: string): string {
  const fp = normalizeFingerprint(new X509Certificate(certPem).fingerprint256);
  if (fp === null) throw new Error("unexpected fingerprint format from node:crypto");
  return fp;
}

/** Issues a fresh self-signed server certificate (ECDSA P-256, SHA-256). */
export async function issueEndpointCertificate(opts: { commonName?: string; validDays?: number } = {}): Promise<EndpointTls> {
  const alg = ECDSA_P256;
  const keys = await webcrypto.subtle.generateKey(alg, true, ["sign", "verify"]);
  const now = Date.now();
  const cert = await x509.X509CertificateGenerator.createSelfSigned(
    {
      serialNumber: randomBytes(16).toString("hex").replace(/^[89a-f]/, "1"),
      name: `CN=${opts.commonName ?? "sandgate-gateway supervisor endpoint"}`,
      // Backdated: a supervisor host with a slightly late clock must not see a future cert.
      notBefore: new Date(now - 24 * 3600_000),
      notAfter: new Date(now + (opts.validDays ?? 3650) * 24 * 3600_000),
      keys,
      signingAlgorithm: alg,
      extensions: [
        new x509.BasicConstraintsExtension(false, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
        new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
        new x509.SubjectAlternativeNameExtension([{ type: "dns", value: "sandgate-gateway" }]),
      ],
    },
    webcrypto,
  );
  const certPem = cert.toString("pem") + "\n";
  const keyPem = pem("PRIVATE KEY", await webcrypto.subtle.exportKey("pkcs8", keys.privateKey));
  return { certPem, keyPem, fingerprint: certificateFingerprint(certPem) };
}

/**
 * Loads the endpoint certificate from `stateDir`, issuing it on first use. The key file is
 * mode 0600 and written before the certificate, each via rename, so a crash never leaves a
 * certificate without its key.
 */
export async function ensureEndpointTls(stateDir: string): Promise<EndpointTls> {
  mkdirSync(stateDir, { recursive: true, mode: 0o700 });
  return ensureTlsIdentity({ key: join(stateDir, TLS_KEY_FILE), cert: join(stateDir, TLS_CERT_FILE) });
}

/** ensureEndpointTls for any pair of files: the certificate at `cert`, its key at `key` (0600). */
export async function ensureTlsIdentity(files: { key: string; cert: string }, commonName?: string): Promise<EndpointTls> {
  const keyPath = files.key;
  const certPath = files.cert;
  if (existsSync(keyPath) && existsSync(certPath)) {
    chmodSync(keyPath, 0o600);
    const certPem = readFileSync(certPath, "utf8");
    return { certPem, keyPem: readFileSync(keyPath, "utf8"), fingerprint: certificateFingerprint(certPem) };
  }
  const issued = await issueEndpointCertificate(commonName === undefined ? {} : { commonName });
  const suffix = `.tmp-${process.pid}-${randomBytes(4).toString("hex")}`;
  writeFileSync(keyPath + suffix, issued.keyPem, { mode: 0o600 });
  renameSync(keyPath + suffix, keyPath);
  writeFileSync(certPath + suffix, issued.certPem, { mode: 0o644 });
  renameSync(certPath + suffix, certPath);
  return issued;
}
