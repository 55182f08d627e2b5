// Waiting for a sandbox to settle after an intent, with progress on stderr so
// that stdout stays clean for --json.

import type { GatewayClient } from "./client.js";
import { CliError, EXIT } from "./errors.js";
import type { EventView, SandboxView } from "./views.js";

export interface WaitOptions {
  /** Phases that end the wait successfully. */
  until: string[];
  timeoutMs: number;
  quiet: boolean;
  /** Sequence number of the last event already seen. */
  afterSeq?: number;
}

const TRANSIENT = new Set(["Provisioning", "Stopping", "Deleting", "Recovering"]);

/** Resolves with the settled sandbox, or null once it has been deleted. */
export async function waitForPhase(client: GatewayClient, name: string, opts: WaitOptions): Promise<SandboxView | null> {
  const deadline = Date.now() + opts.timeoutMs;
  let seq = opts.afterSeq ?? 0;
  const say = (line: string): void => {
    if (!opts.quiet) process.stderr.write(`  ${line}\n`);
  };
  for (;;) {
    let s: SandboxView;
    try {
      s = await client.request<SandboxView>("GET", `/v1/sandboxes/${encodeURIComponent(name)}`);
      const { events } = await client.request<{ events: EventView[] }>(
        "GET",
        `/v1/sandboxes/${encodeURIComponent(name)}/events?after=${seq}`,
      );
      for (const e of events) {
        seq = e.seq;
        if (e.kind === "info" && e.message) say(e.message);
        else if (e.kind === "phase") say(`${e.oldPhase ?? "-"} → ${e.newPhase ?? "-"}${e.reasonText ? ` (${e.reasonText})` : ""}`);
      }
    } catch (err) {
      if (err instanceof CliError && err.exitCode === EXIT.notFound && opts.until.includes("Deleted")) return null;
      throw err;
    }
    if (opts.until.includes(s.phase)) return s;
    if (!TRANSIENT.has(s.phase)) {
      const why = s.reasonText ? `: ${s.reasonText}` : "";
      throw new CliError(`sandbox "${s.name}" is ${s.phase}${why}`, EXIT.failed);
    }
    if (Date.now() > deadline) {
      throw new CliError(`timed out after ${Math.round(opts.timeoutMs / 1000)} s waiting for "${name}" (it is ${s.phase})`, EXIT.timeout);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}
