// Each sandbox's CA on the gateway host: issued once, kept across generations and
// gateway restarts, removed on delete. Its key goes into the supervisor's launch file
// only; the workload gets the certificate, alone and bundled with the system roots,
// in a read-only directory, and environment variables that make common clients trust it.
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { rootCertificates } from "node:tls";
import { issueSandboxCa, type CaMaterial } from "../../util/x509.js";

/** Where the trust files appear in the workload (read-only). */
export const WORKLOAD_TRUST_DIR = "/etc/sandgate";
const CA_FILE = "ca.pem";
const BUNDLE_FILE = "ca-bundle.pem";

/** What makes curl, Python (ssl, requests), git, OpenSSL and node trust the sandbox CA without flags. */
export const TRUST_ENV: Readonly<Record<string, string>> = {
  SSL_CERT_FILE: `${WORKLOAD_TRUST_DIR}/${BUNDLE_FILE}`,
  REQUESTS_CA_BUNDLE: `${WORKLOAD_TRUST_DIR}/${BUNDLE_FILE}`,
  CURL_CA_BUNDLE: `${WORKLOAD_TRUST_DIR}/${BUNDLE_FILE}`,
  GIT_SSL_CAINFO: `${WORKLOAD_TRUST_DIR}/${BUNDLE_FILE}`,
  NODE_EXTRA_CA_CERTS: `${WORKLOAD_TRUST_DIR}/${CA_FILE}`,
  NODE_USE_ENV_PROXY: "1",
};

export interface SandboxTrust {
  ca: CaMaterial;
  /** Host directory to bind read-only at WORKLOAD_TRUST_DIR. */
  trustDir: string;
}

function writeAtomic(path: string, text: string, mode: number): void {
  const tmp = `${path}.tmp-${process.pid}`;
  writeFileSync(tmp, text, { mode });
  renameSync(tmp, path);
}

export class SandboxCas {
  constructor(readonly root: string) {}

  private dir(sandboxId: string): string {
    if (!/^[A-Za-z0-9_.-]+$/.test(sandboxId)) throw new Error(`not a sandbox id: ${JSON.stringify(sandboxId)}`);
    return join(this.root, sandboxId);
  }

  /** The sandbox's CA (issued on first use: key 0600, written before its certificate) and its trust files. */
  async ensure(sandboxId: string): Promise<SandboxTrust> {
    const dir = this.dir(sandboxId);
    const keyPath = join(dir, "ca.key");
    const certPath = join(dir, "ca.crt");
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    let ca: CaMaterial;
    if (existsSync(keyPath) && existsSync(certPath)) ca = { certPem: readFileSync(certPath, "utf8"), keyPem: readFileSync(keyPath, "utf8") };
    else {
      ca = await issueSandboxCa(sandboxId);
      writeAtomic(keyPath, ca.keyPem, 0o600);
      writeAtomic(certPath, ca.certPem, 0o644);
    }
    // Readable by the workload's user: a directory of public certificates only.
    const trustDir = join(this.root, `${sandboxId}.trust`);
    mkdirSync(trustDir, { recursive: true, mode: 0o755 });
    writeAtomic(join(trustDir, CA_FILE), ca.certPem, 0o644);
    writeAtomic(join(trustDir, BUNDLE_FILE), [...rootCertificates, ca.certPem].map((c) => c.trim()).join("\n") + "\n", 0o644);
    return { ca, trustDir };
  }

  remove(sandboxId: string): void {
    rmSync(this.dir(sandboxId), { recursive: true, force: true });
    rmSync(join(this.root, `${sandboxId}.trust`), { recursive: true, force: true });
  }
}
