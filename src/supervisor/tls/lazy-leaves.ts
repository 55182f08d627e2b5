// The sandbox CA's leaf source, loaded on first use: the certificate code (@peculiar/x509
// and reflect-metadata) is a fifth of an idle supervisor's own memory, and most sandboxes
// never terminate a tunnel. The CA itself is checked at start with node's own parsers, so
// a bad launch file still fails the supervisor at once, not at its first terminated request.
import { X509Certificate, createPrivateKey } from "node:crypto";
import type tls from "node:tls";
import type { CaMaterial } from "../../util/x509.js";
import type { LeafSource } from "./ciphers.js";

export function lazyLeafSource(ca: CaMaterial): LeafSource {
  const cert = new X509Certificate(ca.certPem);
  if (!cert.ca) throw new Error("launch config: tls.caCertPem is not a CA certificate");
  if (!cert.checkPrivateKey(createPrivateKey(ca.keyPem))) throw new Error("launch config: tls.caKeyPem is not the key of tls.caCertPem");
  let leaves: Promise<LeafSource> | undefined;
  return {
    context(host: string): Promise<tls.SecureContext> {
      leaves ??= import("./leaf-certs.js").then(({ LeafCertificates }) => new LeafCertificates(ca));
      return leaves.then((l) => l.context(host));
    },
  };
}
