// The CLI's client for the gateway API. It finds the gateway through the address
// file and token in the gateway's home, and turns every failure into a CliError
// with a one-line message.

import { readFileSync } from "node:fs";
import { inspectAddress, resolveHome, type HomePaths } from "../gateway/home.js";
import { CliError, EXIT, exitCodeForApi } from "./errors.js";

/** Connection errors that mean nothing listens at the address (as opposed to a gateway that cut the request). */
const NO_LISTENER = new Set(["ECONNREFUSED", "ENOENT", "EHOSTUNREACH", "ENETUNREACH", "EADDRNOTAVAIL", "ENOTFOUND", "EAI_AGAIN", "ETIMEDOUT"]);

export interface ClientOptions {
  home?: string;
  url?: string;
  token?: string;
}

export class GatewayClient {
  readonly url: string;
  readonly paths: HomePaths;
  private readonly token: string | undefined;
  private addressProblem: string | null = null;

  constructor(opts: ClientOptions = {}, env: NodeJS.ProcessEnv = process.env) {
    this.paths = resolveHome(opts.home, env);
    const given = opts.url !== undefined ? { what: "--url", url: opts.url } : env.SANDGATE_URL ? { what: "SANDGATE_URL", url: env.SANDGATE_URL } : null;
    let url: string | undefined;
    if (given) {
      if (!isHttpUrl(given.url)) throw new CliError(`${given.what} must be an http:// or https:// address; got ${JSON.stringify(given.url)}`, EXIT.usage);
      url = given.url;
    } else {
      const found = inspectAddress(this.paths);
      this.addressProblem = found.problem;
      url = found.address?.url;
    }
    this.url = (url ?? "").replace(/\/+$/, "");
    this.token = opts.token ?? env.SANDGATE_TOKEN ?? readToken(this.paths.token);
  }

  private notRunning(detail?: string): CliError {
    if (this.addressProblem) return new CliError(`cannot find the gateway: ${this.addressProblem}`, EXIT.unreachable);
    const where = this.url ? ` at ${this.url}` : ` (no address in ${this.paths.address})`;
    return new CliError(
      `the gateway is not running${where}${detail ? `: ${detail}` : ""}; start it with: sandgate gateway start`,
      EXIT.unreachable,
    );
  }

  authHeader(): Record<string, string> {
    if (!this.token) throw new CliError(`no API token found in ${this.paths.token}; start the gateway once to create it`, EXIT.unauthorized);
    return { authorization: `Bearer ${this.token}` };
  }

  /** `headers`: sent besides the token's (the approver token of `policy approve`). */
  async request<T>(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<T> {
    const res = await this.raw(method, path, body, undefined, headers);
    const text = await res.text();
    let json: unknown;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      throw new CliError(`the gateway answered ${res.status} with a body that is not JSON`);
    }
    if (!res.ok) {
      const err = (json as { error?: { code?: string; message?: string } } | undefined)?.error;
      const code = err?.code ?? "internal";
      let msg = err?.message ?? `HTTP ${res.status}`;
      if (code === "unauthorized") msg = `the gateway refused the API token (${msg}); check SANDGATE_TOKEN or ${this.paths.token}`;
      throw new CliError(msg, exitCodeForApi(code));
    }
    return json as T;
  }

  /** A fetch against the gateway with auth; connection failures become "not running". */
  async raw(method: string, path: string, body?: unknown, signal?: AbortSignal, extra?: Record<string, string>): Promise<Response> {
    if (!this.url) throw this.notRunning();
    const headers: Record<string, string> = { ...extra, ...this.authHeader() };
    if (body !== undefined) headers["content-type"] = "application/json";
    try {
      return await fetch(this.url + path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: signal ?? AbortSignal.timeout(30_000),
      });
    } catch (err) {
      if (err instanceof Error && err.name === "AbortError") throw err;
      const c = (err as { cause?: { code?: string; message?: string } }).cause;
      const cause = c?.code ?? c?.message;
      if (err instanceof Error && err.name === "TimeoutError") throw new CliError(`the gateway at ${this.url} did not answer in time`, EXIT.timeout);
      // Only a connection that could not be made means no gateway; one it cut is an answer.
      if (c?.code === undefined || NO_LISTENER.has(c.code)) throw this.notRunning(cause ?? (err instanceof Error ? err.message : String(err)));
      throw new CliError(`the gateway at ${this.url} closed the connection during ${method} ${path.replace(/\?.*/, "")} (${cause ?? "?"}); see its log`, EXIT.failed);
    }
  }
}

function isHttpUrl(s: string): boolean {
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
