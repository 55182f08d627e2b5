// Name resolution for the egress proxy without Docker: the host's DNS servers (from the
// launch file) are asked directly, so names keep resolving while dockerd (and the embedded
// DNS it serves in every container, 127.0.0.11) is away. A name those servers do not know
// (NXDOMAIN or no A/AAAA records) falls back to the container's own resolver: container
// names on the egress network, which only Docker knows, keep resolving while Docker runs.
import dns from "node:dns";
import type { Resolver } from "./proxy/index.js";
import type { AnswerSource } from "./dns-cache.js";

const NOT_FOUND = new Set<string | undefined>([dns.NOTFOUND, dns.NODATA]);

export interface UpstreamResolverOptions {
  /** Per query try; default 2000 ms. */
  timeoutMs?: number;
  /** Tries per server; default 2. */
  tries?: number;
}

/** `servers` in dns.Resolver#setServers form ("192.0.2.53:53", "[2001:db8::53]:53"). */
export function upstreamResolver(servers: readonly string[], fallback: Resolver, opts: UpstreamResolverOptions = {}): Resolver {
  const answers = upstreamAnswers(servers, fallback, opts);
  return async (host) => (await answers(host)).addresses;
}

/** upstreamResolver with the records' TTL (the lowest of them), for the cache; fallback answers carry none. */
export function upstreamAnswers(servers: readonly string[], fallback: Resolver, opts: UpstreamResolverOptions = {}): AnswerSource {
  const r = new dns.promises.Resolver({ timeout: opts.timeoutMs ?? 2000, tries: opts.tries ?? 2 });
  r.setServers([...servers]);
  return async (host) => {
    // A single-label name (a container on the egress network) is Docker's to answer:
    // public DNS has none, and a host server that does not answer must not delay it.
    if (!host.includes(".")) return { addresses: await fallback(host) };
    const [v4, v6] = await Promise.allSettled([r.resolve4(host, { ttl: true }), r.resolve6(host, { ttl: true })]);
    const found = [...(v4.status === "fulfilled" ? v4.value : []), ...(v6.status === "fulfilled" ? v6.value : [])];
    if (found.length > 0) return { addresses: found.map((a) => a.address), ttlS: Math.min(...found.map((a) => a.ttl)) };
    const failures = [v4, v6].flatMap((x) => (x.status === "rejected" ? [x.reason as NodeJS.ErrnoException] : []));
    // A server failure (timeout, refused, SERVFAIL) is the answer: Docker's DNS would only
    // forward to the same servers, and while Docker is away it is not there to ask.
    const serverFailure = failures.find((e) => !NOT_FOUND.has(e.code));
    if (serverFailure !== undefined) throw serverFailure;
    return { addresses: await fallback(host) };
  };
}
