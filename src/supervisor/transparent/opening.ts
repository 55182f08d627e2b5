// What a connection on the transparent path opens with, from its first bytes: a TLS
// ClientHello (its SNI names the target, as a CONNECT's authority does), an HTTP/1 request
// line (its Host header names the target), or anything else (a raw TCP connection, decided by
// the names the resolver answered for its address and `protocol: tcp` endpoints). Pure.
import { MAX_HELLO_BYTES, readClientHello } from "../tls/client-hello.js";

/** An HTTP/1 request line is read from at most this many bytes. */
export const MAX_REQUEST_LINE_BYTES = 8192;

export type Opening =
  | { kind: "incomplete" }
  | { kind: "tls"; serverName: string | null; alpn: string[] }
  | { kind: "http"; method: string; target: string }
  | { kind: "other"; why: string };

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

export function classifyOpening(bytes: Uint8Array): Opening {
  if (bytes.length === 0) return { kind: "incomplete" };
  if (bytes[0] === 0x16) {
    const v = readClientHello(bytes.subarray(0, MAX_HELLO_BYTES));
    if (v.kind === "incomplete") return bytes.length >= MAX_HELLO_BYTES ? { kind: "other", why: "a TLS record longer than a ClientHello" } : v;
    if (v.kind === "not-tls") return { kind: "other", why: v.reason };
    return { kind: "tls", serverName: v.serverName, alpn: v.alpn };
  }
  // An HTTP/1 request line: METHOD SP target SP HTTP/1.x CRLF. Anything else is not HTTP/1
  // (an HTTP/2 prior-knowledge preface, PRI * HTTP/2.0, included).
  const head = Buffer.from(bytes.subarray(0, MAX_REQUEST_LINE_BYTES)).toString("latin1");
  const eol = head.indexOf("\r\n");
  if (eol < 0) {
    // Still a plausible request line so far: wait for the rest, within the bound.
    const sp = head.indexOf(" ");
    const plausible = TOKEN.test(sp < 0 ? head : head.slice(0, sp));
    if (plausible && bytes.length < MAX_REQUEST_LINE_BYTES) return { kind: "incomplete" };
    return { kind: "other", why: plausible ? "a request line over 8 KiB" : "not HTTP/1 or TLS" };
  }
  const m = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+) (\S+) HTTP\/1\.[01]$/.exec(head.slice(0, eol));
  if (m === null) return { kind: "other", why: "not HTTP/1 or TLS" };
  return { kind: "http", method: m[1]!, target: m[2]! };
}
