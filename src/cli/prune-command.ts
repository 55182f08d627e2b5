// `sandgate sandbox prune`: delete the sandboxes that have ended (Completed, Error,
// Stopped) and not changed for a while, one delete intent each, after a yes on a
// terminal (or --force). Each delete carries the generation that was listed, so a
// sandbox started again in the meantime is skipped, never deleted: the gateway
// refuses the intent atomically (its compare-and-set is on that generation).

import { createInterface } from "node:readline";
import { Command, InvalidArgumentError } from "commander";
import { WAIT, intArg, labelArg, secondsArg } from "./args.js";
import { GatewayClient } from "./client.js";
import { CliError, EXIT } from "./errors.js";
import { printJson, table, when } from "./format.js";
import { sandboxPages } from "./list-commands.js";
import type { SandboxSummaryView } from "../sdk/types.js";
import { waitForPhase } from "./wait.js";
import type { LabelPair } from "../lifecycle/labels.js";
import type { Phase } from "../lifecycle/phases.js";
import type { DurationRange } from "../util/settings.js";

interface Common {
  home?: string;
  url?: string;
}

/** The phases prune may delete from: a sandbox that has ended. Anything running is never pruned. */
export const PRUNABLE: readonly Phase[] = ["Completed", "Error", "Stopped"];
/** --older-than: from 0 (any age) to ten years. */
const OLDER_THAN: DurationRange = { minS: 0, maxS: 3650 * 86_400 };
const PRUNE_LIMIT = { min: 1, max: 1_000_000 };

function phases(raw: string): Phase[] {
  const parts = raw.split(",").map((p) => p.trim());
  if (parts.length === 0 || parts.some((p) => !(PRUNABLE as readonly string[]).includes(p))) {
    throw new InvalidArgumentError(`--phase must be a comma-separated list of ${PRUNABLE.join(", ")} (prune deletes only sandboxes that have ended); got ${JSON.stringify(raw)}`);
  }
  return [...new Set(parts as Phase[])];
}

interface PruneOptions extends Common {
  phase: Phase[];
  olderThan: number;
  label?: LabelPair[];
  limit?: number;
  force?: boolean;
  dryRun?: boolean;
  json?: boolean;
  timeout: number;
}

type Candidate = Pick<SandboxSummaryView, "id" | "name" | "phase" | "generation" | "updatedAt">;
interface Outcome extends Candidate {
  result: "deleted" | "already deleted" | "skipped" | "failed";
  detail?: string;
}

/** The sandboxes to prune, in name order: in one of the phases, unchanged since `cutoff` (ms), with every label. */
async function candidates(client: GatewayClient, o: PruneOptions, cutoff: number): Promise<Candidate[]> {
  const found: Candidate[] = [];
  for (const phase of o.phase) {
    for await (const page of sandboxPages(client, { view: "lean", phase, labels: o.label })) {
      for (const s of page) {
        if (Date.parse(s.updatedAt) <= cutoff) found.push({ id: s.id, name: s.name, phase: s.phase, generation: s.generation, updatedAt: s.updatedAt });
      }
    }
  }
  found.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return o.limit === undefined ? found : found.slice(0, o.limit);
}

const listing = (c: Candidate[]): string =>
  table(["NAME", "PHASE", "GEN", "LAST CHANGE"], c.map((s) => [s.name, s.phase, String(s.generation), when(s.updatedAt)]));

/** y/N on the terminal; anything but y or yes (Ctrl-C, Ctrl-D included) is no. */
async function confirm(question: string): Promise<boolean> {
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    const answer = await new Promise<string>((resolve) => {
      rl.once("close", () => resolve(""));
      rl.once("SIGINT", () => rl.close());
      rl.question(question, resolve);
    });
    return /^y(es)?$/i.test(answer.trim());
  } finally {
    rl.close();
  }
}

