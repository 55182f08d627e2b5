// The `sandgate` command line: commands, global options, exit codes.

import { Command, CommanderError } from "commander";
import { VERSION } from "../version.js";
import { CliError, EXIT } from "./errors.js";
import { auditCommand } from "./audit-commands.js";
import { gatewayCommands } from "./gateway-commands.js";
import { fleetCommands } from "./fleet-commands.js";
import { secretCommands } from "./secret-commands.js";
import { policyCommands } from "./policy-commands.js";
import { addProposalCommands } from "./policy-proposals.js";
import { GatewayClient } from "./client.js";
import { sandboxCommands } from "./sandbox-commands.js";
import { completionCommands } from "./completion.js";
import { mcpCommand } from "./mcp-command.js";

export function buildProgram(): Command {
  const program = new Command("sandgate")
    .description("Sandgate: isolated sandboxes for AI-agent workloads on Docker")
    .version(VERSION)
    .option("--home <dir>", "gateway state directory (env SANDGATE_HOME, default ~/.sandgate)")
    .option("--url <url>", "gateway API address, unix:///PATH or https://HOST:PORT (env SANDGATE_URL; default: the socket <home>/gateway.json names). An https gateway must present the certificate in <home>/api-cert.pem, or in the file SANDGATE_CERT names, before any token is sent")
    // Global options go before the command, so that `policy check --url` means the checked URL.
    .enablePositionalOptions()
    .addHelpText(
      "after",
      `
Exit codes: 0 ok, 1 failed, 2 usage or invalid input, 3 gateway not running,
4 not found, 5 not allowed now (phase), name taken or a stale proposal, 6 timed out,
7 bad token (or no approver token for 'policy approve|reject'), 8 denied
('policy check'), 130 Ctrl-C while 'sandbox create' waits (the sandbox goes on).
'sandbox exec' exits with the command's own exit code.`,
    );
  const global = () => program.opts<{ home?: string; url?: string }>();
  program.addCommand(gatewayCommands(global));
  program.addCommand(fleetCommands(global));
  program.addCommand(sandboxCommands(global));
  const policy = policyCommands(global);
  addProposalCommands(policy, () => new GatewayClient(global()));
  program.addCommand(policy);
  program.addCommand(auditCommand(global));
  program.addCommand(secretCommands(global));
  mcpCommand(program, global);
  completionCommands(program, global);
  // Every usage error is one line: "sandgate: <what is wrong> (run with --help for usage)".
  const everyCommand = (c: Command): Command[] => [c, ...c.commands.flatMap(everyCommand)];
  for (const c of everyCommand(program)) {
    c.exitOverride();
    // `sandbox exec demo ls -la`: the command's own options go after --.
    const takesCommand = c.parent?.name() === "sandbox" && (c.name() === "exec" || c.name() === "create");
    c.configureOutput({ outputError: (str, write) => write(`sandgate: ${usageLine(str, takesCommand)} (run with --help for usage)\n`) });
  }
  return program;
}

/** Commander's error text, shortened: our argument parsers' messages already name the flag and the value. */
function usageLine(str: string, takesCommand: boolean): string {
  const text = str.trim().replace(/^error: /, "");
  const ours = /is invalid\. (--[\s\S]*)$/.exec(text);
  const line = (ours ? ours[1]! : text).replace(/\s*\n\s*/g, " ");
  return takesCommand && /^unknown option /.test(line) ? `${line}; the command's own options go after --, e.g. sandgate sandbox exec NAME -- ls -la` : line;
}

export async function main(argv: string[]): Promise<number> {
  const program = buildProgram();
  // Bare `sandgate` (or a bare command group): its help, on stdout, as a success.
  const args = argv.slice(2);
  const group = args.length === 1 ? program.commands.find((c) => c.name() === args[0] && c.commands.length > 0) : undefined;
  if (args.length === 0 || group) {
    process.stdout.write((group ?? program).helpInformation());
    return EXIT.ok;
  }
  try {
    await program.parseAsync(argv);
    return typeof process.exitCode === "number" ? process.exitCode : EXIT.ok;
  } catch (err) {
    if (err instanceof CommanderError) {
      // Help and version are printed by commander and are not failures.
      if (err.code === "commander.helpDisplayed" || err.code === "commander.version" || err.code === "commander.help") return EXIT.ok;
      return EXIT.usage;
    }
    if (err instanceof CliError) {
      process.stderr.write(`sandgate: ${err.message}\n`);
      return err.exitCode;
    }
    process.stderr.write(`sandgate: unexpected error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    return EXIT.failed;
  }
}
