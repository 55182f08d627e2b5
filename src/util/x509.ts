// A sandbox's CA: the gateway issues it (its key goes to the supervisor only), the
// supervisor signs leaf certificates with it. No I/O.
import "reflect-metadata";
import { randomBytes, webcrypto } from "node:crypto";
import * as x509 from "@peculiar/x509";

export interface CaMaterial {
  certPem: string;
  keyPem: string;
}

export const ECDSA_P256 = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" } as const;

export function pem(label: string, der: ArrayBuffer): string {
  return `-----BEGIN ${label}-----\n${Buffer.from(der).toString("base64").replace(/.{1,64}/g, "$&\n")}-----END ${label}-----\n`;
}

/** A CA for one sandbox: ECDSA P-256, path length 0 (it signs leaves only). Used by the gateway. */
export async function issueSandboxCa(sandboxId: string, validDays = 3650): Promise<CaMaterial> {
  const keys = await webcrypto.subtle.generateKey(ECDSA_P256, true, ["sign", "verify"]);
  const now = Date.now();
  const cert = await x509.X509CertificateGenerator.createSelfSigned(
    {
      serialNumber: "01" + randomBytes(15).toString("hex"),
      name: `CN=Sandgate sandbox ${sandboxId} CA, O=Sandgate`,
      notBefore: new Date(now - 24 * 3600_000),
      notAfter: new Date(now + validDays * 24 * 3600_000),
      keys,
      signingAlgorithm: ECDSA_P256,
      extensions: [
        new x509.BasicConstraintsExtension(true, 0, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
        await x509.SubjectKeyIdentifierExtension.create(keys.publicKey, false, webcrypto),
      ],
    },
    webcrypto,
  );
  return { certPem: cert.toString("pem") + "\n", keyPem: pem("PRIVATE KEY", await webcrypto.subtle.exportKey("pkcs8", keys.privateKey)) };
}

