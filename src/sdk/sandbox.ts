// One sandbox: its view, its lifecycle intents (waited for), exec, files, logs and
// policy; `await using` gives it its dispose action at the end of the scope.

import "./polyfill.js";
import { SandgateError } from "./errors.js";
import { exec, type ExecOptions } from "./exec.js";
import { SandboxFiles } from "./files.js";
import { readLogs, type LogsOptions } from "./logs.js";
import { SandboxPolicy } from "./policy.js";
import type { Transport } from "./transport.js";
import type { EventView, LogRecord, Phase, SandboxView } from "./types.js";
import { waitForPhase } from "./wait.js";

/** What `await using` does with the sandbox at the end of its scope. */
export type DisposeAction = "stop" | "delete" | "none";
export const DISPOSE_ACTIONS: readonly DisposeAction[] = ["stop", "delete", "none"];

export interface IntentOptions {
  /** Wait for the phase the intent leads to (default true). */
  wait?: boolean;
  /** How long to wait, in seconds (default: 180 for start, 120 for stop and delete). */
  timeout?: number;
  /** Each event of the sandbox while waiting (phase changes, progress). */
  onEvent?: (e: EventView) => void;
}

/** Streams and sessions a client has open, so that its disposal closes them. */
export class OpenStreams {
  readonly #open = new Set<AbortController>();

  /** A signal that aborts with `outer` or when the client is disposed; call `done` when finished. */
  open(outer?: AbortSignal): { signal: AbortSignal; done: () => void } {
    const ac = new AbortController();
    const stop = (): void => ac.abort(outer?.reason);
    if (outer?.aborted) ac.abort(outer.reason);
    else outer?.addEventListener("abort", stop, { once: true });
    this.#open.add(ac);
    return {
      signal: ac.signal,
      done: () => {
        outer?.removeEventListener("abort", stop);
        this.#open.delete(ac);
      },
    };
  }

  get size(): number {
    return this.#open.size;
  }

  closeAll(): void {
    for (const ac of this.#open) ac.abort();
    this.#open.clear();
  }
}

export const enc = encodeURIComponent;

export function checkTimeout(timeout: number | undefined, fallbackS: number): number {
  const s = timeout ?? fallbackS;
  if (typeof s !== "number" || !Number.isFinite(s) || s <= 0 || s > 86_400) throw new SandgateError(`timeout: expected seconds from 1 to 86400, got ${JSON.stringify(timeout)}`, "invalid_request");
  return s * 1000;
}

async function lastSeq(t: Transport, id: string): Promise<number> {
  const { events } = await t.request<{ events: EventView[] }>("GET", `/v1/sandboxes/${enc(id)}/events?tail=1`);
  return events.at(-1)?.seq ?? 0;
}

/** Deletes a sandbox; one already gone is not an error. Waits for it to be gone unless `wait: false`. */
export async function deleteSandbox(t: Transport, nameOrId: string, o: IntentOptions = {}): Promise<void> {
  const timeoutMs = checkTimeout(o.timeout, 120);
  try {
    const seq = o.wait === false ? 0 : await lastSeq(t, nameOrId);
    await t.request<SandboxView>("DELETE", `/v1/sandboxes/${enc(nameOrId)}`);
    if (o.wait !== false) await waitForPhase(t, nameOrId, { until: ["Deleted"], timeoutMs, afterSeq: seq, ...(o.onEvent ? { onEvent: o.onEvent } : {}) });
  } catch (err) {
    if (err instanceof SandgateError && err.code === "not_found") return;
    throw err;
  }
}

export class Sandbox implements AsyncDisposable {
  /** Its name and id (requests use the id: a new sandbox of the same name is never reached by mistake). */
  readonly name: string;
  readonly id: string;
  readonly files: SandboxFiles;
  readonly policy: SandboxPolicy;
  /** What `await using` does at the end of the scope; may be changed at any time. */
  dispose: DisposeAction;
  #view: SandboxView;
  readonly #t: Transport;
  readonly #streams: OpenStreams;

