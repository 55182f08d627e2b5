// `sandgate sandbox list`: the sandboxes in name order, read page by page, filtered
// by the gateway (labels, phase), shown as a table, a wide table, JSON, YAML or
// names only. `sandboxPages` is the one reader of the list (prune and completion too).

import { Command, Option } from "commander";
import { stringify } from "yaml";
import { choiceArg, intArg, labelArg } from "./args.js";
import { GatewayClient } from "./client.js";
import { CliError, EXIT } from "./errors.js";
import { printJson, short, table, when } from "./format.js";
import type { SandboxSummaryView, SandboxView } from "../sdk/types.js";
import { formatLabels, type LabelPair } from "../lifecycle/labels.js";
import { PHASES, type Phase } from "../lifecycle/phases.js";

interface Common {
  home?: string;
  url?: string;
}

/** Sandboxes per request: many small requests, never one unbounded one. */
export const LIST_PAGE = 100;
const LIST_LIMIT = { min: 1, max: 1_000_000 };
export const LIST_FORMATS = ["table", "json", "yaml", "wide"] as const;
type Format = (typeof LIST_FORMATS)[number];

export interface ListFilter {
  phase?: Phase;
  labels?: readonly LabelPair[];
}

/**
 * The sandboxes in name order that pass the filter (applied by the gateway), page by
 * page: at most `limit` in all. `full` reads the full view (spec, runtime), else the list rows.
 */
export async function* sandboxPages<V extends "lean" | "full">(
  client: GatewayClient,
  f: ListFilter & { view: V; limit?: number; pageSize?: number },
): AsyncGenerator<(V extends "full" ? SandboxView : SandboxSummaryView)[]> {
  let left = f.limit ?? Number.POSITIVE_INFINITY;
  for (let after: string | null = ""; after !== null && left > 0; ) {
    const q = new URLSearchParams({ view: f.view, limit: String(Math.min(f.pageSize ?? LIST_PAGE, left)) });
    if (after) q.set("after", after);
    if (f.phase) q.set("phase", f.phase);
    for (const [k, v] of f.labels ?? []) q.append("label", `${k}=${v}`);
    const page: { sandboxes: (V extends "full" ? SandboxView : SandboxSummaryView)[]; next: string | null } = await client.request("GET", `/v1/sandboxes?${q.toString()}`);
    left -= page.sandboxes.length;
    after = page.next;
    yield page.sandboxes;
  }
}

/** What the table shows of a row, whichever view it came from. */
interface Row {
  name: string;
  phase: string;
  generation: number;
  reason: string;
  workload: string | null;
  supervisor: string | null;
  image: string;
  host: string | null;
  labels: Record<string, string>;
  createdAt: string;
  updatedAt: string;
}

function fromFull(s: SandboxView): Row {
  const live = (s.phase === "Provisioning" || s.phase === "Ready" || s.phase === "Recovering") && s.runtime?.generation === s.generation ? s.runtime : null;
  return {
    name: s.name,
    phase: s.phase,
    generation: s.generation,
    reason: s.reason?.code ?? "-",
    workload: live?.workload.id ?? null,
    supervisor: live?.supervisor.id ?? null,
    image: s.spec.image ?? "(default)",
    host: s.host,
    labels: s.labels,
    createdAt: s.createdAt,
    updatedAt: s.updatedAt,
  };
}

const BASE = ["NAME", "PHASE", "GEN", "REASON", "WORKLOAD", "SUPERVISOR", "CREATED"];

