// Waiting for a sandbox to settle after an intent (the SDK's wait), with progress on
// stderr so that stdout stays clean for --json.

import { waitForPhase as sdkWait } from "../sdk/wait.js";
import { asCliAsync, type GatewayClient } from "./client.js";
import type { SandboxView } from "../sdk/types.js";

export interface WaitOptions {
  /** Phases that end the wait successfully. */
  until: string[];
  timeoutMs: number;
  quiet: boolean;
  /** Sequence number of the last event already seen. */
  afterSeq?: number;
  /** Stops the wait (it rejects with the signal's reason). */
  signal?: AbortSignal;
}

/** Resolves with the settled sandbox, or null once it has been deleted. */
export function waitForPhase(client: GatewayClient, name: string, opts: WaitOptions): Promise<SandboxView | null> {
  const say = (line: string): void => {
    if (!opts.quiet) process.stderr.write(`  ${line}\n`);
  };
  return asCliAsync(
    sdkWait(client.transport, name, {
      until: opts.until as SandboxView["phase"][],
      timeoutMs: opts.timeoutMs,
      ...(opts.afterSeq === undefined ? {} : { afterSeq: opts.afterSeq }),
      ...(opts.signal === undefined ? {} : { signal: opts.signal }),
      onEvent: (e) => {
        if (e.kind === "info" && e.message) say(e.message);
        else if (e.kind === "phase") say(`${e.oldPhase ?? "-"} → ${e.newPhase ?? "-"}${e.reasonText ? ` (${e.reasonText})` : ""}`);
      },
    }),
  );
}
