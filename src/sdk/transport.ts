// The one way to the gateway, for the SDK and the CLI alike: finding it (an explicit
// URL, SANDGATE_URL, else the home's socket), proving it is the gateway before any token
// is sent (endpoint.ts), the bearer token (explicit, SANDGATE_TOKEN, else the home's
// token file), requests, and turning every failure into a SandgateError with a one-line
// message. Requests go through node:http, not fetch: fetch cannot reach a Unix socket,
// and it refuses the WHATWG "bad ports" (6000, 6666, …) that a gateway may listen on.

import { readFileSync } from "node:fs";
import { request as httpRequest, type ClientRequest, type IncomingMessage, type OutgoingHttpHeaders } from "node:http";
import { request as httpsRequest } from "node:https";
import { Readable } from "node:stream";
import { WebSocket, type ClientOptions } from "ws";
import { inspectAddress, resolveHome, type HomePaths } from "../home.js";
import { SandgateError, fromApiBody } from "./errors.js";
import { drained } from "../util/drained.js";
import { certFile, connectOptions, endpointOf, isUntrusted, socketTrustProblem, webSocketTarget, type Endpoint } from "./endpoint.js";

/** Connection errors that mean nothing listens at the address (as opposed to a gateway that cut the request). */
const NO_LISTENER = new Set(["ECONNREFUSED", "ENOENT", "EHOSTUNREACH", "ENETUNREACH", "EADDRNOTAVAIL", "ENOTFOUND", "EAI_AGAIN", "ETIMEDOUT"]);

/** How long a plain request (its answer read whole) may take before it fails with `timeout`, unless `requestTimeoutMs` says otherwise; streams take the caller's signal instead. */
export const REQUEST_TIMEOUT_MS = 30_000;

export interface ConnectOptions {
  /** The gateway's home (default: SANDGATE_HOME, else ~/.sandgate): its socket, address and token. */
  home?: string;
  /** The gateway's URL, unix:///PATH or https://HOST:PORT (default: SANDGATE_URL, else the home's socket). */
  url?: string;
  /** The API token (default: SANDGATE_TOKEN, else the home's token file). */
  token?: string;
  /**
   * For an https:// URL: the gateway's API certificate (PEM text), which the server must
   * present before the token is sent (default: the file SANDGATE_CERT names, else the home's api-cert.pem).
   */
  cert?: string;
  /** The environment to read SANDGATE_* from (default: process.env). */
  env?: NodeJS.ProcessEnv;
  /** How long a plain request may take, answer read whole, before it fails with `timeout` (default REQUEST_TIMEOUT_MS). */
  requestTimeoutMs?: number;
}

/** Internal: how messages name the explicit URL (the CLI says `--url`). */
export interface TransportOptions extends ConnectOptions {
  urlName?: string;
}

export class Transport {
  /** The gateway's URL (unix:///…/api.sock or https://HOST:PORT); "" when none was found. */
  readonly url: string;
  readonly paths: HomePaths;
  /** A plain request's deadline (see ConnectOptions.requestTimeoutMs). */
  readonly timeoutMs: number;
  readonly #token: Token;
  readonly #addressProblem: string | null = null;
  readonly #endpoint: Endpoint | undefined;
  readonly #opts: TransportOptions;

  constructor(opts: TransportOptions = {}) {
    this.#opts = opts;
    const timeoutMs = opts.requestTimeoutMs ?? REQUEST_TIMEOUT_MS;
    if (!Number.isSafeInteger(timeoutMs) || timeoutMs <= 0) throw new SandgateError(`requestTimeoutMs must be a whole number of milliseconds above 0; got ${String(opts.requestTimeoutMs)}`, "invalid_request");
    this.timeoutMs = timeoutMs;
    const env = opts.env ?? process.env;
    this.paths = resolveHome(opts.home, env);
    const given = opts.url !== undefined ? { what: opts.urlName ?? "url", url: opts.url } : env.SANDGATE_URL ? { what: "SANDGATE_URL", url: env.SANDGATE_URL } : null;
    const pin = (): { pem: string; source: string } | null =>
      opts.cert !== undefined ? { pem: opts.cert, source: "the cert option" } : env.SANDGATE_CERT ? (certFile(env.SANDGATE_CERT) ?? missingCert(env.SANDGATE_CERT)) : certFile(this.paths.apiCert);
    if (given) {
      this.#endpoint = endpointOf(given.url, given.what, pin);
    } else {
      const found = inspectAddress(this.paths);
      this.#addressProblem = found.problem;
      // The address file of a running gateway names its socket (in its home; a copy of the
      // file in another home, an agent's, names the same socket).
      if (found.address !== null) this.#endpoint = endpointOf(found.address.url, this.paths.address, pin);
    }
    this.url = this.#endpoint?.url ?? "";
    this.#token = opts.token !== undefined ? { from: "option", value: opts.token } : env.SANDGATE_TOKEN !== undefined ? { from: "env", value: env.SANDGATE_TOKEN } : readToken(this.paths.token);
  }

