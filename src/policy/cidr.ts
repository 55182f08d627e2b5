// Strict IP address and CIDR parsing with a tiny prefix matcher. Strict on purpose:
// forms that resolvers read differently (leading zeros read as octal by inet_aton,
// "127.1", zone ids) are rejected rather than guessed at.

export type IpFamily = 4 | 6;

export interface IpAddress {
  readonly family: IpFamily;
  /** 4 bytes for IPv4, 16 for IPv6, network order. */
  readonly bytes: Uint8Array;
}

export interface Cidr {
  readonly family: IpFamily;
  readonly bytes: Uint8Array;
  readonly prefix: number;
}

const DECIMAL_OCTET = /^(0|[1-9][0-9]{0,2})$/;
const HEX_GROUP = /^[0-9a-fA-F]{1,4}$/;

/** Dotted-quad IPv4 only: four decimal octets 0-255, no leading zeros. */
export function parseIPv4(text: string): Uint8Array | null {
  const parts = text.split(".");
  if (parts.length !== 4) return null;
  const bytes = new Uint8Array(4);
  for (const [i, part] of parts.entries()) {
    if (!DECIMAL_OCTET.test(part)) return null;
    const value = Number(part);
    if (value > 255) return null;
    bytes[i] = value;
  }
  return bytes;
}

/** RFC 4291 text form, with "::" compression and an optional dotted IPv4 tail. No zone ids. */
export function parseIPv6(text: string): Uint8Array | null {
  // No IPv6 text is longer than 45 characters (six full groups and a dotted quad): a cheap
  // bound on hostile input. Longer text would fail the group checks below anyway.
  if (text.length > 45) return null;
  const halves = text.split("::");
  if (halves.length > 2) return null;
  const [headText, tailText] = halves;
  const head = headText ? headText.split(":") : [];
  const tail = tailText ? tailText.split(":") : [];
  const groups: number[] = [];
  // An embedded IPv4 address may only be the last piece of the text; a dotted piece
  // anywhere else fails the hex-group check below.
  const lastPieces = halves.length === 2 ? tail : head;
  const last = lastPieces.at(-1);
  let v4Tail: Uint8Array | null = null;
  if (last?.includes(".")) {
    v4Tail = parseIPv4(last);
    if (v4Tail === null) return null;
    lastPieces.pop();
  }
  const parseGroups = (pieces: string[]): number[] | null => {
    const out: number[] = [];
    for (const piece of pieces) {
      if (!HEX_GROUP.test(piece)) return null;
      out.push(parseInt(piece, 16));
    }
    return out;
  };
  const headGroups = parseGroups(head);
  const tailGroups = parseGroups(tail);
  if (headGroups === null || tailGroups === null) return null;
  const explicit = headGroups.length + tailGroups.length + (v4Tail === null ? 0 : 2);
  if (halves.length === 2) {
    if (explicit > 7) return null; // "::" must stand for at least one zero group
    groups.push(...headGroups, ...new Array<number>(8 - explicit).fill(0), ...tailGroups);
  } else {
    if (explicit !== 8) return null;
    groups.push(...headGroups);
  }
  const bytes = new Uint8Array(16);
  groups.forEach((g, i) => {
    bytes[i * 2] = g >> 8;
    bytes[i * 2 + 1] = g & 0xff;
  });
  if (v4Tail !== null) bytes.set(v4Tail, 12);
  return bytes;
}

export function parseIp(text: string): IpAddress | null {
  if (text.includes(":")) {
    const bytes = parseIPv6(text);
    return bytes === null ? null : { family: 6, bytes };
  }
  const bytes = parseIPv4(text);
  return bytes === null ? null : { family: 4, bytes };
}

const MAPPED_PREFIX = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff];

export function isIPv4Mapped(ip: IpAddress): boolean {
  return ip.family === 6 && MAPPED_PREFIX.every((b, i) => ip.bytes[i] === b);
}

