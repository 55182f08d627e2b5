// The arguments of `sandgate sandbox port-forward NAME [LOCAL:]REMOTE --address A`,
// parsed and checked. Pure: each bad value is a one-line reason naming it.

import { isIP } from "node:net";

export interface ForwardSpec {
  /** 0: pick a free port. */
  local: number;
  remote: number;
}

const DIGITS = /^\d{1,5}$/;

function port(what: string, raw: string, min: number): number | string {
  const n = DIGITS.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isInteger(n) || n < min || n > 65535) return `${what} must be a port from ${min} to 65535; got ${JSON.stringify(raw)}`;
  return n;
}

/** "8080" (same port on both sides), "9000:8080", ":8080" or "0:8080" (a free local port). */
export function parseForwardSpec(raw: string): ForwardSpec | { error: string } {
  const parts = raw.split(":");
  if (parts.length > 2) return { error: `expected [LOCAL:]REMOTE, e.g. 8080 or 9000:8080; got ${JSON.stringify(raw)}` };
  const remote = port("REMOTE", parts[parts.length - 1]!, 1);
  if (typeof remote === "string") return { error: remote };
  if (parts.length === 1) return { local: remote, remote };
  if (parts[0] === "") return { local: 0, remote };
  const local = port("LOCAL", parts[0]!, 0);
  if (typeof local === "string") return { error: local };
  return { local, remote };
}

/** The loopback addresses a forward may listen on: 127.0.0.0/8, ::1 and "localhost" (→ 127.0.0.1). */
export function loopbackAddress(raw: string): { address: string } | { error: string } {
  if (raw === "localhost") return { address: "127.0.0.1" };
  const kind = isIP(raw);
  if (kind === 4 && raw.startsWith("127.")) return { address: raw };
  if (kind === 6 && (raw === "::1" || raw === "0:0:0:0:0:0:0:1")) return { address: "::1" };
  return {
    error: `--address ${JSON.stringify(raw)} is not a loopback address; port-forward listens on loopback only (127.0.0.1, another 127.x.y.z, ::1 or localhost) so that no other host can reach the sandbox`,
  };
}
