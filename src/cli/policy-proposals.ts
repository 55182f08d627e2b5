// `sandgate policy propose|proposals|approve|reject`: a policy change proposed (by an
// agent through the API, or here) and decided by a person. approve and reject read the
// approver token from the gateway's home (<home>/approver-token, mode 0600): the API token
// alone cannot decide, so an agent's client that holds only the API token cannot either.

import { readFileSync } from "node:fs";
import { userInfo } from "node:os";
import { Option, type Command } from "commander";
import type { PolicyChange } from "../policy/diff.js";
import type { ReplayResult } from "../policy/replay.js";
import type { AuditWindow } from "../gateway/sandboxes/policy-tools.js";
import { choiceArg, secondsArg } from "./args.js";
import type { GatewayClient } from "./client.js";
import { CliError, EXIT } from "./errors.js";
import { HIDDEN_CHARS } from "../policy/proposals.js";
import { inspectAddress } from "../home.js";
import { printJson, table, when } from "./format.js";
import { boundaryLine, enforcementText, readPolicyFile } from "./policy-commands.js";
import { diffText, replayText } from "./policy-tools.js";
import type { BoundaryView } from "../sdk/types.js";
import type { ProposalView } from "../sdk/index.js";

const enc = encodeURIComponent;
const STATES = ["pending", "approved", "rejected", "superseded"] as const;
/** The header the gateway reads the approver token from (src/gateway/api/proposals-routes.ts). */
const APPROVER_HEADER = "x-sandgate-approver";


interface ProposalDetail extends ProposalView {
  policy: string | Record<string, unknown>;
  activeRevision: number;
  diff: { revision: number; changes: PolicyChange[] };
  replay: { revision: number; window: AuditWindow } & ReplayResult;
}

/**
 * Text an agent wrote, as a terminal shows it: control and bidirectional characters as
 * \u{...} escapes. The gateway refuses them in a proposal; this keeps an older record or
 * a replayed request from acting on the person's terminal all the same.
 */
const UNSHOWABLE = new RegExp(`[\\u0000-\\u0008\\u000b-\\u001f${HIDDEN_CHARS}]`, "gu");
export const printable = (s: string): string => s.replace(UNSHOWABLE, (c) => `\\u{${c.codePointAt(0)!.toString(16)}}`);

