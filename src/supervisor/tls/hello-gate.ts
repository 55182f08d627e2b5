// The gate of a blind https tunnel: an `https` rule is not a raw TCP hole. Before any byte
// goes upstream, the tunnel's first bytes must be a TLS ClientHello for the CONNECT host;
// anything else closes it. gateHello is pure; readHello reads the bytes off the socket.
import { isIP } from "node:net";
import type { Duplex } from "node:stream";
import { readClientHello } from "./client-hello.js";

/** Deny reasons of a tunnel closed at its first bytes. */
export const NOT_TLS = "not_tls";
export const TLS_SNI_MISSING = "tls_sni_missing";
export const TLS_SNI_MISMATCH = "tls_sni_mismatch";
export const TLS_HELLO_TIMEOUT = "tls_hello_timeout";

/**
 * How long the proxy waits for a ClientHello after 200 Connection Established. A TLS client
 * sends it at once; a socket held open silently longer is closed (it also holds an upstream
 * connection that no byte has reached).
 */
export const HELLO_TIMEOUT_MS = 10_000;

export type Gate = { kind: "incomplete" } | { kind: "pass" } | { kind: "refuse"; reason: string; detail: string };

const normal = (host: string): string => host.toLowerCase().replace(/\.$/, "");

/**
 * The verdict on a tunnel's first bytes for CONNECT host `host`. A name needs SNI equal to
 * it (case and a trailing dot aside). An IP literal needs no SNI (RFC 6066 forbids IPs there,
 * so clients send none), and one naming anything but that IP is refused: a name sent to an
 * allowed address could reach another virtual host behind it (domain fronting).
 */
export function gateHello(bytes: Uint8Array, host: string): Gate {
  const v = readClientHello(bytes);
  // readClientHello decides within MAX_HELLO_BYTES (one record): that bounds what is read.
  if (v.kind === "incomplete") return v;
  if (v.kind === "not-tls") return { kind: "refuse", reason: NOT_TLS, detail: v.reason };
  const want = normal(host);
  if (v.serverName === null) {
    return isIP(want) !== 0 ? { kind: "pass" } : { kind: "refuse", reason: TLS_SNI_MISSING, detail: `the ClientHello names no server; expected ${want}` };
  }
  if (normal(v.serverName) === want) return { kind: "pass" };
  return { kind: "refuse", reason: TLS_SNI_MISMATCH, detail: `the ClientHello is for ${v.serverName}, the tunnel for ${want}` };
}

export type HelloRead = { kind: "pass"; bytes: Buffer } | { kind: "refuse"; reason: string; detail: string } | { kind: "closed" };

/**
 * Reads `client` (after `head`, the bytes already read) until gateHello decides (within
 * MAX_HELLO_BYTES and one more chunk), for at most timeoutMs. On "pass" the client is paused with no listener
 * left, and `bytes` are everything read, to be sent upstream unchanged first.
 */
export function readHello(client: Duplex, head: Buffer, host: string, timeoutMs = HELLO_TIMEOUT_MS): Promise<HelloRead> {
  return new Promise((resolve) => {
    let bytes = head;
    const finish = (r: HelloRead): void => {
      clearTimeout(timer);
      client.off("data", onData);
      client.off("close", onClose);
      client.pause();
      resolve(r);
    };
    const decide = (): boolean => {
      const g = gateHello(bytes, host);
      if (g.kind === "incomplete") return false;
      finish(g.kind === "pass" ? { kind: "pass", bytes } : g);
      return true;
    };
    const onData = (chunk: Buffer): void => {
      bytes = Buffer.concat([bytes, chunk]);
      decide();
    };
    const onClose = (): void => finish({ kind: "closed" });
    const timer = setTimeout(() => finish({ kind: "refuse", reason: TLS_HELLO_TIMEOUT, detail: `no ClientHello within ${timeoutMs} ms` }), timeoutMs);
    if (decide()) return;
    client.on("data", onData);
    client.once("close", onClose);
    client.resume();
  });
}
