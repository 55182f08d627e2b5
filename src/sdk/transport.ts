// The one way to the gateway, for the SDK and the CLI alike: finding it (an explicit
// URL, SANDGATE_URL, else the address file in the gateway's home), the bearer token
// (explicit, SANDGATE_TOKEN, else the home's token file), requests, and turning every
// failure into a SandgateError with a one-line message.

import { readFileSync } from "node:fs";
import { request as httpRequest, type IncomingMessage, type OutgoingHttpHeaders } from "node:http";
import { request as httpsRequest } from "node:https";
import { inspectAddress, resolveHome, type HomePaths } from "../gateway/home.js";
import { SandgateError, fromApiBody } from "./errors.js";
import { drained } from "../util/drained.js";

/** Connection errors that mean nothing listens at the address (as opposed to a gateway that cut the request). */
const NO_LISTENER = new Set(["ECONNREFUSED", "ENOENT", "EHOSTUNREACH", "ENETUNREACH", "EADDRNOTAVAIL", "ENOTFOUND", "EAI_AGAIN", "ETIMEDOUT"]);

/** How long a plain request (its answer read whole) may take before it fails with `timeout`, unless `requestTimeoutMs` says otherwise; streams take the caller's signal instead. */
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
  /** How long a plain request may take, answer read whole, before it fails with `timeout` (default REQUEST_TIMEOUT_MS). */
  requestTimeoutMs?: number;
}

/** Internal: how messages name the explicit URL (the CLI says `--url`). */
export interface TransportOptions extends ConnectOptions {
  urlName?: string;
}

export class Transport {
  /** The gateway's base URL without a trailing slash; "" when none was found. */
  readonly url: string;
  readonly paths: HomePaths;
  /** A plain request's deadline (see ConnectOptions.requestTimeoutMs). */
  readonly timeoutMs: number;
  readonly #token: string | undefined;
  readonly #addressProblem: string | null = null;
  readonly #opts: TransportOptions;

  constructor(opts: TransportOptions = {}) {
    this.#opts = opts;
    const timeoutMs = opts.requestTimeoutMs ?? REQUEST_TIMEOUT_MS;
    if (!Number.isSafeInteger(timeoutMs) || timeoutMs <= 0) throw new SandgateError(`requestTimeoutMs must be a whole number of milliseconds above 0; got ${String(opts.requestTimeoutMs)}`, "invalid_request");
    this.timeoutMs = timeoutMs;
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

  /** The SandgateError of an error answer's parsed body. */
  apiError(status: number, json: unknown): SandgateError {
    const err = fromApiBody(json, `HTTP ${status}`);
    if (err.code === "unauthorized") return new SandgateError(`the gateway refused the API token (${err.message}); check SANDGATE_TOKEN or ${this.paths.token}`, "unauthorized");
    return err;
  }

  /**
   * A fetch against the gateway with auth; connection failures become `not_running`
   * (nothing listens) or `connection_lost` (it cut the request). Without `signal` the
   * request (its body too) times out after `timeoutMs`; an abort of `signal` rejects with its AbortError.
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
        signal: signal ?? AbortSignal.timeout(this.timeoutMs),
      });
    } catch (err) {
      const c = (err as { cause?: { code?: string; message?: string } }).cause;
      // Only a connection that could not be made means no gateway; one it cut is an answer.
      if (err instanceof Error && err.name !== "AbortError" && err.name !== "TimeoutError" && (c?.code === undefined || NO_LISTENER.has(c.code))) {
        throw this.notRunning(c?.code ?? c?.message ?? err.message);
      }
      throw this.#failed(err, `${method} ${path.replace(/\?.*/, "")}`);
    }
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
        if (err.code === "ECONNREFUSED" || err.code === "ENOENT") return reject(this.notRunning(err.code));
        reject(this.#failed(err, o.what));
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
