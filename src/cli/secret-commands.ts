// `sandgate secret set|list|delete`: secrets the supervisors inject for the
// workload. A value is read from stdin or a file, never from the command line
// (argv is visible to every local user in /proc), and never printed.

import { readFileSync } from "node:fs";
import { Command } from "commander";
import { GatewayClient } from "./client.js";
import { CliError, EXIT } from "./errors.js";
import { printJson, table, when } from "./format.js";
import { secondsArg } from "./args.js";

interface Common {
  home?: string;
  url?: string;
}

const MAX = 64 * 1024;

/** Reads all of a piped stdin, or one line typed on a terminal without echoing it. */
async function readValue(): Promise<Buffer> {
  const stdin = process.stdin;
  if (!stdin.isTTY) {
    const chunks: Buffer[] = [];
    let n = 0;
    for await (const c of stdin as AsyncIterable<Buffer>) {
      n += c.length;
      if (n > MAX) throw new CliError(`a secret value is at most ${MAX} bytes; stdin holds more`, EXIT.usage);
      chunks.push(c);
    }
    // One trailing newline (echo's) is not part of the value.
    const value = Buffer.concat(chunks);
    return value.at(-1) === 0x0a ? value.subarray(0, value.at(-2) === 0x0d ? -2 : -1) : value;
  }
  process.stderr.write("value (not shown): ");
  stdin.setRawMode(true);
  stdin.resume();
  const typed: number[] = [];
  try {
    for await (const c of stdin as AsyncIterable<Buffer>) {
      for (const byte of c) {
        if (byte === 0x03) throw new CliError("cancelled", EXIT.failed); // Ctrl-C
        if (byte === 0x0d || byte === 0x0a) return Buffer.from(typed);
        if (byte === 0x7f) typed.pop();
        else typed.push(byte);
      }
    }
    return Buffer.from(typed);
  } finally {
    stdin.setRawMode(false);
    stdin.pause();
    process.stderr.write("\n");
  }
}

export function secretCommands(global: () => Common): Command {
  const secret = new Command("secret").description("manage secrets the supervisors inject into the workload's requests (the workload never sees them)");
  const client = (): GatewayClient => new GatewayClient(global());

  secret
    .command("set")
    .description("create or replace a secret; the value comes from stdin (piped, or typed without echo) or --from-file")
    .argument("<name>", "secret name: lowercase letters, digits, '-' and '_'")
    .option("--from-file <path>", "read the value from this file (as is)")
    .option("--wait", "return once every running sandbox that uses it holds the new value")
    .option("--timeout <seconds>", "how long --wait waits (1-300 s)", secondsArg("--timeout", { minS: 1, maxS: 300 }), 30)
    .option("--json", "print the result as JSON")
    .addHelpText("after", "\nExamples:\n  printf %s \"$GITHUB_TOKEN\" | sandgate secret set github\n  sandgate secret set github --from-file ~/.config/gh-token")
    .action(async (name: string, o: { fromFile?: string; wait?: boolean; timeout: number; json?: boolean }) => {
      let value: Buffer;
      if (o.fromFile !== undefined) {
        try {
          value = readFileSync(o.fromFile);
        } catch (err) {
          throw new CliError(`cannot read ${o.fromFile}: ${(err as Error).message}`, EXIT.usage);
        }
      } else {
        value = await readValue();
      }
      if (value.length === 0) throw new CliError("the secret value is empty", EXIT.usage);
      if (value.length > MAX) throw new CliError(`a secret value is at most ${MAX} bytes; this one is ${value.length}`, EXIT.usage);
      const r = await client().request<{ name: string; version: number; bytes: number; usedBy: string[]; pushed: string[]; acknowledged: string[] | null; pending: string[] | null }>(
        "PUT",
        `/v1/secrets/${encodeURIComponent(name)}`,
        { valueBase64: value.toString("base64"), ...(o.wait ? { wait: o.timeout } : {}) },
      );
      if (r.pending !== null && r.pending.length > 0) process.exitCode = EXIT.timeout;
      if (o.json) return printJson(r);
      const sent = r.pushed.length === 0 ? "" : r.acknowledged === null ? `; sent to ${r.pushed.join(", ")}` : `; held by ${r.acknowledged.join(", ") || "none"}`;
      const late = r.pending !== null && r.pending.length > 0 ? `; not acknowledged within ${o.timeout} s by ${r.pending.join(", ")}` : "";
      process.stdout.write(`secret ${r.name}: version ${r.version} (${r.bytes} bytes)${r.usedBy.length ? `; used by ${r.usedBy.join(", ")}` : ""}${sent}${late}\n`);
    });

  secret
    .command("list")
    .alias("ls")
    .description("list secrets: names, versions, sizes, the sandboxes that use them and where they are bound (never values)")
    .option("--json", "print as JSON")
    .action(async (o: { json?: boolean }) => {
      const { secrets } = await client().request<{ secrets: { name: string; version: number; bytes: number; updatedAt: string; usedBy: string[]; bindings: { sandbox: string; host: string; ports: number[]; paths: string[] | null; form: string }[] }[] }>("GET", "/v1/secrets");
      if (o.json) return printJson(secrets);
      if (secrets.length === 0) return void process.stdout.write("no secrets\n");
      const where = (b: (typeof secrets)[number]["bindings"][number]): string => `${b.sandbox}:${b.host}:${b.ports.join("+")}${b.paths === null ? "" : b.paths.join("+")}${b.form === "header" ? "(header)" : ""}`;
      process.stdout.write(
        table(["NAME", "VERSION", "BYTES", "UPDATED", "USED BY", "BOUND TO"], secrets.map((s) => [s.name, String(s.version), String(s.bytes), when(s.updatedAt), s.usedBy.join(",") || "-", [...new Set(s.bindings.map(where))].join(",") || "-"])) + "\n",
      );
    });

  secret
    .command("delete")
    .alias("rm")
    .description("delete a secret (sandboxes using it then fail closed on requests that need it)")
    .argument("<name>", "secret name")
    .action(async (name: string) => {
      try {
        await client().request("DELETE", `/v1/secrets/${encodeURIComponent(name)}`);
      } catch (err) {
        // Idempotent, as `sandbox delete` is: what is not there is already deleted.
        if (!(err instanceof CliError) || err.exitCode !== EXIT.notFound) throw err;
        return void process.stdout.write(`secret ${name} already deleted (there is no such secret)\n`);
      }
      process.stdout.write(`secret ${name} deleted\n`);
    });

  return secret;
}
