// exec's progress: while a command runs, a `notifications/progress` every interval to a
// client that asked for them (a progressToken in the request's _meta), so that a client
// which resets its request timeout on progress waits for a command that outlives it.
// Each carries the seconds the command has run as `progress` (increasing) and the newest
// output so far as `message`, at most EXEC_PROGRESS_TAIL_BYTES.

import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js";
import type { ServerNotification, ServerRequest } from "@modelcontextprotocol/sdk/types.js";

/** The newest `limit` bytes of output (stdout and stderr as they came); older bytes are let go as new ones come. */
export class OutputTail {
  #tail = Buffer.alloc(0);

  constructor(readonly limit: number) {}

  push(chunk: Buffer): void {
    const keep = Math.min(this.#tail.length, Math.max(this.limit - chunk.length, 0));
    // A copy: neither the socket's buffer nor the old tail is held through a view.
    this.#tail = Buffer.concat([this.#tail.subarray(this.#tail.length - keep), chunk.subarray(Math.max(chunk.length - this.limit, 0))]);
  }

  /** As UTF-8 text, starting at a character (the bytes of one cut at the start left out). */
  text(): string {
    let start = 0;
    while (start < this.#tail.length && start < 3 && (this.#tail[start]! & 0xc0) === 0x80) start++;
    return this.#tail.subarray(start).toString("utf8");
  }
}

type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;

/**
 * Sends progress every `intervalMs` until the returned function is called; nothing when
 * the client gave no progressToken. A notification the transport has not taken yet (a
 * client that does not read) holds back the next: at most one is queued.
 */
export function startProgress(extra: Extra, intervalMs: number, tail: OutputTail): () => void {
  const progressToken = extra._meta?.progressToken;
  if (progressToken === undefined) return () => {};
  const started = performance.now();
  let last = 0;
  let sending = false;
  const timer = setInterval(() => {
    if (sending) return;
    // Seconds run, to the millisecond; strictly increasing as the protocol asks.
    const progress = Math.max(Math.round(performance.now() - started) / 1000, last + 0.001);
    last = progress;
    const message = tail.text();
    sending = true;
    extra
      .sendNotification({ method: "notifications/progress", params: { progressToken, progress, ...(message === "" ? {} : { message }) } })
      .catch(() => undefined)
      .finally(() => (sending = false));
  }, intervalMs);
  return () => clearInterval(timer);
}
