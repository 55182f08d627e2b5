// The SDK's client: `await Sandgate.connect()` finds the local gateway as the CLI does
// and proves it answers and takes the token; `sandboxes` creates, finds, lists and
// deletes; `watch()` follows lifecycle events. Disposing the client closes every
// stream and session it opened (sandboxes are disposed on their own).

import "./polyfill.js";
import { SandgateError } from "./errors.js";
import { DISPOSE_ACTIONS, OpenStreams, Sandbox, checkTimeout, deleteSandbox, enc, type DisposeAction, type IntentOptions } from "./sandbox.js";
import { Transport, type ConnectOptions } from "./transport.js";
import type { CreateSandboxInput, EventView, Phase, SandboxSummaryView, SandboxView, WatchEvent } from "./types.js";
import { waitForPhase } from "./wait.js";
import { watchEvents, type WatchOptions } from "./watch.js";

/** Sandboxes read per request by `list`. */
export const LIST_PAGE_SIZE = 100;

export interface CreateOptions {
  /** Wait for Ready (default true). */
  wait?: boolean;
  /** How long to wait, in seconds (default 180). */
  timeout?: number;
  /** What `await using` does with it (default "stop": its workspace is kept). */
  dispose?: DisposeAction;
  /** Each event while waiting (phase changes, progress). */
  onEvent?: (e: EventView) => void;
}

export interface ListOptions {
  phase?: Phase;
  /** Every label must match. */
  labels?: Record<string, string>;
  /** At most this many in all. */
  limit?: number;
}

/** The gateway's status (GET /v1/status): version, pid, runtime, sandboxes by phase, counters. */
export type GatewayStatus = Record<string, unknown> & { version?: string; pid?: number };

export class Sandboxes {
  constructor(
    private readonly t: Transport,
    private readonly streams: OpenStreams,
  ) {}

  /**
   * Creates a sandbox and (unless `wait: false`) waits until it is Ready. When the wait
   * fails (it ended in Error, or took longer than `timeout`), the sandbox gets its
   * dispose action before the error is thrown, so no sandbox is left without an owner.
   */
  async create(input: CreateSandboxInput, o: CreateOptions = {}): Promise<Sandbox> {
    const dispose = o.dispose ?? "stop";
    if (!DISPOSE_ACTIONS.includes(dispose)) throw new SandgateError(`dispose: expected one of ${DISPOSE_ACTIONS.join(", ")}, got ${JSON.stringify(dispose)}`, "invalid_request");
    const timeoutMs = checkTimeout(o.timeout, 180);
    const view = await this.t.request<SandboxView>("POST", "/v1/sandboxes", input);
    const sandbox = new Sandbox(this.t, view, dispose, this.streams);
    if (o.wait === false) return sandbox;
    try {
      await waitForPhase(this.t, view.id, { until: ["Ready", "Completed"], timeoutMs, ...(o.onEvent ? { onEvent: o.onEvent } : {}) });
      await sandbox.refresh();
    } catch (err) {
      await sandbox[Symbol.asyncDispose]().catch(() => undefined);
      throw err;
    }
    return sandbox;
  }

  /** A sandbox by name or id (`not_found` when there is none); `dispose` defaults to "none" here. */
  async get(nameOrId: string, o: { dispose?: DisposeAction } = {}): Promise<Sandbox> {
    const view = await this.t.request<SandboxView>("GET", `/v1/sandboxes/${enc(nameOrId)}`);
    return new Sandbox(this.t, view, o.dispose ?? "none", this.streams);
  }

  /** The sandboxes in name order that pass the filter, read LIST_PAGE_SIZE per request. */
  async *list(o: ListOptions = {}): AsyncGenerator<SandboxSummaryView> {
    let left = o.limit ?? Number.POSITIVE_INFINITY;
    if (o.limit !== undefined && (!Number.isSafeInteger(o.limit) || o.limit < 1)) throw new SandgateError(`limit: expected a whole number from 1, got ${String(o.limit)}`, "invalid_request");
    for (let after: string | null = ""; after !== null && left > 0; ) {
      const q = new URLSearchParams({ view: "lean", limit: String(Math.min(LIST_PAGE_SIZE, left)) });
      if (after) q.set("after", after);
      if (o.phase) q.set("phase", o.phase);
      for (const [k, v] of Object.entries(o.labels ?? {})) q.append("label", `${k}=${v}`);
      const page = await this.t.request<{ sandboxes: SandboxSummaryView[]; next: string | null }>("GET", `/v1/sandboxes?${q.toString()}`);
      left -= page.sandboxes.length;
      after = page.next;
      yield* page.sandboxes;
    }
  }

  /** Deletes a sandbox by name or id and waits until it is gone; one already gone is not an error. */
  delete(nameOrId: string, o: IntentOptions = {}): Promise<void> {
    return deleteSandbox(this.t, nameOrId, o);
  }
}

export class Sandgate implements AsyncDisposable {
  readonly sandboxes: Sandboxes;
  readonly #t: Transport;
  readonly #streams = new OpenStreams();

  private constructor(t: Transport) {
    this.#t = t;
    this.sandboxes = new Sandboxes(t, this.#streams);
  }

  /**
   * Finds the gateway as the CLI does (`url`, else SANDGATE_URL, else the address file
   * in `home`, SANDGATE_HOME or ~/.sandgate; the token from `token`, SANDGATE_TOKEN or
   * the home's token file) and asks its status: `not_running` when nothing answers,
   * `unauthorized` when the token is missing or refused.
   */
  static async connect(o: ConnectOptions = {}): Promise<Sandgate> {
    const t = new Transport(o);
    await t.request("GET", "/v1/status");
    return new Sandgate(t);
  }

  /** The gateway's address. */
  get url(): string {
    return this.#t.url;
  }

  /** Streams and exec sessions open now (closed by disposal). */
  get openStreams(): number {
    return this.#streams.size;
  }

  status(): Promise<GatewayStatus> {
    return this.#t.request<GatewayStatus>("GET", "/v1/status");
  }

  /** Lifecycle events as they are committed (see WatchOptions); break out of the loop to stop. */
  async *watch(o: WatchOptions = {}): AsyncGenerator<WatchEvent> {
    const s = this.#streams.open(o.signal);
    try {
      yield* watchEvents(this.#t, { ...o, signal: s.signal });
    } finally {
      s.done();
    }
  }

  /** Waits for a sandbox to reach one of `until` ("Deleted": gone, then null). */
  waitFor(nameOrId: string, until: readonly (Phase | "Deleted")[], o: { timeout?: number; onEvent?: (e: EventView) => void } = {}): Promise<SandboxView | null> {
    return waitForPhase(this.#t, nameOrId, { until, timeoutMs: checkTimeout(o.timeout, 180), ...(o.onEvent ? { onEvent: o.onEvent } : {}) });
  }

  /** Closes every stream and session this client opened. */
  async [Symbol.asyncDispose](): Promise<void> {
    this.#streams.closeAll();
  }
}