  /** The same options read again: a restarted gateway may have written a new address. */
  fresh(): Transport {
    return new Transport(this.#opts);
  }

  notRunning(detail?: string): SandgateError {
    if (this.#addressProblem) return new SandgateError(`cannot find the gateway: ${this.#addressProblem}`, "not_running");
    const where = this.url ? ` at ${this.url}` : ` (no address in ${this.paths.address})`;
    return new SandgateError(`the gateway is not running${where}${detail ? `: ${detail}` : ""}; start it with: sandgate gateway start`, "not_running");
  }

  authHeader(): Record<string, string> {
    const t = this.#token;
    if ("value" in t && t.value.trim() !== "") return { authorization: `Bearer ${t.value}` };
    throw new SandgateError(this.#noToken(t), "unauthorized");
  }

  /** Why there is no token to send, naming where it was looked for and what to do. */
  #noToken(t: Token): string {
    const file = this.paths.token;
    if (t.from === "option") return `the token option is empty: pass the gateway's API token (the token file in its home), or leave the option out to use SANDGATE_TOKEN or ${file}`;
    if (t.from === "env") return `SANDGATE_TOKEN is set but empty: set it to the gateway's API token, or unset it to use the token file ${file}`;
    if ("value" in t) return `the token file ${file} is empty; remove it and restart the gateway to make a new one`;
    if (t.problem === "ENOENT") return `no API token found in ${file}; start the gateway once to create it`;
    return `cannot read the API token ${file} (${t.problem}): run this as the account that runs the gateway, or set SANDGATE_TOKEN`;
  }

  /**
   * The error of a token the gateway refused (`detail`: its reason), blaming where the token
   * came from: the token option, SANDGATE_TOKEN or the home's token file.
   */
  refusedToken(detail: string): SandgateError {
    const at = this.url ? ` at ${this.url}` : "";
    const t = this.#token;
    const what =
      t.from === "option"
        ? `the gateway refused the API token given as the token option (${detail}); pass the token of the gateway${at} (the token file in its home)`
        : t.from === "env"
          ? `the gateway refused the API token in SANDGATE_TOKEN (${detail}); set it to the token of the gateway${at}, or unset it to use ${this.paths.token}`
          : `the gateway refused the API token in ${this.paths.token} (${detail}); check that it is the token of the gateway${at}`;
    return new SandgateError(what, "unauthorized");
  }

  /**
   * The deadline of a request the gateway answers only after waiting up to `waitS`
   * seconds (a policy change with `wait`): the wait plus the plain request timeout.
   */
  deadline(waitS: number): AbortSignal {
    return AbortSignal.timeout(waitS * 1000 + this.timeoutMs);
  }

  /** A JSON request; an error answer becomes a SandgateError with the gateway's code and message. */
  async request<T>(method: string, path: string, body?: unknown, signal?: AbortSignal, headers?: Record<string, string>): Promise<T> {
    const res = await this.raw(method, path, body, signal, headers);
    const text = await this.readBody(`${method} ${path.replace(/\?.*/, "")}`, () => res.text());
    let json: unknown;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      throw new SandgateError(`the gateway answered ${res.status} with a body that is not JSON`, "bad_response");
    }
    if (!res.ok) throw this.apiError(res.status, json);
    return json as T;
  }

  /** The SandgateError of an error answer's parsed body (`fallback`: the message when it has none); a refused token names where it came from. */
  apiError(status: number, json: unknown, fallback = `HTTP ${status}`): SandgateError {
    const err = fromApiBody(json, fallback);
    if (err.code === "unauthorized") return this.refusedToken(err.message);
    return err;
  }

  /**
   * A request to the gateway with auth, answered as a fetch Response (its body a stream);
   * connection failures become `not_running` (nothing listens), `untrusted_server` (what
   * answers is not the gateway; nothing was sent) or `connection_lost` (it cut the request).
   * Without `signal` the request (its body too) times out after `timeoutMs`; an abort of
   * `signal` rejects with its reason. `extra` headers go besides the token's (the approver
   * token of a proposal's decision).
   */
  async raw(method: string, path: string, body?: unknown, signal?: AbortSignal, extra?: Record<string, string>): Promise<Response> {
    this.#ready(); // "not running" before "no token"
    const headers: Record<string, string> = { ...extra, ...this.authHeader() };
    const text = body === undefined ? undefined : JSON.stringify(body);
    if (text !== undefined) {
      headers["content-type"] = "application/json";
      headers["content-length"] = String(Buffer.byteLength(text));
    }
    const sig = signal ?? AbortSignal.timeout(this.timeoutMs);
    const what = `${method} ${path.replace(/\?.*/, "")}`;
    const res = await new Promise<IncomingMessage>((resolve, reject) => {
      const req = this.#open(method, path, headers, sig);
      req.on("response", resolve);
      req.on("error", (err: Error & { code?: string }) => reject(sig.aborted ? abortReason(sig) : this.#connectError(err, what)));
      req.end(text);
    }).catch((err: unknown) => {
      throw this.#failed(err, what);
    });
    const status = res.statusCode ?? 0;
    const noBody = status === 204 || status === 205 || status === 304 || method === "HEAD";
    if (noBody) res.resume();
    return new Response(noBody ? null : (Readable.toWeb(res) as ReadableStream<Uint8Array>), { status, statusText: res.statusMessage ?? "", headers: headersOf(res) });
  }

  /**
   * A request to the endpoint; `signal` aborts it (its answer's body too) with its reason.
   * Throws `not_running` at once when there is no endpoint, and `untrusted_server` for a
   * socket another user could have made.
   */
  #open(method: string, path: string, headers: OutgoingHttpHeaders, signal?: AbortSignal): ClientRequest {
    const e = this.#ready();
    const req = (e.kind === "https" ? httpsRequest : httpRequest)({ ...connectOptions(e), method, path, headers, agent: false });
    if (signal) {
      if (signal.aborted) {
        req.destroy(signal.reason as Error);
        return req;
      }
      const abort = (): void => {
        req.destroy(signal.reason as Error);
        res?.destroy(signal.reason as Error);
      };
      let res: IncomingMessage | undefined;
      signal.addEventListener("abort", abort, { once: true });
      req.on("response", (r: IncomingMessage) => {
        res = r;
        r.once("close", () => signal.removeEventListener("abort", abort));
      });
      req.once("error", () => {
        if (!res) signal.removeEventListener("abort", abort);
      });
    }
    return req;
  }

  /** The endpoint, once it may be sent a token. */
  #ready(): Endpoint {
    const e = this.#endpoint;
    if (!e) throw this.notRunning();
    if (e.kind === "unix") {
      const problem = socketTrustProblem(e.socketPath);
      if (problem !== null) throw new SandgateError(`refusing to send the API token to ${e.socketPath}: ${problem}, so another local user could have put a listener there; nothing was sent`, "untrusted_server");
    }
    return e;
  }

  /** A connection error as the caller's error: nothing listens, an impostor, or a cut connection. */
  #connectError(err: Error & { code?: string }, what: string): Error {
    if (err instanceof SandgateError) return err;
    if (err.code !== undefined && NO_LISTENER.has(err.code)) return this.notRunning(err.code);
    if (isUntrusted(err.code)) return this.untrusted(err);
    return this.#failed(err, what);
  }

