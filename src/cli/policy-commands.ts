// `sandgate policy set|get|check`: numbered policy revisions, pushed to the
// running supervisor over its authenticated session.

import { readFileSync } from "node:fs";
import { Command } from "commander";
import { POLICY_MAX_BYTES, megabytes } from "../gateway/errors.js";
import { secondsArg } from "./args.js";
import { GatewayClient } from "./client.js";
import { CliError, EXIT } from "./errors.js";
import { stringify } from "yaml";
import { printJson, when } from "./format.js";
import type { BoundaryView } from "../sdk/types.js";
import { boundaryLine } from "../sdk/policy.js";

export { boundaryLine };
import { addPolicyTools } from "./policy-tools.js";

interface Common {
  home?: string;
  url?: string;
}

const enc = encodeURIComponent;

/** A policy file's text; a file over the gateway's limit is refused here, before it is sent. */
export function readPolicyFile(path: string): string {
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (err) {
    throw new CliError(`cannot read policy file ${path}: ${(err as Error).message}`, EXIT.usage);
  }
  if (bytes.length > POLICY_MAX_BYTES) throw new CliError(`policy ${path} is ${megabytes(bytes.length)}; the limit is 1 MiB`, EXIT.usage);
  return bytes.toString("utf8");
}

/** "; closed 2 connections" (open ones the revision does not allow), or nothing when the supervisor did not say. */
function closedText(n: number | null | undefined): string {
  if (n === null || n === undefined) return "";
  return `; closed ${String(n)} connection${n === 1 ? "" : "s"}`;
}

/**
 * What follows "revision N accepted": whether the supervisor enforces it (and what that
 * closed), and, for a sandbox that was Recovering, what it still waits for.
 */
export function enforcementText(r: { enforced: boolean | null; connectionsClosed?: number | null; phase?: string }): string {
  const enforced = r.enforced ? `; enforced by the supervisor${closedText(r.connectionsClosed)}` : "";
  if (r.phase !== "Recovering") return enforced;
  return r.enforced
    ? `${enforced}; the sandbox is Recovering: Ready again once Docker answers and re-verifies it`
    : "; the sandbox is Recovering: its supervisor enforces the revision once it acknowledges it (that needs no Docker), and the sandbox is Ready again only after that";
}

export function policyCommands(global: () => Common): Command {
  const policy = new Command("policy").description("view and change a sandbox's network policy");
  const client = (): GatewayClient => new GatewayClient(global());

  policy
    .command("set")
    .description("accept a new policy revision (hot: no restart); an invalid policy changes nothing; allowed while Recovering (the supervisor's session needs no Docker)")
    .argument("<name>", "sandbox name or id")
    .requiredOption("--policy <file>", "policy YAML (see docs/policy.md)")
    .option("--wait", "return only when the supervisor has acknowledged the revision as enforced (a Recovering sandbox stays Recovering until Docker re-verifies it)")
    .option("--timeout <seconds>", "how long --wait waits (1-600 s)", secondsArg("--timeout", { minS: 1, maxS: 600 }), 30)
    .option("--json", "print the result as JSON")
    .action(async (name: string, o: { policy: string; wait?: boolean; timeout: number; json?: boolean }) => {
      const text = readPolicyFile(o.policy);
      const body: Record<string, unknown> = { policy: text };
      if (o.wait) body.wait = o.timeout;
      const r = await client().request<{ revision: number; pushed: boolean; phase?: string; enforced: boolean | null; connectionsClosed?: number | null; boundary: BoundaryView | null }>(
        "PUT",
        `/v1/sandboxes/${enc(name)}/policy`,
        body,
        undefined,
        o.wait ? o.timeout : undefined,
      );
      if (o.json) printJson(r);
      else process.stdout.write(`${name}  policy revision ${r.revision} accepted${enforcementText(r)}\n`);
      if (o.wait && !r.enforced) {
        throw new CliError(
          `revision ${r.revision} is stored but the supervisor did not acknowledge it within ${o.timeout} s (${boundaryLine(r.boundary)})`,
          EXIT.timeout,
        );
      }
    });

  policy
    .command("get")
    .description("print the active policy as the YAML it was given in (--json: the parsed policy), with its revision and whether the supervisor enforces it")
    .argument("<name>", "sandbox name or id")
    .option("--json", "print as JSON (the parsed policy, its source text, revision and boundary)")
    .action(async (name: string, o: { json?: boolean }) => {
      const r = await client().request<{ revision: number; createdAt: string; hash: string; policy: unknown; source?: string | null; boundary: BoundaryView | null }>(
        "GET",
        `/v1/sandboxes/${enc(name)}/policy`,
      );
      if (o.json) return printJson(r);
      // The YAML as the user wrote it (a revision given as an object: as YAML), after
      // comment lines that keep it a valid file for `policy set`.
      const text = r.source ?? stringify(r.policy);
      process.stdout.write(`# revision ${r.revision}, accepted ${when(r.createdAt)}\n# boundary: ${boundaryLine(r.boundary)}\n${text.endsWith("\n") ? text : `${text}\n`}`);
    });

  policy
    .command("check")
    .description("dry run: what the active policy decides for a URL; exits 0 when allowed, 8 when denied")
    .argument("<name>", "sandbox name or id")
    .requiredOption("--url <url>", "e.g. https://api.example.com/v1/x")
    .option("--method <method>", "HTTP method (for http:// URLs)", "GET")
    .option("--json", "print as JSON")
    .action(async (name: string, o: { url: string; method: string; json?: boolean }) => {
      const r = await client().request<{ revision: number; decision: { allow: boolean; rule?: string; reason?: string } }>(
        "POST",
        `/v1/sandboxes/${enc(name)}/policy/check`,
        { url: o.url, method: o.method },
      );
      const d = r.decision;
      // Scripts branch on the exit code: 0 allow, 8 deny (the answer, not a failure).
      process.exitCode = d.allow ? EXIT.ok : EXIT.denied;
      if (o.json) return printJson(r);
      process.stdout.write(d.allow ? `allow  (rule ${d.rule ?? "?"}, revision ${r.revision})\n` : `deny   (${d.reason ?? "?"}${d.rule ? `, rule ${d.rule}` : ""}, revision ${r.revision})\n`);
    });

  addPolicyTools(policy, client);
  return policy;
}