/** How long ago: 45s, 12m, 3h, 2d. */
export function age(iso: string, now = Date.now()): string {
  const s = Math.max(0, Math.floor((now - Date.parse(iso)) / 1000));
  if (!Number.isFinite(s)) return "-";
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86_400) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86_400)}d`;
}

const stateText = (p: ProposalView): string => (p.stale ? "pending (stale)" : p.state === "approved" && p.revision !== null ? `approved (revision ${p.revision})` : p.state);
const cut = (s: string, n: number): string => (s.length > n ? `${s.slice(0, n - 1)}…` : s);

/** Who is deciding, as the event log records it: the CLI and the local account. */
function who(): string {
  try {
    return `cli:${userInfo().username}`.slice(0, 64);
  } catch {
    return "cli";
  }
}

/**
 * The approver token of the gateway this CLI talks to: its home's approver-token file.
 * Sent only to the gateway that home records: an address given otherwise (--url,
 * SANDGATE_URL) may be another gateway, or a host that would keep the token.
 */
function approverToken(client: GatewayClient): string {
  // The address the home records (what the CLI uses unless told otherwise), or another listener it records.
  const address = inspectAddress(client.paths).address;
  const recorded = address === null ? [] : [address.url, ...address.listeners];
  if (!recorded.includes(client.url)) {
    throw new CliError(
      `the approver token of ${client.paths.dir} goes only to the gateway that home records (${[...new Set(recorded)].join(", ") || "none recorded"}), not to ${client.url}: drop --url and SANDGATE_URL, or give the --home of that gateway`,
      EXIT.unauthorized,
    );
  }
  const path = client.paths.approverToken;
  let token: string;
  try {
    token = readFileSync(path, "utf8").trim();
  } catch (err) {
    const why = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    throw new CliError(
      `cannot read the approver token ${path} (${why}): deciding a policy proposal needs it; run this as the account that runs the gateway, with its --home (the gateway creates the file when it starts)`,
      EXIT.unauthorized,
    );
  }
  if (!token) throw new CliError(`the approver token ${path} is empty; remove it and restart the gateway to make a new one`, EXIT.unauthorized);
  return token;
}

function detailText(p: ProposalDetail): string {
  const out = [
    `proposal ${p.id} of ${printable(p.sandbox)}: ${stateText(p)}`,
    `proposed ${when(p.createdAt)} by ${printable(p.proposedBy)} against revision ${p.baseRevision}${p.stale ? ` (the active revision is ${p.activeRevision}: approving it would be refused)` : ""}`,
    `reason: ${p.reason === null ? "-" : printable(p.reason)}`,
  ];
  if (p.decidedAt) out.push(`${p.state} ${when(p.decidedAt)} by ${printable(p.decidedBy ?? "?")}${p.decisionNote ? `: ${printable(p.decisionNote)}` : ""}`);
  out.push("", "diff:", printable(diffText(p.diff)).trimEnd(), "", "replay of the recorded traffic under it:", printable(replayText(p.replay)).trimEnd());
  // The text itself, as it would be applied: what the diff summarizes, nothing left out.
  const text = typeof p.policy === "string" ? p.policy : JSON.stringify(p.policy, null, 2);
  out.push("", "policy:", ...printable(text).trimEnd().split("\n").map((l) => `  ${l}`));
  return out.join("\n") + "\n";
}

export function addProposalCommands(policy: Command, client: () => GatewayClient): void {
  policy
    .command("propose")
    .description("propose a policy change for a person to approve (sandgate policy approve); nothing changes until then")
    .argument("<name>", "sandbox name or id")
    .requiredOption("-f, --policy <file>", "the proposed policy YAML (checked now as `policy set` checks it)")
    .option("--reason <text>", "why, for the person who decides (one line, at most 1000 characters)")
    .option("--json", "print the proposal as JSON")
    .addHelpText("after", "\nE.g. sandgate policy propose demo -f wider.yaml --reason 'pip needs pypi.org'")
    .action(async (name: string, o: { policy: string; reason?: string; json?: boolean }) => {
      const body: Record<string, unknown> = { policy: readPolicyFile(o.policy), by: who() };
      if (o.reason !== undefined) body.reason = o.reason;
      const p = await client().request<ProposalView>("POST", `/v1/sandboxes/${enc(name)}/policy/proposals`, body);
      if (o.json) return printJson(p);
      process.stdout.write(`${p.id}  pending against revision ${p.baseRevision}\n`);
      process.stderr.write(`review it with: sandgate policy proposals ${name} ${p.id}; a person decides with: sandgate policy approve|reject ${name} ${p.id}\n`);
    });

  policy
    .command("proposals")
    .description("list a sandbox's policy proposals, each pending one with its diff against the active policy and a replay of the recorded traffic under it; with an ID, that one")
    .argument("<name>", "sandbox name or id")
    .argument("[id]", "one proposal (pp_...)")
    .option("--brief", "the table only, without the diffs and replays")
    .addOption(new Option("--state <state>", "only proposals in this state").choices(STATES).argParser(choiceArg("--state", STATES)))
    .option("--since <time>", "replay only traffic recorded at or after this RFC 3339 time")
    .option("--json", "print as JSON (the list; with an ID, the proposal with its diff and replay)")
    .addHelpText("after", "\nE.g. sandgate policy proposals demo\n     sandgate policy proposals demo pp_3f2a9c0e51d27b84")
    .action(async (name: string, id: string | undefined, o: { brief?: boolean; state?: string; since?: string; json?: boolean }) => {
      const c = client();
      const path = `/v1/sandboxes/${enc(name)}/policy/proposals`;
      const q = o.since === undefined ? "" : `?since=${enc(o.since)}`;
      if (id !== undefined) {
        const p = await c.request<ProposalDetail>("GET", `${path}/${enc(id)}${q}`);
        if (o.json) return printJson(p);
        return void process.stdout.write(detailText(p));
      }
      const list = await c.request<{ proposals: ProposalView[] }>("GET", `${path}${o.state === undefined ? "" : `?state=${o.state}`}`);
      if (o.json) return printJson(list.proposals);
      if (list.proposals.length === 0) return void process.stdout.write(`no ${o.state === undefined ? "" : `${o.state} `}policy proposals\n`);
      const now = Date.now();
      const rows = list.proposals.map((p) => [p.id, stateText(p), age(p.createdAt, now), printable(p.proposedBy), p.reason === null ? "-" : cut(printable(p.reason), 60)]);
      process.stdout.write(table(["ID", "STATE", "AGE", "BY", "REASON"], rows) + "\n");
      if (o.brief) return;
      // What a person needs to decide: each pending one's diff and replay, in turn.
      for (const p of list.proposals.filter((x) => x.state === "pending")) {
        process.stdout.write("\n" + detailText(await c.request<ProposalDetail>("GET", `${path}/${enc(p.id)}${q}`)));
      }
    });

  policy
    .command("approve")
    .description("apply a pending policy proposal as a new revision, as `policy set` would; refused when the policy changed since it was proposed")
    .argument("<name>", "sandbox name or id")
    .argument("<id>", "the proposal (pp_...)")
    .option("--wait", "return only when the supervisor has acknowledged the new revision as enforced")
    .option("--timeout <seconds>", "how long --wait waits (1-600 s)", secondsArg("--timeout", { minS: 1, maxS: 600 }), 30)
    .option("--json", "print the result as JSON")
    .addHelpText("after", "\nNeeds the approver token: <home>/approver-token, readable only by the account that runs the gateway.\nE.g. sandgate policy approve demo pp_3f2a9c0e51d27b84 --wait")
    .action(async (name: string, id: string, o: { wait?: boolean; timeout: number; json?: boolean }) => {
      const c = client();
      const body: Record<string, unknown> = { by: who() };
      if (o.wait) body.wait = o.timeout;
      const r = await c.request<{ proposal: ProposalView; revision: number; pushed: boolean; phase?: string; enforced: boolean | null; connectionsClosed: number | null; boundary: BoundaryView | null }>(
        "POST",
        `/v1/sandboxes/${enc(name)}/policy/proposals/${enc(id)}/approve`,
        body,
        { [APPROVER_HEADER]: approverToken(c) },
        o.wait ? o.timeout : undefined,
      );
      if (o.json) printJson(r);
      else process.stdout.write(`${name}  policy proposal ${id} approved: revision ${r.revision}${enforcementText(r)}\n`);
      if (o.wait && !r.enforced) {
        throw new CliError(`revision ${r.revision} is stored but the supervisor did not acknowledge it within ${o.timeout} s (${boundaryLine(r.boundary)})`, EXIT.timeout);
      }
    });

  policy
    .command("reject")
    .description("reject a pending policy proposal; the policy stays as it is")
    .argument("<name>", "sandbox name or id")
    .argument("<id>", "the proposal (pp_...)")
    .option("--reason <text>", "why, recorded with the decision (one line, at most 1000 characters)")
    .option("--json", "print the proposal as JSON")
    .addHelpText("after", "\nNeeds the approver token: <home>/approver-token, readable only by the account that runs the gateway.\nE.g. sandgate policy reject demo pp_3f2a9c0e51d27b84 --reason 'use the mirror'")
    .action(async (name: string, id: string, o: { reason?: string; json?: boolean }) => {
      const c = client();
      const body: Record<string, unknown> = { by: who() };
      if (o.reason !== undefined) body.reason = o.reason;
      const p = await c.request<ProposalView>("POST", `/v1/sandboxes/${enc(name)}/policy/proposals/${enc(id)}/reject`, body, { [APPROVER_HEADER]: approverToken(c) });
      if (o.json) return printJson(p);
      process.stdout.write(`${name}  policy proposal ${id} rejected\n`);
    });
}
