// The cipher order of both legs of a terminated tunnel, apart from the certificate code so
// that loading it stays lazy (leaf-certs.ts is imported on a sandbox's first terminated tunnel).
import tls from "node:tls";

/**
 * Both TLS legs of a terminated tunnel prefer AES-128-GCM (node's default order puts
 * AES-256 first): every byte is decrypted and encrypted again here, and the cheaper cipher
 * cost measurably less CPU per MiB with no loss that matters (both are TLS 1.3's own suites).
 */
export const CIPHERS_FAST_FIRST = `TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256:${tls.DEFAULT_CIPHERS}`;

/** Where a terminated tunnel gets the TLS context presenting a leaf for its host. */
export interface LeafSource {
  context(host: string): Promise<tls.SecureContext>;
}