async function deleteOne(client: GatewayClient, c: Candidate, timeoutMs: number): Promise<Outcome> {
  try {
    await client.request("DELETE", `/v1/sandboxes/${encodeURIComponent(c.id)}?generation=${c.generation}`);
  } catch (err) {
    if (!(err instanceof CliError)) throw err;
    if (err.exitCode === EXIT.notFound) return { ...c, result: "already deleted" };
    // Started again (a new generation) or otherwise changed since it was listed.
    if (err.exitCode === EXIT.conflict) return { ...c, result: "skipped", detail: err.message };
    if (err.exitCode === EXIT.unreachable || err.exitCode === EXIT.unauthorized) throw err;
    return { ...c, result: "failed", detail: err.message };
  }
  try {
    await waitForPhase(client, c.id, { until: ["Deleted"], timeoutMs, quiet: true });
    return { ...c, result: "deleted" };
  } catch (err) {
    if (!(err instanceof CliError) || err.exitCode === EXIT.unreachable) throw err;
    return { ...c, result: "failed", detail: err.message };
  }
}

export function pruneCommand(sandbox: Command, global: () => Common): void {
  sandbox
    .command("prune")
    .description("delete sandboxes that have ended (Completed, Error, Stopped), after asking")
    .option("--phase <phases>", `only these phases, comma-separated (default ${PRUNABLE.join(",")})`, phases, [...PRUNABLE])
    .option("--older-than <duration>", "only those whose last change is older than this: 30m, 2h, 7d (default: any age)", secondsArg("--older-than", OLDER_THAN), 0)
    .option("--label <KEY=VALUE>", "only sandboxes with this label (repeatable: all of them)", labelArg("--label"))
    .option("--limit <n>", `at most the first N, in name order (${PRUNE_LIMIT.min}-${PRUNE_LIMIT.max})`, intArg("--limit", PRUNE_LIMIT))
    .option("--dry-run", "only list what would be deleted")
    .option("--force", "delete without asking (needed when stdin is not a terminal)")
    .option("--timeout <seconds>", "how long to wait for each deletion", secondsArg("--timeout", WAIT), 120)
    .option("--json", "print the result as JSON (one array)")
    .addHelpText("after", "\nExamples:\n  sandgate sandbox prune --older-than 7d\n  sandgate sandbox prune --phase Error --label ci=true --force --json")
    .action(async (_o, cmd: Command) => {
      const o: PruneOptions = { ...global(), ...cmd.opts<PruneOptions>() };
      const client = new GatewayClient({ home: o.home, url: o.url });
      const found = await candidates(client, o, Date.now() - o.olderThan * 1000);
      if (found.length === 0 || o.dryRun) {
        if (o.json) return printJson(found);
        return void process.stdout.write(found.length === 0 ? "nothing to prune\n" : listing(found) + "\n");
      }
      const what = `${found.length} sandbox${found.length === 1 ? "" : "es"}`;
      if (!o.force) {
        if (!process.stdin.isTTY) {
          throw new CliError(`refusing to delete ${what} without confirmation: stdin is not a terminal; list them with --dry-run, delete them with --force`, EXIT.usage);
        }
        process.stderr.write(listing(found) + "\n");
        if (!(await confirm(`Delete these ${what}? [y/N] `))) {
          if (o.json) printJson([]);
          return void process.stderr.write("nothing deleted\n");
        }
      }
      const outcomes: Outcome[] = [];
      for (const [i, c] of found.entries()) {
        if (!o.json) process.stderr.write(`deleting ${c.name} (${i + 1}/${found.length})\n`);
        const r = await deleteOne(client, c, o.timeout * 1000);
        outcomes.push(r);
        if (!o.json) process.stdout.write(`${c.name}  ${r.result}${r.detail ? `: ${r.detail}` : ""}\n`);
      }
      const count = (k: Outcome["result"]): number => outcomes.filter((r) => r.result === k).length;
      const failed = count("failed");
      if (o.json) printJson(outcomes);
      else {
        const extra = [count("skipped") && `${count("skipped")} skipped (changed since listed)`, failed && `${failed} failed`].filter(Boolean);
        process.stdout.write(`pruned ${count("deleted") + count("already deleted")} of ${what}${extra.length ? `; ${extra.join(", ")}` : ""}\n`);
      }
      if (failed > 0) throw new CliError(`${failed} of ${what} could not be deleted`, EXIT.failed);
    });
}
