// Reading the first bytes of a CONNECT tunnel: is it a TLS ClientHello, and for which
// server name? An `https` rule is not a raw TCP hole: a blind tunnel must open with a
// ClientHello whose SNI is the CONNECT host, and a terminated one needs the name to
// mint its leaf certificate. Pure: bytes in, a verdict out (RFC 8446 §4.1.2, RFC 6066 §3).

import { SandgateError } from "../../util/errors.js";

/** A ClientHello is read from at most this many bytes (one full TLS record and its header). */
export const MAX_HELLO_BYTES = 5 + 16_384;

export type HelloVerdict =
  /** More bytes are needed to decide (never more than MAX_HELLO_BYTES in all). */
  | { kind: "incomplete" }
  /** Not a TLS ClientHello, with why. */
  | { kind: "not-tls"; reason: string }
  | { kind: "hello"; serverName: string | null; alpn: string[] };

const HANDSHAKE = 0x16;
const CLIENT_HELLO = 0x01;
const EXT_SERVER_NAME = 0x0000;
const EXT_ALPN = 0x0010;

class Reader {
  constructor(
    private readonly b: Uint8Array,
    public pos: number,
    private readonly end: number,
  ) {}
  left(): number {
    return this.end - this.pos;
  }
  u8(): number {
    if (this.left() < 1) throw new Truncated();
    return this.b[this.pos++]!;
  }
  u16(): number {
    return (this.u8() << 8) | this.u8();
  }
  u24(): number {
    return (this.u8() << 16) | (this.u8() << 8) | this.u8();
  }
  bytes(n: number): Uint8Array {
    if (this.left() < n) throw new Truncated();
    const out = this.b.subarray(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }
  /** A sub-reader over the next n bytes (a length-prefixed vector). */
  sub(n: number): Reader {
    if (this.left() < n) throw new Truncated();
    const r = new Reader(this.b, this.pos, this.pos + n);
    this.pos += n;
    return r;
  }
}

class Truncated extends SandgateError {
  override readonly name = "Truncated";
  constructor(message = "a length runs past the ClientHello") {
    super(message, "client_hello_truncated");
  }
}
class Malformed extends SandgateError {
  override readonly name = "Malformed";
  constructor(message: string) {
    super(message, "client_hello_malformed");
  }
}

const ascii = (b: Uint8Array): string => String.fromCharCode(...b);

/** A host name as SNI may carry it: LDH labels and dots, 1-253 characters (RFC 6066: no IP literals). */
function validServerName(name: string): boolean {
  return name.length >= 1 && name.length <= 253 && /^[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?)*\.?$/i.test(name);
}

function parseExtensions(r: Reader): { serverName: string | null; alpn: string[] } {
  let serverName: string | null = null;
  let alpn: string[] = [];
  const seen = new Set<number>();
  while (r.left() > 0) {
    const type = r.u16();
    const body = r.sub(r.u16());
    if (seen.has(type)) throw new Malformed(`extension ${type} repeated`);
    seen.add(type);
    if (type === EXT_SERVER_NAME) {
      const list = body.sub(body.u16());
      while (list.left() > 0) {
        const nameType = list.u8();
        const name = list.bytes(list.u16());
        if (nameType !== 0) continue;
        if (serverName !== null) throw new Malformed("two host names in server_name");
        const text = ascii(name);
        if (!validServerName(text)) throw new Malformed("server_name is not a host name");
        serverName = text.toLowerCase().replace(/\.$/, "");
      }
    } else if (type === EXT_ALPN) {
      const list = body.sub(body.u16());
      alpn = [];
      while (list.left() > 0) {
        const proto = list.bytes(list.u8());
        if (proto.length === 0) throw new Malformed("empty ALPN protocol name");
        alpn.push(ascii(proto));
      }
    }
  }
  return { serverName, alpn };
}

/**
 * The verdict on the first bytes of a connection. "incomplete" asks for more bytes;
 * a ClientHello must fit one record (every mainstream client's does; up to 16 KiB).
 */
export function readClientHello(bytes: Uint8Array): HelloVerdict {
  if (bytes.length === 0) return { kind: "incomplete" };
  if (bytes[0] !== HANDSHAKE) return { kind: "not-tls", reason: "the first byte is not a TLS handshake record" };
  if (bytes.length < 5) return { kind: "incomplete" };
  if (bytes[1] !== 0x03 || bytes[2]! < 0x01 || bytes[2]! > 0x04) return { kind: "not-tls", reason: "not a TLS 1.x record version" };
  const recordLength = (bytes[3]! << 8) | bytes[4]!;
  if (recordLength < 4 || recordLength > 16_384) return { kind: "not-tls", reason: `record length ${recordLength} out of range` };
  if (bytes[5] !== undefined && bytes[5] !== CLIENT_HELLO) return { kind: "not-tls", reason: "the first handshake message is not a ClientHello" };
  if (bytes.length < 5 + recordLength) return { kind: "incomplete" };
  try {
    const r = new Reader(bytes, 5, 5 + recordLength);
    r.u8(); // handshake type, checked above
    const length = r.u24();
    if (length > r.left()) throw new Malformed("the ClientHello does not fit its record");
    const hello = r.sub(length);
    hello.u16(); // legacy_version
    hello.bytes(32); // random
    const sessionId = hello.u8();
    if (sessionId > 32) throw new Malformed("session id longer than 32 bytes");
    hello.bytes(sessionId);
    const suites = hello.u16();
    if (suites < 2 || suites % 2 !== 0) throw new Malformed("no cipher suites");
    hello.bytes(suites);
    const compression = hello.u8();
    if (compression < 1) throw new Malformed("no compression methods");
    hello.bytes(compression);
    if (hello.left() === 0) return { kind: "hello", serverName: null, alpn: [] };
    const ext = hello.sub(hello.u16());
    if (hello.left() !== 0) throw new Malformed("bytes after the extensions");
    return { kind: "hello", ...parseExtensions(ext) };
  } catch (err) {
    if (err instanceof Truncated) return { kind: "not-tls", reason: "a length runs past the ClientHello" };
    if (err instanceof Malformed) return { kind: "not-tls", reason: err.message };
    throw err;
  }
}
