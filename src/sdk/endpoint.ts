// Where the client reaches the gateway, and why it may send its tokens there. No token
// leaves the client before the other end has shown it is the gateway it means:
//   - `unix://PATH` (the default: `<home>/api.sock`): the socket and its directory belong to
//     root or to this user, and nobody else may write to the directory, so no other local
//     user can have put a listener there;
//   - `https://HOST:PORT`: the TLS handshake must present the certificate the client pins
//     (the home's api-cert.pem, or SANDGATE_CERT / `cert`), checked before the request is
//     written (node writes nothing on a socket whose certificate it rejected);
//   - plain `http://` is refused: whoever holds the port would get the token.

import { X509Certificate } from "node:crypto";
import { lstatSync, readFileSync } from "node:fs";
import type { RequestOptions } from "node:http";
import { dirname } from "node:path";
import type { PeerCertificate } from "node:tls";
import type { ClientOptions } from "ws";
import { SandgateError } from "./errors.js";

export type Endpoint =
  | { kind: "unix"; url: string; socketPath: string }
  | { kind: "https"; url: string; host: string; port: number; caPem: string; fingerprint: string; certSource: string };

/** A TLS error that means the server is not the pinned gateway (as opposed to a network failure). */
export const PIN_MISMATCH = "ERR_SANDGATE_CERT_PIN";

/**
 * `url` (unix:// or https://) as an endpoint; `what` names where it came from in errors.
 * `cert`: the PEM to pin for https, and where it came from (null: none was found).
 */
export function endpointOf(url: string, what: string, cert: () => { pem: string; source: string } | null): Endpoint {
  if (url.startsWith("unix://")) {
    const socketPath = url.slice("unix://".length);
    if (!socketPath.startsWith("/")) throw new SandgateError(`${what} must be unix:///ABSOLUTE/PATH or https://HOST:PORT; got ${JSON.stringify(url)}`, "invalid_request");
    return { kind: "unix", url, socketPath };
  }
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new SandgateError(`${what} must be unix:///PATH or https://HOST:PORT; got ${JSON.stringify(url)}`, "invalid_request");
  }
  if (u.protocol === "http:") {
    throw new SandgateError(
      `${what} is plain http (${url}): the API token would go in the clear to whatever holds that port; use the gateway's socket (unix:///…/api.sock, the default) or https:// with a listener of gateway start --listen tcp://HOST:PORT`,
      "invalid_request",
    );
  }
  if (u.protocol !== "https:" || u.hostname === "" || (u.pathname !== "/" && u.pathname !== "") || u.search !== "" || u.username !== "" || u.password !== "") {
    throw new SandgateError(`${what} must be unix:///PATH or https://HOST:PORT; got ${JSON.stringify(url)}`, "invalid_request");
  }
  const pin = cert();
  if (pin === null) {
    throw new SandgateError(
      `no certificate to check ${url} against: set SANDGATE_CERT to a copy of the gateway home's api-cert.pem (a client sends its token only to the gateway that certificate names)`,
      "invalid_request",
    );
  }
  let fingerprint: string;
  try {
    fingerprint = new X509Certificate(pin.pem).fingerprint256;
  } catch (err) {
    throw new SandgateError(`${pin.source} is not a PEM certificate (${(err as Error).message})`, "invalid_request");
  }
  const host = u.hostname.replace(/^\[(.*)\]$/, "$1");
  return { kind: "https", url: `https://${u.host}`, host, port: u.port === "" ? 443 : Number(u.port), caPem: pin.pem, fingerprint, certSource: pin.source };
}

/** The certificate file at `path` as a pin, or null when there is none. */
export function certFile(path: string): { pem: string; source: string } | null {
  try {
    return { pem: readFileSync(path, "utf8"), source: path };
  } catch {
    return null;
  }
}

/**
 * Before the first byte to a Unix socket: the socket and its directory must belong to root
 * or to this user, and the directory must be closed to others' writes. Otherwise another
 * local user could have bound a listener there. null when all is well, else why not.
 */
export function socketTrustProblem(socketPath: string, uid: number | undefined = process.getuid?.()): string | null {
  if (uid === undefined) return null; // no uids (not POSIX): nothing to check against
  const trusted = (owner: number): boolean => owner === 0 || owner === uid;
  const dir = dirname(socketPath);
  let d;
  try {
    d = lstatSync(dir);
  } catch {
    return null; // no directory: connecting fails as "not running"
  }
  if (!trusted(d.uid)) return `its directory ${dir} belongs to uid ${d.uid}, not to root or to this user (uid ${uid})`;
  if ((d.mode & 0o022) !== 0) return `its directory ${dir} is writable by other users (mode ${(d.mode & 0o7777).toString(8)})`;
  let s;
  try {
    s = lstatSync(socketPath);
  } catch {
    return null;
  }
  if (!trusted(s.uid)) return `it belongs to uid ${s.uid}, not to root or to this user (uid ${uid})`;
  return null;
}

/** node:http / node:https options that reach `e` (the TLS ones pin its certificate). */
export function connectOptions(e: Endpoint): RequestOptions & { ca?: string; checkServerIdentity?: (host: string, cert: PeerCertificate) => Error | undefined } {
  if (e.kind === "unix") return { socketPath: e.socketPath };
  return {
    host: e.host,
    port: e.port,
    // The chain must end at the pinned certificate (rejectUnauthorized stays on) and be it:
    // the names in it do not matter, the fingerprint does.
    ca: e.caPem,
    checkServerIdentity: (_host, cert) => {
      if (cert.fingerprint256 === e.fingerprint) return undefined;
      return Object.assign(new Error(`its certificate ${cert.fingerprint256} is not the pinned ${e.fingerprint}`), { code: PIN_MISMATCH });
    },
  };
}

/** The ws URL and options of `path` at `e`. */
export function webSocketTarget(e: Endpoint, path: string): { url: string; options: ClientOptions } {
  if (e.kind === "unix") return { url: `ws+unix://${e.socketPath}:${path}`, options: {} };
  const { ca, checkServerIdentity } = connectOptions(e);
  return { url: `wss://${e.host.includes(":") ? `[${e.host}]` : e.host}:${e.port}${path}`, options: { ca, checkServerIdentity, followRedirects: false } as ClientOptions };
}

/** TLS errors that mean the server did not prove it is the pinned gateway. */
const UNTRUSTED = /^(?:ERR_SANDGATE_CERT_PIN|DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_VERIFY_LEAF_SIGNATURE|UNABLE_TO_GET_ISSUER_CERT(?:_LOCALLY)?|CERT_\w+|ERR_TLS_CERT_ALTNAME_INVALID|EPROTO|ERR_SSL_\w+)$/;

/** Whether a connection error says the server is not the gateway the client pins (nothing was sent). */
export function isUntrusted(code: string | undefined): boolean {
  return code !== undefined && UNTRUSTED.test(code);
}
