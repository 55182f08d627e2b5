// `sandgate sandbox restart NAME`: stop (when it runs), wait for Stopped, start a new
// generation (same workspace), wait for Ready as `start` does. A failure names the step
// it happened in and keeps that step's exit code.

import type { Command } from "commander";
import { WAIT, secondsArg } from "./args.js";
import { GatewayClient } from "./client.js";
import { CliError, EXIT } from "./errors.js";
import { printJson } from "./format.js";
import type { EventView, SandboxView } from "../sdk/types.js";
import { waitForPhase } from "./wait.js";
import { errorMessage } from "../util/error-message.js";

const enc = encodeURIComponent;
const RUNNING = ["Provisioning", "Ready", "Recovering"];

/** The error of one step, with the step named and its exit code kept. */
function inStep(step: "stop" | "start", err: unknown): CliError {
  if (err instanceof CliError) return new CliError(`restart: ${step} failed: ${err.message}`, err.exitCode);
  return new CliError(`restart: ${step} failed: ${errorMessage(err)}`);
}

async function lastSeq(client: GatewayClient, name: string): Promise<number> {
  const { events } = await client.request<{ events: EventView[] }>("GET", `/v1/sandboxes/${enc(name)}/events?tail=1`);
  return events.at(-1)?.seq ?? 0;
}

export function restartCommand(sandbox: Command, global: () => { home?: string; url?: string }): void {
  sandbox
    .command("restart")
    .description("stop a sandbox (if it runs), then start it as a new generation with the same workspace, and wait until it is Ready")
    .argument("<name>", "sandbox name or id")
    .option("--no-wait", "return once the start is accepted (the stop is always waited for)")
    .option("--timeout <seconds>", "how long to wait for each of the stop and the start", secondsArg("--timeout", WAIT), 180)
    .option("--json", "print the result as JSON")
    .addHelpText("after", "\nExample:\n  sandgate sandbox restart demo")
    .action(async (name: string, o: { wait: boolean; timeout: number; json?: boolean }) => {
      const client = new GatewayClient(global());
      const say = (line: string): void => {
        if (!o.json) process.stderr.write(`${line}\n`);
      };
      const wait = (until: string[], afterSeq: number): Promise<SandboxView | null> =>
        waitForPhase(client, name, { until, timeoutMs: o.timeout * 1000, quiet: !!o.json, afterSeq });
      const before = await client.request<SandboxView>("GET", `/v1/sandboxes/${enc(name)}`);
      if (before.phase === "Deleting") throw new CliError(`restart: sandbox "${before.name}" is being deleted`, EXIT.conflict);
      if (RUNNING.includes(before.phase) || before.phase === "Stopping") {
        say(`stopping "${before.name}" (generation ${before.generation})`);
        try {
          const seq = await lastSeq(client, name);
          if (before.phase !== "Stopping") await client.request("POST", `/v1/sandboxes/${enc(name)}/stop`);
          await wait(["Stopped"], seq);
        } catch (err) {
          throw inStep("stop", err);
        }
      }
      // Stopped, Completed or Error: a start makes the next generation (from Error too: its containers are removed first).
      let started: SandboxView;
      let seq: number;
      try {
        seq = await lastSeq(client, name);
        started = await client.request<SandboxView>("POST", `/v1/sandboxes/${enc(name)}/start`);
      } catch (err) {
        throw inStep("start", err);
      }
      say(`starting "${started.name}" as generation ${started.generation}`);
      let final: SandboxView | null = started;
      if (o.wait) {
        try {
          final = await wait(["Ready", "Completed"], seq);
        } catch (err) {
          throw inStep("start", err);
        }
      }
      const s = final ?? started;
      if (o.json) printJson(s);
      else process.stdout.write(`${s.name}  ${s.phase}${s.reasonText ? ` (${s.reasonText})` : ""}  generation ${s.generation}\n`);
    });
}