  /** The error for a server that did not prove it is the gateway (a TLS error); nothing was sent. */
  untrusted(err: Error & { code?: string }): SandgateError {
    const e = this.#endpoint;
    const pinned = e?.kind === "https" ? ` (pinned from ${e.certSource})` : "";
    const why = err.code === "EPROTO" || err.code?.startsWith("ERR_SSL_") ? `it does not speak TLS (${(err as { reason?: string }).reason ?? err.code})` : (err.message.split("\n")[0] ?? "").trim();
    return new SandgateError(`what answers at ${this.url} is not the gateway${pinned}: ${why}; the API token was not sent`, "untrusted_server");
  }

  /**
   * A WebSocket to `path` with the token (exec, port-forward); its connection errors go
   * through `connectionError`. Throws like `raw` when there is no endpoint.
   */
  webSocket(path: string, options: ClientOptions = {}): WebSocket {
    const t = webSocketTarget(this.#ready(), path);
    return new WebSocket(t.url, { ...options, ...t.options, headers: { ...options.headers, ...this.authHeader() } });
  }

  /** A WebSocket's 'error' as a SandgateError: not running, an impostor, or `fallback`. */
  connectionError(err: Error & { code?: string }, fallback: () => SandgateError): SandgateError {
    if (err.code !== undefined && NO_LISTENER.has(err.code)) return this.notRunning(err.code);
    if (isUntrusted(err.code)) return this.untrusted(err);
    return fallback();
  }

  /**
   * `read()` of an answer's body (fetch's or node:http's), its failures mapped as a
   * request's: the deadline → `timeout`, a cut connection → `connection_lost`, an abort
   * of the caller's signal stays its AbortError. `what` names the request ("GET /v1/...").
   */
  async readBody<T>(what: string, read: () => Promise<T>): Promise<T> {
    try {
      return await read();
    } catch (err) {
      throw this.#failed(err, what);
    }
  }

  /** A request that was under way and failed, as the error its caller gets. */
  #failed(err: unknown, what: string): Error {
    if (err instanceof SandgateError) return err;
    if (err instanceof Error && err.name === "AbortError") return err;
    if (err instanceof Error && err.name === "TimeoutError") return new SandgateError(`the gateway at ${this.url} did not answer in time`, "timeout");
    const e = err as { code?: string; message?: string; cause?: { code?: string; message?: string } } | null;
    const cause = e?.cause?.code ?? e?.cause?.message ?? e?.code ?? e?.message ?? "?";
    return new SandgateError(`the gateway at ${this.url} closed the connection during ${what} (${cause}); see its log`, "connection_lost");
  }