  constructor(t: Transport, view: SandboxView, dispose: DisposeAction, streams: OpenStreams) {
    if (!DISPOSE_ACTIONS.includes(dispose)) throw new SandgateError(`dispose: expected one of ${DISPOSE_ACTIONS.join(", ")}, got ${JSON.stringify(dispose)}`, "invalid_request");
    this.#t = t;
    this.#view = view;
    this.name = view.name;
    this.id = view.id;
    this.dispose = dispose;
    this.#streams = streams;
    this.files = new SandboxFiles(t, view.id);
    this.policy = new SandboxPolicy(t, view.id);
  }

  /** The view as last read (create, refresh, an intent). */
  get view(): SandboxView {
    return this.#view;
  }

  get phase(): Phase {
    return this.#view.phase;
  }

  /** Reads the sandbox again. */
  async refresh(): Promise<SandboxView> {
    this.#view = await this.#t.request<SandboxView>("GET", `/v1/sandboxes/${enc(this.id)}`);
    return this.#view;
  }

  /**
   * Runs a command in the (Ready) sandbox and resolves with its exit code: its output
   * to `onStdout`/`onStderr` as it comes, `stdin` as its input, `env`, `cwd`, `user`,
   * `timeout`; `signal` sends it SIGINT (see ExecOptions).
   */
  async exec(cmd: readonly string[], o: ExecOptions = {}): Promise<number> {
    const s = this.#streams.open();
    try {
      return await exec(this.#t, this.id, cmd, o, s.signal);
    } finally {
      s.done();
    }
  }

  /** Its output, record by record (see LogsOptions); break out of the loop to stop. */
  async *logs(o: LogsOptions = {}): AsyncGenerator<LogRecord> {
    const s = this.#streams.open(o.signal);
    try {
      yield* readLogs(() => this.#t.fresh(), this.id, { ...o, signal: s.signal });
    } finally {
      s.done();
    }
  }

  /** Starts a Stopped, Completed or Error sandbox as a new generation (same workspace); waits for Ready. */
  async start(o: IntentOptions = {}): Promise<SandboxView> {
    const timeoutMs = checkTimeout(o.timeout, 180);
    const seq = o.wait === false ? 0 : await lastSeq(this.#t, this.id);
    this.#view = await this.#t.request<SandboxView>("POST", `/v1/sandboxes/${enc(this.id)}/start`);
    if (o.wait !== false) this.#view = (await waitForPhase(this.#t, this.id, { until: ["Ready", "Completed"], timeoutMs, afterSeq: seq, ...(o.onEvent ? { onEvent: o.onEvent } : {}) }))!;
    return this.#view;
  }

  /** Stops it: its containers go, its workspace stays. One already stopped (or stopping) is not an error. */
  async stop(o: IntentOptions = {}): Promise<SandboxView> {
    const timeoutMs = checkTimeout(o.timeout, 120);
    const seq = o.wait === false ? 0 : await lastSeq(this.#t, this.id);
    try {
      this.#view = await this.#t.request<SandboxView>("POST", `/v1/sandboxes/${enc(this.id)}/stop`);
    } catch (err) {
      if (!(err instanceof SandgateError) || err.code !== "not_allowed") throw err;
      const now = await this.refresh();
      if (now.phase === "Stopped" || now.phase === "Completed") return now;
      if (now.phase !== "Stopping") throw err;
    }
    if (o.wait !== false) this.#view = (await waitForPhase(this.#t, this.id, { until: ["Stopped"], timeoutMs, afterSeq: seq, ...(o.onEvent ? { onEvent: o.onEvent } : {}) }))!;
    return this.#view;
  }

  /** Deletes it, workspace included. One already gone is not an error. */
  delete(o: IntentOptions = {}): Promise<void> {
    return deleteSandbox(this.#t, this.id, o);
  }

  /** `await using`: stops or deletes it (its `dispose` action), waiting for that; "none" leaves it as it is. */
  async [Symbol.asyncDispose](): Promise<void> {
    if (this.dispose === "delete") return this.delete();
    if (this.dispose === "stop") {
      try {
        await this.stop();
      } catch (err) {
        if (err instanceof SandgateError && err.code === "not_found") return;
        throw err;
      }
    }
  }
}
