// The check the egress proxy runs on every address a permitted name resolved to, before
// connecting: a public name must not be a way into loopback, the LAN, the cloud metadata
// service, the special-purpose ranges of the IANA registries that are not meant for the
// public internet, or any address of the gateway's own host (DNS rebinding, hostile
// records). Pure: the host's addresses come in as a parameter.
import { cidr, cidrContains, formatIp, parseCidr, parseIp, unmapIPv4, type Cidr, type IpAddress } from "./cidr.js";

interface BlockedRange {
  readonly range: Cidr;
  readonly label: string;
}

const blocked = (text: string, label: string): BlockedRange => ({ range: cidr(text), label });

// IANA IPv4 Special-Purpose Address Registry (RFC 6890 and successors): every entry that is
// not globally reachable, plus the rest of 0/8 and 240/4. In address order; first match wins.
const BLOCKED_V4: readonly BlockedRange[] = [
  blocked("0.0.0.0/8", "unspecified / this network"),
  blocked("10.0.0.0/8", "private"),
  blocked("100.64.0.0/10", "carrier-grade NAT"),
  blocked("127.0.0.0/8", "loopback"),
  blocked("169.254.0.0/16", "link-local / cloud metadata"),
  blocked("172.16.0.0/12", "private"),
  blocked("192.0.0.0/24", "IETF protocol assignments"),
  blocked("192.0.2.0/24", "documentation (TEST-NET-1)"),
  blocked("192.88.99.0/24", "6to4 relay anycast (deprecated)"),
  blocked("192.168.0.0/16", "private"),
  blocked("198.18.0.0/15", "benchmarking"),
  blocked("198.51.100.0/24", "documentation (TEST-NET-2)"),
  blocked("203.0.113.0/24", "documentation (TEST-NET-3)"),
  blocked("224.0.0.0/4", "multicast"),
  blocked("240.0.0.0/4", "reserved / broadcast"),
];

// IANA IPv6 Special-Purpose Address Registry, the entries not meant for the public
// internet, plus the deprecated forms that still reach local things (IPv4-compatible,
// site-local) and local-use NAT64. First match wins: the /128s come before ::/96.
const BLOCKED_V6: readonly BlockedRange[] = [
  blocked("::/128", "unspecified"),
  blocked("::1/128", "loopback"),
  blocked("::/96", "IPv4-compatible (deprecated)"),
  blocked("64:ff9b:1::/48", "local-use NAT64"),
  blocked("100::/64", "discard-only"),
  blocked("2001::/23", "IETF protocol assignments"),
  blocked("2001:db8::/32", "documentation"),
  blocked("fc00::/7", "unique local (private)"),
  blocked("fe80::/10", "link-local"),
  blocked("fec0::/10", "site-local (deprecated)"),
  blocked("ff00::/8", "multicast"),
];

// IPv6 forms that carry an IPv4 destination: the embedded address must pass the IPv4 rule.
const MAPPED = cidr("::ffff:0:0/96");
const NAT64 = cidr("64:ff9b::/96");
const SIX_TO_FOUR = cidr("2002::/16");

function embeddedIPv4(ip: IpAddress): IpAddress | null {
  if (ip.family !== 6) return null;
  if (cidrContains(MAPPED, ip) || cidrContains(NAT64, ip)) return { family: 4, bytes: ip.bytes.slice(12) };
  if (cidrContains(SIX_TO_FOUR, ip)) return { family: 4, bytes: ip.bytes.slice(2, 6) };
  return null;
}

/** The blocked range an address falls in, or null for a public address. */
export function blockedRangeOf(ip: IpAddress): string | null {
  const table = ip.family === 4 ? BLOCKED_V4 : BLOCKED_V6;
  for (const entry of table) {
    if (cidrContains(entry.range, ip)) return `${formatIp(entry.range)}/${entry.range.prefix} (${entry.label})`;
  }
  const inner = embeddedIPv4(ip);
  if (inner !== null) {
    const innerRange = blockedRangeOf(inner);
    if (innerRange !== null) return `${formatIp(inner)} embedded in ${formatIp(ip)}: ${innerRange}`;
  }
  return null;
}

/** The gateway host's own addresses, in canonical text (IPv4-mapped ones as IPv4). */
export type HostAddresses = ReadonlySet<string>;

export const NO_HOST_ADDRESSES: HostAddresses = new Set<string>();

/** Canonical set of the given addresses; text that is not an IP address is left out. */
export function hostAddressSet(addresses: readonly string[]): HostAddresses {
  const out = new Set<string>();
  for (const text of addresses) {
    const ip = parseIp(text);
    if (ip !== null) out.add(formatIp(unmapIPv4(ip)));
  }
  return out;
}

const HOST_LABEL = "an address of the gateway's host";

/** Which host address `ip` is (itself, or the IPv4 address it carries), or null. */
function hostAddressOf(ip: IpAddress, host: HostAddresses): string | null {
  if (host.size === 0) return null;
  const own = formatIp(unmapIPv4(ip));
  if (host.has(own)) return `${own} (${HOST_LABEL})`;
  const inner = embeddedIPv4(ip);
  if (inner !== null && host.has(formatIp(inner))) return `${formatIp(inner)} embedded in ${formatIp(ip)}: ${HOST_LABEL}`;
  return null;
}

export type AddressCheck =
  | { ok: true }
  | { ok: false; reason: "private_address" | "host_address"; range: string }
  | { ok: false; reason: "invalid_address" };

/**
 * Whether the proxy may connect to `addr` (a resolved IP, no brackets). An address of the
 * gateway's host (`hostAddresses`) and every special-purpose address are refused unless
 * inside one of the endpoint's `allowPrivate` ranges (the endpoint names it explicitly).
 * Unparseable input is refused; malformed allowPrivate entries grant nothing.
 */
export function checkResolvedAddress(addr: string, allowPrivate: readonly string[], hostAddresses: HostAddresses): AddressCheck {
  const ip = parseIp(addr);
  if (ip === null) return { ok: false, reason: "invalid_address" };
  const host = hostAddressOf(ip, hostAddresses);
  const range = host ?? blockedRangeOf(ip);
  if (range === null) return { ok: true };
  const inner = embeddedIPv4(ip);
  for (const text of allowPrivate) {
    const parsed = parseCidr(text);
    if (!parsed.ok) continue;
    if (cidrContains(parsed.cidr, ip) || (inner !== null && cidrContains(parsed.cidr, inner))) return { ok: true };
  }
  return { ok: false, reason: host === null ? "private_address" : "host_address", range };
}