  /**
   * A request through node:http, for bodies streamed either way and answers with
   * trailers (fetch shows neither). Resolves with the answer once its head is in; the
   * body is sent with backpressure and stops at an early answer (a refusal).
   * `what` names the request in the message of a connection the gateway cuts.
   */
  stream(method: string, path: string, o: { headers?: OutgoingHttpHeaders; body?: AsyncIterable<Uint8Array>; signal?: AbortSignal; what: string }): Promise<IncomingMessage> {
    return new Promise<IncomingMessage>((resolve, reject) => {
      this.#ready(); // "not running" before "no token"
      let answered = false;
      const req = this.#open(method, path, { ...this.authHeader(), ...o.headers }, o.signal);
      req.on("response", (res) => {
        answered = true;
        resolve(res);
      });
      req.on("error", (err: Error & { code?: string }) => {
        if (answered) return;
        reject(o.signal?.aborted ? abortReason(o.signal) : this.#connectError(err, o.what));
      });
      if (!o.body) return void req.end();
      const body = o.body;
      void (async () => {
        try {
          for await (const c of body) {
            if (answered || req.destroyed) return;
            if (!req.write(c)) await drained(req);
          }
          req.end();
        } catch (err) {
          req.destroy();
          if (!answered) reject(err instanceof Error ? err : new Error(String(err)));
        }
      })();
    });
  }
}

/** What an aborted request rejects with, as fetch does: the signal's reason. */
function abortReason(signal: AbortSignal): Error {
  const r: unknown = signal.reason;
  return r instanceof Error ? r : new DOMException(String(r), "AbortError");
}

/** An answer's headers as fetch Headers (repeated ones appended). */
function headersOf(res: IncomingMessage): Headers {
  const h = new Headers();
  for (const [k, v] of Object.entries(res.headers)) {
    if (Array.isArray(v)) for (const x of v) h.append(k, x);
    else if (v !== undefined) h.set(k, v);
  }
  return h;
}

function missingCert(path: string): never {
  throw new SandgateError(`SANDGATE_CERT names ${path}, which cannot be read: give the path of a copy of the gateway home's api-cert.pem`, "invalid_request");
}

/**
 * The token to send and where it came from: the token option, SANDGATE_TOKEN (either
 * may be set but empty), or the home's token file (missing, unreadable or empty).
 */
type Token = { from: "option" | "env" | "file"; value: string } | { from: "file"; problem: string };

function readToken(path: string): Token {
  try {
    return { from: "file", value: readFileSync(path, "utf8").trim() };
  } catch (err) {
    return { from: "file", problem: (err as { code?: string }).code ?? "unreadable" };
  }
}
