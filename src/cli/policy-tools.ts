// `sandgate policy validate|diff|replay|suggest`: review a policy change before making
// it. validate runs offline; the others ask the gateway, which changes nothing.

import { readFileSync } from "node:fs";
import type { Command } from "commander";
import type { PolicyChange } from "../policy/diff.js";
import type { ReplayLine, ReplayResult } from "../policy/replay.js";
import type { AuditWindow } from "../gateway/sandboxes/policy-tools.js";
import { checkFilesystemPolicy } from "../gateway/sandboxes/policy-input.js";
import { parsePolicyYaml } from "../policy/index.js";
import type { GatewayClient } from "./client.js";
import { sinceArg } from "./args.js";
import { CliError, EXIT } from "./errors.js";
import { plural, printJson, table } from "./format.js";

const enc = encodeURIComponent;

export function readPolicyFile(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch (err) {
    throw new CliError(`cannot read policy file ${path}: ${(err as Error).message}`, EXIT.usage);
  }
}

export function windowLine(w: AuditWindow): string {
  if (w.records === 0) return "audit window: no recorded egress";
  const more = w.truncated ? " (older records not read; narrow with --since)" : "";
  return `audit window: ${plural(w.requests, "request")} in ${plural(w.records, "record")}, ${w.from} to ${w.to}${more}`;
}

const replayRows = (lines: readonly ReplayLine[]): string[][] => lines.map((l) => [String(l.count), l.lastSeen, l.request, l.because]);

/** `policy diff`'s text: the changes against a revision, rule by rule. */
export function diffText(r: { revision: number; changes: PolicyChange[] }): string {
  if (r.changes.length === 0) return `no change against revision ${r.revision}\n`;
  const out = [`against revision ${r.revision}:`];
  for (const c of r.changes) out.push(`${c.kind}: ${c.name}`, ...c.lines.map((l) => `  ${l}`));
  return out.join("\n") + "\n";
}

/** `policy replay`'s text: the audit window, then what would be newly denied or allowed. */
export function replayText(r: { window: AuditWindow } & ReplayResult): string {
  const out = [windowLine(r.window)];
  out.push(`unchanged: ${r.unchanged.allowed} allowed, ${r.unchanged.denied} denied${r.skipped > 0 ? `; ${r.skipped} lockdown or no-policy denials skipped` : ""}`);
  for (const [title, lines] of [["newly denied", r.newlyDenied], ["newly allowed", r.newlyAllowed], ["would deny (let through by audit mode)", r.wouldDeny]] as const) {
    out.push("", `${title}: ${lines.length === 0 ? "none" : ""}`);
    if (lines.length > 0) out.push(table(["COUNT", "LAST SEEN", "REQUEST", "BECAUSE"], replayRows(lines)));
  }
  return out.join("\n") + "\n";
}

export function addPolicyTools(policy: Command, client: () => GatewayClient): void {
  policy
    .command("validate")
    .description("check a policy file offline: exit 0 when valid, 2 naming every problem (process.user against the host's accounts is checked by the gateway, at create and set)")
    .argument("<file>", "policy YAML")
    .option("--json", "print the result as JSON")
    .action((file: string, o: { json?: boolean }) => {
      const parsed = parsePolicyYaml(readPolicyFile(file));
      const errors = parsed.ok ? [checkFilesystemPolicy(parsed.policy)].filter((e): e is string => e !== null) : parsed.errors;
      if (o.json) printJson({ valid: errors.length === 0, errors });
      // One problem on its line; several, one per line under a line that counts them.
      if (errors.length === 1) throw new CliError(`${file}: invalid policy: ${errors[0]}`, EXIT.usage);
      if (errors.length > 1) throw new CliError(`${file}: invalid policy, ${errors.length} problems:\n${errors.map((e) => `  ${e}`).join("\n")}`, EXIT.usage);
      if (!o.json && parsed.ok) {
        const n = parsed.policy.network;
        process.stdout.write(`${file}: valid (${plural(n.rules.length, "rule")}, ${plural(n.deny.length, "deny entry", "deny entries")})\n`);
      }
    });

  policy
    .command("diff")
    .description("what a policy file changes against the sandbox's active revision, rule by rule")
    .argument("<name>", "sandbox name or id")
    .requiredOption("--policy <file>", "the candidate policy YAML")
    .option("--json", "print as JSON")
    .action(async (name: string, o: { policy: string; json?: boolean }) => {
      const r = await client().request<{ revision: number; changes: PolicyChange[] }>("POST", `/v1/sandboxes/${enc(name)}/policy/diff`, { policy: readPolicyFile(o.policy) });
      if (o.json) return printJson(r);
      process.stdout.write(diffText(r));
    });

  policy
    .command("replay")
    .description("decide the sandbox's recorded egress under a policy file: what it would newly deny or allow")
    .argument("<name>", "sandbox name or id")
    .requiredOption("--policy <file>", "the candidate policy YAML")
    .option("--since <time>", "only traffic recorded at or after an RFC 3339 time, or a duration back from now (90s, 10m, 2h, 7d)", sinceArg("--since"))
    .option("--json", "print as JSON")
    .action(async (name: string, o: { policy: string; since?: string; json?: boolean }) => {
      const body: Record<string, unknown> = { policy: readPolicyFile(o.policy) };
      if (o.since !== undefined) body.since = o.since;
      const r = await client().request<{ revision: number; window: AuditWindow } & ReplayResult>("POST", `/v1/sandboxes/${enc(name)}/policy/replay`, body);
      if (o.json) return printJson(r);
      process.stdout.write(replayText(r));
    });

  policy
    .command("suggest")
    .description("rules that would allow what the audit trail shows was denied, or let through as would-deny, for want of a rule (review before use)")
    .argument("<name>", "sandbox name or id")
    .option("--since <time>", "only traffic recorded at or after an RFC 3339 time, or a duration back from now (90s, 10m, 2h, 7d)", sinceArg("--since"))
    .option("--json", "print as JSON")
    .action(async (name: string, o: { since?: string; json?: boolean }) => {
      const q = o.since !== undefined ? `?since=${enc(o.since)}` : "";
      const r = await client().request<{ revision: number; window: AuditWindow; covers: number; fromLookups?: string[]; privateHosts?: string[]; yaml: string; rulesYaml?: string; rules: unknown[] }>("GET", `/v1/sandboxes/${enc(name)}/policy/suggest${q}`);
      if (o.json) return printJson(r);
      process.stderr.write(`${windowLine(r.window)}\n`);
      if (r.rules.length === 0) return void process.stderr.write("nothing to suggest: no request or name lookup was denied for want of a rule\n");
      process.stderr.write(`${plural(r.rules.length, "rule")} covering ${plural(r.covers, "denied request")}, added to revision ${r.revision}'s policy below; explicit denies and private-address denials are never suggested\n`);
      const guessed = r.fromLookups ?? [];
      if (guessed.length > 0) process.stderr.write(`from refused name lookups only (https on 443 is a guess, check it): ${guessed.join(", ")}\n`);
      const privateHosts = r.privateHosts ?? [];
      if (privateHosts.length > 0) process.stderr.write(`allowPrivate for the private address each was seen at (check it is meant): ${privateHosts.join(", ")}\n`);
      process.stderr.write(`review it, then: sandgate policy validate FILE && sandgate policy set ${name} --policy FILE\n`);
      process.stdout.write(r.yaml);
    });
}
