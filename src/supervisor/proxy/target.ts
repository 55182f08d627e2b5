// What the workload asks to reach, read from what it sent: an absolute-form request
// (GET http://host/path) or a CONNECT authority (host:port). Pure. A listener that learns
// its targets otherwise (a Host header, a ClientHello's SNI, an original destination)
// builds the same Target and hands it to the same pieces.
import { isIPv6 } from "node:net";
import type { EgressProtocol } from "./types.js";

export interface Target {
  host: string;
  port: number;
  /** A CONNECT is "https" until decideTunnel says which protocol it is. */
  protocol: EgressProtocol;
  method: string;
  /** Path without query: queries often carry secrets and stay out of audit logs. */
  path?: string;
  /** HTTP only: the methods the request asks to be treated as (override headers, _method). */
  overrides?: string[];
  /** Set when the connection came by the transparent path (recorded in its audit records). */
  via?: "transparent";
}

export interface HttpTarget extends Target {
  /** host[:port] as it must appear in the upstream Host header. */
  authority: string;
  /** Path plus query, as sent upstream. */
  requestPath: string;
}

/** Lower case, without IPv6 brackets or a trailing dot: the form policies and audit records use. */
export function normalizeHost(hostname: string): string {
  let h = hostname.toLowerCase();
  if (h.startsWith("[") && h.endsWith("]")) h = h.slice(1, -1);
  if (h.endsWith(".")) h = h.slice(0, -1);
  return h;
}

/** An absolute-form http:// request target; undefined for anything else (origin form, https://, garbage). */
export function parseAbsoluteHttp(rawUrl: string | undefined, method: string): HttpTarget | undefined {
  const text = rawUrl ?? "";
  if (!/^http:\/\//i.test(text)) return undefined;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return undefined;
  }
  // An http: URL (the prefix says so) always has a host: URL refuses an empty one.
  const host = normalizeHost(url.hostname);
  return {
    host,
    port: url.port === "" ? 80 : Number(url.port),
    protocol: "http",
    method,
    path: url.pathname,
    authority: url.host,
    requestPath: url.pathname + url.search,
  };
}

/** A CONNECT request's host:port (an IPv6 literal in brackets); undefined when malformed or port 0. */
export function parseConnectTarget(authority: string | undefined): Target | undefined {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^\s:/[\]@]+)):(\d{1,5})$/.exec(authority ?? "");
  if (m === null) return undefined;
  const port = Number(m[3]);
  if (port < 1 || port > 65535) return undefined;
  const t = connectTarget(m[1] ?? m[2]!, port);
  if (m[1] !== undefined && !isIPv6(t.host)) return undefined;
  return t;
}

/** The target of a tunnel to host:port, as a CONNECT names it (decideTunnel says what it carries). */
export function connectTarget(host: string, port: number): Target {
  return { host: normalizeHost(host), port, protocol: "https", method: "CONNECT" };
}

/** The Host header of a request to an https target: the port only when it is not 443. */
export function httpsAuthority(host: string, port: number): string {
  return port === 443 ? host : `${host}:${port}`;
}
