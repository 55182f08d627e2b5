// Each sandbox's internal network gets a small subnet of its own from one range the gateway is
// given, rather than from Docker's address pools. A stock daemon's pools hold 31 networks
// (15 /16s and 16 /20s), so on a stock host the ~30th sandbox could not be created. The
// network has no address on the host (inhibit_ipv4), so its subnet is never routed there and
// only Docker's own overlap check applies: when it refuses one subnet, the next is tried.
import { formatCidr, parseCidr, type Cidr } from "../../policy/cidr.js";

/** 16 addresses: the network's reserved ones, the supervisor and the workload, with room. */
export const SANDBOX_SUBNET_PREFIX = 28;
/** RFC 2544's benchmarking range: never a real destination, 8,192 sandbox subnets. */
export const DEFAULT_SANDBOX_SUBNETS = "198.18.0.0/15";
/** A range narrower than /24 holds fewer than 16 sandboxes: refused as a mistake. */
const NARROWEST = 24;
const WIDEST = 8;
/** Subnets tried for one network before the create fails (a nearly full range). */
export const SUBNET_TRIES = 64;

export type SubnetRangeParse = { ok: true; range: Cidr } | { ok: false; error: string };

/** An IPv4 range /8 to /24, host bits zero. */
export function parseSandboxSubnets(text: string): SubnetRangeParse {
  const p = parseCidr(text.trim());
  if (!p.ok) return { ok: false, error: `invalid sandbox subnet range ${JSON.stringify(text)}: ${p.error}` };
  if (p.cidr.family !== 4 || !text.includes("/")) return { ok: false, error: `invalid sandbox subnet range ${JSON.stringify(text)}: an IPv4 range such as ${DEFAULT_SANDBOX_SUBNETS} is wanted` };
  if (p.cidr.prefix < WIDEST || p.cidr.prefix > NARROWEST) return { ok: false, error: `invalid sandbox subnet range ${JSON.stringify(text)}: the prefix must be /${WIDEST} to /${NARROWEST}` };
  return { ok: true, range: p.cidr };
}

/** How many /28 subnets the range holds. */
export function subnetCount(range: Cidr): number {
  return 2 ** (SANDBOX_SUBNET_PREFIX - range.prefix);
}

/** The n-th /28 of the range (n wraps around). */
export function nthSubnet(range: Cidr, n: number): string {
  const count = subnetCount(range);
  const index = ((n % count) + count) % count;
  const base = ((range.bytes[0]! << 24) | (range.bytes[1]! << 16) | (range.bytes[2]! << 8) | range.bytes[3]!) >>> 0;
  const v = (base + index * 2 ** (32 - SANDBOX_SUBNET_PREFIX)) >>> 0;
  return formatCidr({ family: 4, bytes: Uint8Array.of(v >>> 24, (v >>> 16) & 255, (v >>> 8) & 255, v & 255), prefix: SANDBOX_SUBNET_PREFIX });
}

/** Where a sandbox's search starts: spread by its id (FNV-1a), so creates rarely collide. */
export function firstSubnetIndex(sandboxId: string, range: Cidr): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < sandboxId.length; i++) h = Math.imul(h ^ sandboxId.charCodeAt(i), 0x01000193) >>> 0;
  return h % subnetCount(range);
}

/** Docker's answer when a subnet overlaps another network's. */
export const isSubnetOverlap = (message: string): boolean => /overlaps/i.test(message);
