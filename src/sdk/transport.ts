// The one way to the gateway, for the SDK and the CLI alike: finding it (an explicit
// URL, SANDGATE_URL, else the address file in the gateway's home), the bearer token
// (explicit, SANDGATE_TOKEN, else the home's token file), requests, and turning every
// failure into a SandgateError with a one-line message.

import { readFileSync } from "node:fs";
import { request as httpRequest, type IncomingMessage, type OutgoingHttpHeaders } from "node:http";
import { request as httpsRequest } from "node:https";
import { inspectAddress, resolveHome, type HomePaths } from "../gateway/home.js";
import { EXIT, SandgateError, fromApiBody } from "./errors.js";
import { drained } from "../util/drained.js";

/** Connection errors that mean nothing listens at the address (as opposed to a gateway that cut the request). */
const NO_LISTENER = new Set(["ECONNREFUSED", "ENOENT", "EHOSTUNREACH", "ENETUNREACH", "EADDRNOTAVAIL", "ENOTFOUND", "EAI_AGAIN", "ETIMEDOUT"]);

/** How long a plain request may take before it fails with `timeout`; streams take the caller's signal instead. */
export const REQUEST_TIMEOUT_MS = 30_000;

export interface ConnectOptions {
  /** The gateway's home (default: SANDGATE_HOME, else ~/.sandgate): where its address and token are. */
  home?: string;
  /** The gateway's URL (default: SANDGATE_URL, else the home's gateway.json). */
  url?: string;
  /** The API token (default: SANDGATE_TOKEN, else the home's token file). */
  token?: string;
  /** The environment to read SANDGATE_* from (default: process.env). */
  env?: NodeJS.ProcessEnv;
}

/** Internal: how messages name the explicit URL (the CLI says `--url`). */
export interface TransportOptions extends ConnectOptions {
  urlName?: string;
}

export class Transport {
  /** The gateway's base URL without a trailing slash; "" when none was found. */
  readonly url: string;
  readonly paths: HomePaths;
  readonly #token: string | undefined;
  readonly #addressProblem: string | null = null;
  readonly #opts: TransportOptions;

  constructor(opts: TransportOptions = {}) {
    this.#opts = opts;
    const env = opts.env ?? process.env;
    this.paths = resolveHome(opts.home, env);
    const given = opts.url !== undefined ? { what: opts.urlName ?? "url", url: opts.url } : env.SANDGATE_URL ? { what: "SANDGATE_URL", url: env.SANDGATE_URL } : null;
    let url: string | undefined;
    if (given) {
      if (!isHttpUrl(given.url)) throw new SandgateError(`${given.what} must be an http:// or https:// address; got ${JSON.stringify(given.url)}`, "invalid_request");
      url = given.url;
    } else {
      const found = inspectAddress(this.paths);
      this.#addressProblem = found.problem;
      url = found.address?.url;
    }
    this.url = (url ?? "").replace(/\/+$/, "");
    this.#token = opts.token ?? env.SANDGATE_TOKEN ?? readToken(this.paths.token);
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
    if (!this.#token) throw new SandgateError(`no API token found in ${this.paths.token}; start the gateway once to create it`, "unauthorized");
    return { authorization: `Bearer ${this.#token}` };
  }

  /** A JSON request; an error answer becomes a SandgateError with the gateway's code and message. */
  async request<T>(method: string, path: string, body?: unknown, signal?: AbortSignal, headers?: Record<string, string>): Promise<T> {
    const res = await this.raw(method, path, body, signal, headers);
    const text = await res.text();
    let json: unknown;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      throw new SandgateError(`the gateway answered ${res.status} with a body that is not JSON`, "bad_response");
    }
    if (!res.ok) throw this.apiError(res.status, json);
    return json as T;
  }

  /** The SandgateError of an error answer's parsed body. */
  apiError(status: number, json: unknown): SandgateError {
    const err = fromApiBody(json, `HTTP ${status}`);
    if (err.code === "unauthorized") return new SandgateError(`the gateway refused the API token (${err.message}); check SANDGATE_TOKEN or ${this.paths.token}`, "unauthorized");
    return err;
  }

  /**
   * A fetch against the gateway with auth; connection failures become `not_running`
   * (nothing listens) or `connection_lost` (it cut the request). Without `signal` the
   * request times out after REQUEST_TIMEOUT_MS; an abort of `signal` rejects with its AbortError.
   * `extra` headers go besides the token's (the approver token of a proposal's decision).
   */
  async raw(method: string, path: string, body?: unknown, signal?: AbortSignal, extra?: Record<string, string>): Promise<Response> {
    if (!this.url) throw this.notRunning();
    const headers: Record<string, string> = { ...extra, ...this.authHeader() };
    if (body !== undefined) headers["content-type"] = "application/json";
    try {
      return await fetch(this.url + path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: signal ?? AbortSignal.timeout(REQUEST_TIMEOUT_MS),
      });
    } catch (err) {
      if (err instanceof Error && err.name === "AbortError") throw err;
      const c = (err as { cause?: { code?: string; message?: string } }).cause;
      const cause = c?.code ?? c?.message;
      if (err instanceof Error && err.name === "TimeoutError") throw new SandgateError(`the gateway at ${this.url} did not answer in time`, "timeout");
      // Only a connection that could not be made means no gateway; one it cut is an answer.
      if (c?.code === undefined || NO_LISTENER.has(c.code)) throw this.notRunning(cause ?? (err instanceof Error ? err.message : String(err)));
      throw new SandgateError(`the gateway at ${this.url} closed the connection during ${method} ${path.replace(/\?.*/, "")} (${cause ?? "?"}); see its log`, "connection_lost");
    }
  }

  /**
   * A request through node:http, for bodies streamed either way and answers with
   * trailers (fetch shows neither). Resolves with the answer once its head is in; the
   * body is sent with backpressure and stops at an early answer (a refusal).
   * `what` names the request in the message of a connection the gateway cuts.
   */
  stream(method: string, path: string, o: { headers?: OutgoingHttpHeaders; body?: AsyncIterable<Uint8Array>; signal?: AbortSignal; what: string }): Promise<IncomingMessage> {
    if (!this.url) return Promise.reject(this.notRunning());
    const url = new URL(this.url + path);
    const headers = { ...this.authHeader(), ...o.headers };
    return new Promise<IncomingMessage>((resolve, reject) => {
      let answered = false;
      const req = (url.protocol === "https:" ? httpsRequest : httpRequest)(url, { method, headers, ...(o.signal ? { signal: o.signal } : {}) });
      req.on("response", (res) => {
        answered = true;
        resolve(res);
      });
      req.on("error", (err: Error & { code?: string }) => {
        if (answered) return;
        if (err.name === "AbortError") return reject(err);
        if (err.code === "ECONNREFUSED" || err.code === "ENOENT") return reject(this.notRunning(err.code));
        reject(new SandgateError(`the gateway at ${this.url} closed the connection during ${o.what} (${err.code ?? err.message}); see its log`, "connection_lost", EXIT.failed));
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

export function isHttpUrl(s: string): boolean {
  try {
    const u = new URL(s);
    return (u.protocol === "http:" || u.protocol === "https:") && u.host !== "";
  } catch {
    return false;
  }
}

function readToken(path: string): string | undefined {
  try {
    return readFileSync(path, "utf8").trim() || undefined;
  } catch {
    return undefined;
  }
}