/** The table shows HOST when its rows are on more than one host (a fleet's); -o wide always does. */
function render(format: "table" | "wide", rows: (SandboxSummaryView | Row)[]): string {
  const hostOf = (s: { host: string | null }): string => s.host ?? "-";
  if (format === "table") {
    const r = rows as SandboxSummaryView[];
    const hosts = new Set(r.map(hostOf)).size > 1;
    return table(
      hosts ? [...BASE, "HOST"] : BASE,
      r.map((s) => [s.name, s.phase, String(s.generation), s.reason?.code ?? "-", short(s.workload ?? undefined), short(s.supervisor ?? undefined), when(s.createdAt), ...(hosts ? [hostOf(s)] : [])]),
    );
  }
  const r = rows as Row[];
  return table(
    [...BASE, "UPDATED", "HOST", "IMAGE", "LABELS"],
    r.map((s) => [s.name, s.phase, String(s.generation), s.reason, short(s.workload ?? undefined), short(s.supervisor ?? undefined), when(s.createdAt), when(s.updatedAt), hostOf(s), s.image, formatLabels(s.labels)]),
  );
}

interface ListOptions extends Common {
  label?: LabelPair[];
  phase?: Phase;
  limit?: number;
  quiet?: boolean;
  format?: Format;
  json?: boolean;
}

/** --json is --format json; -q prints names and takes no format. Contradictions are usage errors. */
function chosenFormat(o: ListOptions): Format | "names" {
  if (o.json && o.format !== undefined && o.format !== "json") throw new CliError(`--json is --format json; it contradicts --format ${o.format}`, EXIT.usage);
  if (o.quiet && (o.json || o.format !== undefined)) throw new CliError("-q prints names only, one per line; it takes no --format or --json", EXIT.usage);
  return o.quiet ? "names" : o.json ? "json" : (o.format ?? "table");
}

export function listCommand(sandbox: Command, global: () => Common): void {
  sandbox
    .command("list")
    .alias("ls")
    .description("list sandboxes, in name order")
    .option("--label <KEY=VALUE>", "only sandboxes with this label (repeatable: all of them)", labelArg("--label"))
    .addOption(new Option("--phase <phase>", "only sandboxes in this phase").choices(PHASES).argParser(choiceArg("--phase", PHASES)))
    .option("--limit <n>", `only the first N (${LIST_LIMIT.min}-${LIST_LIMIT.max})`, intArg("--limit", LIST_LIMIT))
    .option("-q, --quiet", "names only, one per line")
    .addOption(
      new Option("--format <format>", "table (default); wide adds updated, image and labels; json and yaml print the list rows")
        .choices(LIST_FORMATS)
        .argParser(choiceArg("--format", LIST_FORMATS)),
    )
    .option("--json", "the same as --format json (one array of list rows; sandbox get has the full view)")
    .addHelpText("after", "\nExamples:\n  sandgate sandbox list --label team=infra --phase Ready\n  sandgate sandbox list -q --phase Error | xargs -r -n1 sandgate sandbox delete")
    .action(async (_o, cmd: Command) => {
      const o: ListOptions = { ...global(), ...cmd.opts<ListOptions>() };
      const format = chosenFormat(o);
      const client = new GatewayClient({ home: o.home, url: o.url });
      const filter = { phase: o.phase, labels: o.label, limit: o.limit };
      const filtered = o.phase !== undefined || (o.label?.length ?? 0) > 0;
      // Names are printed as each page arrives; every other format needs the whole list (column widths, one document).
      if (format === "names") {
        for await (const page of sandboxPages(client, { ...filter, view: "lean" })) {
          if (page.length > 0) process.stdout.write(page.map((s) => s.name).join("\n") + "\n");
        }
        return;
      }
      const rows: (SandboxSummaryView | Row)[] = [];
      if (format === "wide") for await (const page of sandboxPages(client, { ...filter, view: "full" })) rows.push(...page.map(fromFull));
      else for await (const page of sandboxPages(client, { ...filter, view: "lean" })) rows.push(...page);
      if (format === "json") return printJson(rows);
      if (format === "yaml") return void process.stdout.write(rows.length === 0 ? "[]\n" : stringify(rows));
      if (rows.length === 0) return void process.stdout.write(filtered ? "no sandboxes match\n" : "no sandboxes\n");
      process.stdout.write(render(format, rows) + "\n");
    });
}
