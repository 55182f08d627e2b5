// The CAs a gateway's supervisors trust for origins besides the system roots (`gateway start
// --origin-ca FILE`, env SANDGATE_ORIGIN_CA): read and checked once at start, before anything
// runs, so a bad file is a one-line CA problem (exit 2), never a failure of the runtime later.
import { X509Certificate } from "node:crypto";
import { readFileSync, statSync } from "node:fs";
import { SettingError } from "./settings.js";

/** Larger files are refused: a bundle of every public root is under 300 KiB. */
export const ORIGIN_CA_MAX_BYTES = 1024 * 1024;
/** Certificates in one file at most. */
export const ORIGIN_CA_MAX_CERTIFICATES = 500;

export interface OriginCa {
  path: string;
  pem: string;
  /** Each certificate's subject, as openssl prints it on one line (for `gateway status`). */
  subjects: string[];
}

const BLOCK = /-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g;

/** Reads and checks `path`; throws a SettingError naming `what`, the file and the problem. */
export function readOriginCa(what: string, path: string): OriginCa {
  let text: string;
  try {
    const size = statSync(path).size;
    if (size > ORIGIN_CA_MAX_BYTES) throw new SettingError(`${what}: ${path} is ${size} bytes; a CA file is at most ${ORIGIN_CA_MAX_BYTES} bytes`);
    text = readFileSync(path, "utf8");
  } catch (err) {
    if (err instanceof SettingError) throw err;
    throw new SettingError(`${what}: cannot read the CA file ${path} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  const blocks = text.match(BLOCK) ?? [];
  if (blocks.length === 0) throw new SettingError(`${what}: ${path} holds no PEM certificate (expected -----BEGIN CERTIFICATE----- blocks)`);
  if (blocks.length > ORIGIN_CA_MAX_CERTIFICATES) throw new SettingError(`${what}: ${path} holds ${blocks.length} certificates; at most ${ORIGIN_CA_MAX_CERTIFICATES}`);
  const subjects = blocks.map((b, i) => {
    try {
      return new X509Certificate(b).subject.replaceAll("\n", ", ");
    } catch (err) {
      throw new SettingError(`${what}: certificate ${i + 1} of ${path} is not a valid X.509 certificate (${(err as Error).message})`);
    }
  });
  return { path, pem: `${blocks.join("\n")}\n`, subjects };
}
