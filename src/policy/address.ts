// The check the egress proxy runs on every address a permitted name resolved to, before
// connecting: a public name must not be a way into loopback, the LAN, the cloud metadata
// service or the gateway host (DNS rebinding, hostile records).
import { cidr, cidrContains, formatIp, parseCidr, parseIp, type Cidr, type IpAddress } from "./cidr.js";

interface BlockedRange {
  readonly range: Cidr;
  readonly label: string;
}

const blocked = (text: string, label: string): BlockedRange => ({ range: cidr(text), label });

const BLOCKED_V4: readonly BlockedRange[] = [
  blocked("0.0.0.0/8", "unspecified / this network"),
  blocked("10.0.0.0/8", "private"),
  blocked("100.64.0.0/10", "carrier-grade NAT"),
  blocked("127.0.0.0/8", "loopback"),
  blocked("169.254.0.0/16", "link-local / cloud metadata"),
  blocked("172.16.0.0/12", "private"),
  blocked("192.168.0.0/16", "private"),
  blocked("224.0.0.0/4", "multicast"),
  blocked("240.0.0.0/4", "reserved / broadcast"),
];

const BLOCKED_V6: readonly BlockedRange[] = [
  // Covers :: (unspecified), ::1 (loopback) and the deprecated IPv4-compatible form.
  blocked("::/96", "unspecified / loopback / IPv4-compatible"),
  blocked("64:ff9b:1::/48", "local-use NAT64"),
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

export type AddressCheck =
  | { ok: true }
  | { ok: false; reason: "private_address"; range: string }
  | { ok: false; reason: "invalid_address" };

/**
 * Whether the proxy may connect to `addr` (a resolved IP, no brackets). Non-public
 * addresses are refused unless inside one of the endpoint's `allowPrivate` ranges.
 * Unparseable input is refused; malformed allowPrivate entries grant nothing.
 */
export function checkResolvedAddress(addr: string, allowPrivate: readonly string[]): AddressCheck {
  const ip = parseIp(addr);
  if (ip === null) return { ok: false, reason: "invalid_address" };
  const range = blockedRangeOf(ip);
  if (range === null) return { ok: true };
  const inner = embeddedIPv4(ip);
  for (const text of allowPrivate) {
    const parsed = parseCidr(text);
    if (!parsed.ok) continue;
    if (cidrContains(parsed.cidr, ip) || (inner !== null && cidrContains(parsed.cidr, inner))) return { ok: true };
  }
  return { ok: false, reason: "private_address", range };
}
