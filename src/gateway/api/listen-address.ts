// Where the API listens, as `gateway start --listen` (env SANDGATE_LISTEN) gives it. Pure.
//
// The API always listens on `<home>/api.sock`: a Unix socket in a directory only the home's
// owner can enter, so whoever answers there is this home's gateway and the CLI, SDK and MCP
// can send it their tokens. `--listen` adds listeners: `unix://PATH` (another socket, mode
// 0600) or `tcp://HOST:PORT`, which always serves TLS with the home's API certificate, so a
// client proves the server is this gateway (by the certificate it pins) before any token
// leaves it (docs/security.md, *Local users*).

import { isIP } from "node:net";

export type ListenAddress = { kind: "unix"; path: string } | { kind: "tcp"; host: string; port: number };

/** Unix socket paths are at most this many bytes (sun_path, 108 with its NUL). */
export const UNIX_PATH_MAX = 107;

/** One `--listen` value, or a one-line error naming it and what is allowed. */
export function parseListenAddress(text: string): { ok: true; address: ListenAddress } | { ok: false; error: string } {
  const bad = (why: string) => ({ ok: false as const, error: `invalid listen address ${JSON.stringify(text)}: ${why}` });
  if (text.startsWith("unix://")) {
    const path = text.slice("unix://".length);
    if (!path.startsWith("/")) return bad("expected unix:///ABSOLUTE/PATH");
    if (Buffer.byteLength(path) > UNIX_PATH_MAX) return bad(`a socket path is at most ${UNIX_PATH_MAX} bytes`);
    if (/[\0-\x1f]/.test(path)) return bad("the path has a control character");
    return { ok: true, address: { kind: "unix", path } };
  }
  if (text.startsWith("tcp://")) {
    const rest = text.slice("tcp://".length);
    const m = /^(?:\[([^\]]+)\]|([^:/[\]]+)):(\d{1,5})$/.exec(rest);
    if (!m) return bad("expected tcp://HOST:PORT, e.g. tcp://127.0.0.1:7420 or tcp://[::1]:7420");
    const host = m[1] ?? m[2]!;
    const port = Number(m[3]);
    if (port > 65_535) return bad("the port is 0-65535");
    if (m[1] !== undefined && isIP(host) !== 6) return bad(`${host} is not an IPv6 address`);
    if (m[2] !== undefined && isIP(host) === 0 && host !== "localhost") return bad("the host is an IP address or localhost");
    return { ok: true, address: { kind: "tcp", host, port } };
  }
  return bad("expected unix:///PATH or tcp://HOST:PORT");
}

export function formatListenAddress(a: ListenAddress): string {
  return a.kind === "unix" ? `unix://${a.path}` : `tcp://${a.host.includes(":") ? `[${a.host}]` : a.host}:${a.port}`;
}

/** The URL a client uses for a listener that is up (its real port when 0 was asked for). */
export function clientUrl(a: ListenAddress): string {
  return a.kind === "unix" ? `unix://${a.path}` : `https://${a.host.includes(":") ? `[${a.host}]` : a.host}:${a.port}`;
}

/** Whether a TCP listener is reachable only from this host. */
export function isLoopback(a: ListenAddress): boolean {
  if (a.kind === "unix") return true;
  return a.host === "localhost" || a.host === "::1" || /^127\./.test(a.host);
}
