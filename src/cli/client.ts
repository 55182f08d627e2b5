// The CLI's client for the gateway API: the SDK's transport (src/sdk/transport.ts),
// which finds the gateway and maps every failure, with its errors as CliErrors.

import type { HomePaths } from "../home.js";
import { Transport } from "../sdk/transport.js";
import { cliErrorOf } from "./errors.js";

export interface ClientOptions {
  home?: string;
  url?: string;
  token?: string;
  /** The plain request timeout (default the SDK's REQUEST_TIMEOUT_MS). */
  requestTimeoutMs?: number;
}

/** `fn`'s result; an SDK error thrown as the CLI's. */
export function asCli<T>(fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    throw cliErrorOf(err);
  }
}

/** `p`'s value; an SDK error it rejects with as the CLI's. */
export async function asCliAsync<T>(p: Promise<T>): Promise<T> {
  try {
    return await p;
  } catch (err) {
    throw cliErrorOf(err);
  }
}

export class GatewayClient {
  readonly transport: Transport;

  constructor(opts: ClientOptions = {}, env: NodeJS.ProcessEnv = process.env) {
    this.transport = asCli(() => new Transport({ ...opts, env, urlName: "--url" }));
  }

  get url(): string {
    return this.transport.url;
  }

  get paths(): HomePaths {
    return this.transport.paths;
  }

  authHeader(): Record<string, string> {
    return asCli(() => this.transport.authHeader());
  }

  /**
   * `headers`: sent besides the token's (the approver token of `policy approve`).
   * `waitS`: the gateway answers only after waiting up to that many seconds (`--wait`),
   * so the request's deadline is that much past the plain request timeout.
   */
  request<T>(method: string, path: string, body?: unknown, headers?: Record<string, string>, waitS?: number): Promise<T> {
    const signal = waitS === undefined ? undefined : this.transport.deadline(waitS);
    return asCliAsync(this.transport.request<T>(method, path, body, signal, headers));
  }

  /** A fetch against the gateway with auth; connection failures become "not running". */
  raw(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<Response> {
    return asCliAsync(this.transport.raw(method, path, body, signal));
  }
}
