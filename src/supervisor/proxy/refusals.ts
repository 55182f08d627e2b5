// What the workload is told when the proxy does not carry its request: the X-Proxy-Error
// names, the JSON bodies of a denial, an unreachable origin, a bad origin certificate or a
// malformed request, and the raw HTTP response written on a socket that is no longer an
// HTTP connection. Pure; respond.ts writes them.
import type { Target } from "./target.js";
import { errorMessage } from "../../util/error-message.js";
import { TimeoutError } from "../../util/timeout.js";

export const POLICY_ERROR = "sandgate-policy";
export const UPSTREAM_ERROR = "sandgate-upstream";
export const UPSTREAM_TLS_ERROR = "sandgate-upstream-tls";
export const PROXY_ERROR = "sandgate-proxy";

/** A request's audit reason when the policy allowed it and the origin failed: its own outcome, not a plain allow. */
export const UPSTREAM_UNREACHABLE = "upstream_unreachable";
export const UPSTREAM_CERTIFICATE = "upstream_certificate";

/** The policy (or the address check, or a credential rule) refused it. */
export interface Denial {
  kind: "deny";
  reason: string;
  rule?: string;
  address?: string;
}

/** Allowed, but the origin could not be reached: 504 on a timeout, else 502. */
export interface Unreachable {
  kind: "unreachable";
  status: 502 | 504;
  code: string;
  message: string;
}

export function unreachable(err: unknown): Unreachable {
  // A connect deadline of ours (TimeoutError, code `timeout`) is reported as the system's own.
  const code = err instanceof TimeoutError ? "ETIMEDOUT" : ((err as NodeJS.ErrnoException | undefined)?.code ?? "EUPSTREAM");
  const message = errorMessage(err);
  return { kind: "unreachable", status: code === "ETIMEDOUT" ? 504 : 502, code, message };
}

/** What every answer about a target names of it (a path's query never: it may carry secrets). */
export const targetFields = (t: Pick<Target, "host" | "port" | "method" | "path">): { host: string; port: number; method: string; path: string | null } => ({ host: t.host, port: t.port, method: t.method, path: t.path ?? null });

export function denialBody(t: Target, o: Denial): object {
  return {
    error: "policy_denied",
    ...targetFields(t),
    reason: o.reason,
    rule: o.rule ?? null,
    ...(o.address === undefined ? {} : { address: o.address }),
  };
}

export function unreachableBody(t: Target, o: Unreachable, address?: string): object {
  return {
    error: UPSTREAM_UNREACHABLE,
    ...targetFields(t),
    code: o.code,
    message: o.message,
    ...(address === undefined ? {} : { address }),
  };
}

/** The origin's certificate failed the proxy's verification (tls/terminate.ts isCertificateError). */
export function certificateBody(t: Target, err: NodeJS.ErrnoException): object {
  return { error: UPSTREAM_CERTIFICATE, host: t.host, port: t.port, code: err.code ?? "TLS", message: err.message };
}

const badRequest = (message: string): object => ({ error: "bad_request", message });

/** A request to the forward proxy that is not in absolute form. */
export function notAbsoluteForm(rawUrl: string | undefined): object {
  return badRequest(
    /^https:\/\//i.test(rawUrl ?? "")
      ? "https:// URLs must be tunnelled with CONNECT"
      : "this is a forward proxy: send absolute-form requests (GET http://host/path) or CONNECT",
  );
}

/** An Upgrade request to the forward proxy that is not in absolute form. */
export const UPGRADE_NOT_ABSOLUTE = badRequest("this is a forward proxy: send absolute-form requests (GET http://host/path)");

export const CONNECT_NEEDS_AUTHORITY = badRequest("CONNECT needs host:port");

export const ORIGIN_FORM = badRequest("inside a tunnel, requests are in origin form (GET /path)");

/** An Upgrade other than WebSocket on GET. */
export function otherUpgrade(method: string | undefined, asked: string): object {
  return badRequest(`only GET with "Upgrade: websocket" is relayed, got ${method ?? "?"} with ${JSON.stringify(asked.slice(0, 60))}`);
}

/** The proxy itself failed (a bug, never the workload's doing). */
export const PROXY_FAILED = { error: "proxy_error" };

const STATUS_TEXT: Record<number, string> = { 400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway", 504: "Gateway Timeout" };

/** A complete HTTP/1.1 response, closing the connection, for a socket that is no longer an HTTP connection. */
export function rawJsonResponse(status: number, proxyError: string, body: object): string {
  const json = JSON.stringify(body);
  return (
    `HTTP/1.1 ${status} ${STATUS_TEXT[status] ?? "Error"}\r\n` +
    `X-Proxy-Error: ${proxyError}\r\nContent-Type: application/json\r\n` +
    `Content-Length: ${Buffer.byteLength(json)}\r\nConnection: close\r\n\r\n${json}`
  );
}
