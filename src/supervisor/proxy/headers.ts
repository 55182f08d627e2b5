// Which headers cross the proxy: end-to-end ones pass, hop-by-hop ones and Proxy-* stay
// at this hop; whether a request has a body. Pure.
import type http from "node:http";

// RFC 9110 §7.6.1 hop-by-hop headers; any Proxy-* header is also ours, never forwarded.
const HOP_BY_HOP = new Set(["connection", "keep-alive", "te", "trailer", "transfer-encoding", "upgrade"]);

/**
 * Copies raw headers minus hop-by-hop ones (including those named in Connection)
 * and Proxy-*. Raw arrays keep the sender's order, case and duplicates.
 */
export function endToEndHeaders(raw: readonly string[], alsoDrop?: ReadonlySet<string>): string[] {
  let listed: Set<string> | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.toLowerCase() === "connection") {
      listed ??= new Set();
      for (const token of raw[i + 1]!.split(",")) listed.add(token.trim().toLowerCase());
    }
  }
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    const lower = name.toLowerCase();
    if (HOP_BY_HOP.has(lower) || lower.startsWith("proxy-") || listed?.has(lower) || alsoDrop?.has(lower)) continue;
    out.push(name, raw[i + 1]!);
  }
  return out;
}

// Host is replaced by the request-target's authority (RFC 9112 §3.2.2): the policy
// checked the URI's host, so a different Host header must not reach another vhost.
// Expect is answered at this hop (checkContinue), not forwarded.
const REQUEST_REPLACED: ReadonlySet<string> = new Set(["host", "expect"]);

/** A request's end-to-end headers as forwarded: Host and Expect are this hop's. */
export const requestHeaders = (req: http.IncomingMessage): string[] => endToEndHeaders(req.rawHeaders, REQUEST_REPLACED);

export function hasBody(req: http.IncomingMessage): boolean {
  const te = req.headers["transfer-encoding"];
  if (te !== undefined) return true;
  const cl = req.headers["content-length"];
  return cl !== undefined && cl !== "0";
}
