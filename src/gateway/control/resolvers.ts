// The DNS servers supervisors ask directly, so that names resolve while Docker (whose
// embedded DNS every container uses by default) is away: the gateway's --resolver flags,
// else SANDGATE_RESOLVERS, else the host's /etc/resolv.conf. A loopback nameserver on the
// host (127.0.0.53 of systemd-resolved, a local dnsmasq) is not reachable from a container:
// such entries are skipped; systemd-resolved's upstream list is used in their place when it
// exists, and with nothing usable left the gateway refuses to start and says what to give.
import { readFileSync } from "node:fs";
import { MAX_RESOLVERS, parseResolverAddress } from "../../protocol/launch.js";
import { cidr, cidrContains } from "../../policy/cidr.js";
import { parseIp } from "../../policy/index.js";

export const HOST_RESOLV_CONF = "/etc/resolv.conf";
/** systemd-resolved's list of upstream servers, behind its 127.0.0.53 stub. */
export const SYSTEMD_RESOLV_CONF = "/run/systemd/resolve/resolv.conf";

const LOOPBACK = [cidr("127.0.0.0/8"), cidr("::1/128")];

export function isLoopbackResolver(address: string): boolean {
  const ip = parseIp(address);
  return ip !== null && LOOPBACK.some((c) => cidrContains(c, ip));
}

/** The nameserver entries of a resolv.conf, in order ("nameserver ADDR", comments ignored). */
export function parseResolvConf(text: string): string[] {
  const out: string[] = [];
  for (const line of text.split("\n")) {
    const m = /^\s*nameserver\s+(\S+)/.exec(line);
    if (m) out.push(m[1]!);
  }
  return out;
}

export type ResolverChoice = { ok: true; resolvers: string[]; source: string; skipped: string[] } | { ok: false; error: string };

export interface ResolverSources {
  /** --resolver values, in order. */
  flags?: readonly string[];
  /** SANDGATE_RESOLVERS: addresses separated by commas or spaces. */
  env?: string | undefined;
  /** Reads a file, or returns null when it cannot be read. Default: fs. */
  readFile?: (path: string) => string | null;
}

const readOrNull = (path: string): string | null => {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return null;
  }
};

/** Addresses given as a setting (`what`: --resolver or SANDGATE_RESOLVERS), each checked; canonical, without repeats. */
export function explicit(values: readonly string[], what: string): ResolverChoice {
  const out: string[] = [];
  for (const v of values) {
    const parsed = parseResolverAddress(v);
    if (!parsed.ok) return { ok: false, error: `${what} ${JSON.stringify(v)}: ${parsed.error}` };
    if (isLoopbackResolver(parsed.address)) {
      return { ok: false, error: `${what} ${v}: a loopback address is not reachable from a supervisor's container; give one it can reach (e.g. the host's address on the Docker bridge)` };
    }
    if (!out.includes(parsed.value)) out.push(parsed.value);
  }
  if (out.length > MAX_RESOLVERS) return { ok: false, error: `${what}: at most ${String(MAX_RESOLVERS)} DNS servers` };
  return { ok: true, resolvers: out, source: what, skipped: [] };
}

/** Usable nameservers of a resolv.conf file: canonical, loopback and malformed ones skipped. */
function fromFile(text: string): { usable: string[]; skipped: string[] } {
  const usable: string[] = [];
  const skipped: string[] = [];
  for (const entry of parseResolvConf(text)) {
    const parsed = parseResolverAddress(entry);
    if (!parsed.ok || isLoopbackResolver(parsed.address)) skipped.push(entry);
    else if (!usable.includes(parsed.value)) usable.push(parsed.value);
  }
  return { usable: usable.slice(0, MAX_RESOLVERS), skipped };
}

export function chooseResolvers(src: ResolverSources): ResolverChoice {
  if (src.flags !== undefined && src.flags.length > 0) return explicit(src.flags, "--resolver");
  const env = src.env?.split(/[\s,]+/).filter((s) => s !== "") ?? [];
  if (env.length > 0) return explicit(env, "SANDGATE_RESOLVERS");
  const read = src.readFile ?? readOrNull;
  const host = read(HOST_RESOLV_CONF);
  if (host === null) return { ok: false, error: `cannot read ${HOST_RESOLV_CONF} for the host's DNS servers; give --resolver ADDR (or SANDGATE_RESOLVERS)` };
  const first = fromFile(host);
  if (first.usable.length > 0) return { ok: true, resolvers: first.usable, source: HOST_RESOLV_CONF, skipped: first.skipped };
  const systemd = read(SYSTEMD_RESOLV_CONF);
  if (systemd !== null) {
    const second = fromFile(systemd);
    if (second.usable.length > 0) return { ok: true, resolvers: second.usable, source: SYSTEMD_RESOLV_CONF, skipped: first.skipped };
  }
  const found = first.skipped.length === 0 ? "no nameserver" : `only ${first.skipped.join(", ")}, which a supervisor's container cannot reach`;
  return { ok: false, error: `${HOST_RESOLV_CONF} names ${found}; give --resolver ADDR (or SANDGATE_RESOLVERS) with a DNS server the supervisors can reach` };
}
