// `npm run docs:cli`: writes docs/cli.md, the full CLI reference, from the commander program
// itself (src/cli/program.ts): every command, recursively, with its usage, description,
// arguments, options (defaults and choices as --help shows them) and the text its --help adds.
// test/unit/cli/cli-docs.test.ts renders it again in memory and fails when the file differs.
import { writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { Command } from "commander";
import { buildProgram } from "../src/cli/program.js";

export const CLI_DOCS_PATH = join(dirname(fileURLToPath(import.meta.url)), "..", "docs", "cli.md");
export const CLI_DOCS_COMMAND = "npm run docs:cli";

/** One table cell: one line, pipes escaped. */
const cell = (s: string): string => s.replace(/\s*\n\s*/g, " ").replace(/\|/g, "\\|").trim();
/** Prose in a cell: also `<home>` shown as text, not taken for an HTML tag. */
const prose = (s: string): string => cell(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
const fullName = (c: Command): string => (c.parent ? `${fullName(c.parent)} ${c.name()}` : c.name());
const anchor = (c: Command): string => fullName(c).replace(/\s+/g, "-").toLowerCase();

/** The text a command's --help prints around commander's own (addHelpText), before and after. */
function addedHelp(c: Command): { before: string; after: string } {
  let out = "";
  c.configureOutput({ writeOut: (s) => (out += s), writeErr: (s) => (out += s), getOutHelpWidth: () => 1000, getErrHelpWidth: () => 1000, getOutHasColors: () => false, getErrHasColors: () => false });
  c.outputHelp();
  const base = c.helpInformation();
  const at = out.indexOf(base);
  if (at < 0) return { before: "", after: "" };
  return { before: out.slice(0, at).trim(), after: out.slice(at + base.length).trim() };
}

function section(c: Command, depth: number): string[] {
  const help = c.createHelp();
  const lines: string[] = [];
  lines.push(`${"#".repeat(Math.min(depth + 2, 4))} \`${fullName(c)}\``, "");
  const aliases = c.aliases();
  if (c.description()) lines.push(prose(c.description()), "");
  lines.push("```", help.commandUsage(c), "```", "");
  if (aliases.length > 0) lines.push(`Alias${aliases.length > 1 ? "es" : ""}: ${aliases.map((a) => `\`${a}\``).join(", ")}.`, "");
  const args = help.visibleArguments(c);
  if (args.length > 0) {
    lines.push("| argument | description |", "|---|---|");
    for (const a of args) lines.push(`| \`${cell(help.argumentTerm(a))}\` | ${prose(help.argumentDescription(a))} |`);
    lines.push("");
  }
  // -h, --help is on every command: listed once, on the program.
  const options = help.visibleOptions(c).filter((o) => depth === 0 || o.long !== "--help");
  if (options.length > 0) {
    lines.push("| option | description |", "|---|---|");
    for (const o of options) lines.push(`| \`${cell(help.optionTerm(o))}\` | ${prose(help.optionDescription(o))} |`);
    lines.push("");
  }
  const subs = help.visibleCommands(c).filter((s) => s.name() !== "help");
  if (subs.length > 0) {
    lines.push("| command | description |", "|---|---|");
    for (const s of subs) lines.push(`| [\`${fullName(s)}\`](#${anchor(s)}) | ${prose(s.summary() || s.description().split("\n")[0]!)} |`);
    lines.push("");
  }
  const { before, after } = addedHelp(c);
  for (const text of [before, after]) if (text) lines.push("```text", text, "```", "");
  for (const s of subs) lines.push(...section(s, depth + 1));
  return lines;
}

/** docs/cli.md as the program describes itself now. */
export function renderCliDocs(): string {
  const program = buildProgram();
  const head = [
    "# CLI reference",
    "",
    `<!-- Generated from the program itself (src/cli/program.ts) by \`${CLI_DOCS_COMMAND}\` (scripts/gen-cli-docs.ts); do not edit. test/unit/cli/cli-docs.test.ts fails when it is out of date. -->`,
    "",
    "Every `sandgate` command, as its `--help` describes it. Global options (`--home`, `--url`) go before the command.",
    "Every command has `--help`; bare `sandgate` (or a bare group, `sandgate sandbox`) prints its help on stdout.",
    "What each command does in depth (ranges, edge cases, exit codes, examples): [commands.md](commands.md).",
    "",
  ];
  return [...head, ...section(program, 0)].join("\n").replace(/\n{3,}/g, "\n\n").trimEnd() + "\n";
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  writeFileSync(CLI_DOCS_PATH, renderCliDocs());
  console.log(`docs:cli: wrote ${CLI_DOCS_PATH}`);
}