/** ::ffff:a.b.c.d is the IPv4 host a.b.c.d on a dual-stack socket; other addresses pass unchanged. */
export function unmapIPv4(ip: IpAddress): IpAddress {
  return isIPv4Mapped(ip) ? { family: 4, bytes: ip.bytes.slice(12) } : ip;
}

/** Canonical text: dotted quad, or RFC 5952 IPv6 (lowercase, longest zero run compressed, mapped as ::ffff:a.b.c.d). */
export function formatIp(ip: IpAddress): string {
  if (ip.family === 4) return Array.from(ip.bytes).join(".");
  if (isIPv4Mapped(ip)) return `::ffff:${Array.from(ip.bytes.slice(12)).join(".")}`;
  const groups: number[] = [];
  for (let i = 0; i < 8; i++) groups.push(((ip.bytes[i * 2] ?? 0) << 8) | (ip.bytes[i * 2 + 1] ?? 0));
  // The longest run of zero groups; the first of equal runs wins.
  let bestStart = 0;
  let bestLen = 0;
  let run = 0;
  groups.forEach((g, i) => {
    run = g === 0 ? run + 1 : 0;
    if (run > bestLen) {
      bestLen = run;
      bestStart = i - run + 1;
    }
  });
  const hex = groups.map((g) => g.toString(16));
  if (bestLen < 2) return hex.join(":");
  const left = hex.slice(0, bestStart).join(":");
  const right = hex.slice(bestStart + bestLen).join(":");
  return `${left}::${right}`;
}

export type CidrParse = { ok: true; cidr: Cidr } | { ok: false; error: string };

/**
 * "10.0.0.0/8", "fd00::/8"; a bare address means a single host (/32 or /128).
 * Host bits must be zero so that a typo like 10.213.0.1/16 is caught rather than widened.
 */
export function parseCidr(text: string): CidrParse {
  const slash = text.indexOf("/");
  const addrText = slash === -1 ? text : text.slice(0, slash);
  const ip = parseIp(addrText);
  if (ip === null) return { ok: false, error: `not an IPv4 or IPv6 address: ${JSON.stringify(addrText)}` };
  const max = ip.family === 4 ? 32 : 128;
  let prefix = max;
  if (slash !== -1) {
    const prefixText = text.slice(slash + 1);
    if (!/^(0|[1-9][0-9]{0,2})$/.test(prefixText) || Number(prefixText) > max) {
      return { ok: false, error: `prefix length must be 0-${max}, got ${JSON.stringify(prefixText)}` };
    }
    prefix = Number(prefixText);
  }
  const masked = maskBytes(ip.bytes, prefix);
  if (!masked.every((b, i) => b === ip.bytes[i])) {
    const suggestion = `${formatIp({ family: ip.family, bytes: masked })}/${prefix}`;
    return { ok: false, error: `host bits are set in ${JSON.stringify(text)}; did you mean ${suggestion}?` };
  }
  return { ok: true, cidr: { family: ip.family, bytes: masked, prefix } };
}

export function formatCidr(cidr: Cidr): string {
  return `${formatIp(cidr)}/${cidr.prefix}`;
}

function maskBytes(bytes: Uint8Array, prefix: number): Uint8Array {
  return bytes.map((b, i) => {
    // Prefix bits that fall in this byte, 0-8; the mask of 0 bits is 0.
    const bits = Math.max(0, Math.min(8, prefix - i * 8));
    return b & (0xff << (8 - bits)) & 0xff;
  });
}

/** True when ip lies inside cidr. Families never cross: unmap IPv4-mapped addresses first if that is meant. */
export function cidrContains(cidr: Cidr, ip: IpAddress): boolean {
  if (cidr.family !== ip.family) return false;
  const masked = maskBytes(ip.bytes, cidr.prefix);
  return masked.every((b, i) => b === cidr.bytes[i]);
}

/** For fixed tables in code: throws on a malformed literal, which is a programming error. */
export function cidr(text: string): Cidr {
  const parsed = parseCidr(text);
  if (!parsed.ok) throw new Error(`bad CIDR literal ${text}: ${parsed.error}`);
  return parsed.cidr;
}
