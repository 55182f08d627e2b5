// `sandgate sandbox exec NAME -- CMD...` and `sandgate sandbox connect NAME`:
// an exec session of the SDK (src/sdk/exec.ts), which the gateway runs. stdout and stderr stay
// separate; the exit code is the command's own.

import { Command } from "commander";
import { checkExecArgv } from "../api/schemas.js";
import { ExecSession, type ExecRequest, type ExecSignal } from "../sdk/exec.js";
import { GatewayClient, asCli } from "./client.js";
import { CliError, EXIT, cliErrorOf } from "./errors.js";
import { addExecFlags, execRequest, execStatusCommand, forwardSignals, runDetached, signalNumber, type ExecFlags } from "./exec-options.js";

interface Common {
  home?: string;
  url?: string;
}

interface SessionOptions {
  name: string;
  cmd: string[];
  tty: boolean;
  /** Forward our stdin to the process. */
  stdin: boolean;
  /** env, workdir, user, timeout (exec-options.ts). */
  request?: Omit<ExecRequest, "cmd" | "tty" | "size">;
}

function runSession(client: GatewayClient, o: SessionOptions): Promise<number> {
  // As docker does: a terminal needs one at our end too; piped input would be lost in it.
  if (o.tty && o.stdin && !process.stdin.isTTY) {
    return Promise.reject(new CliError("the input is not a TTY: -t (and connect) need a terminal on stdin; drop -t to pipe input", EXIT.usage));
  }
  const over = checkExecArgv(o.cmd);
  if (over) return Promise.reject(new CliError(over.replace(/^cmd: /, ""), EXIT.usage));
  if (!client.url) return client.request("GET", "/v1/status").then(() => 1); // raises "not running"
  const size = o.tty && process.stdout.isTTY ? { cols: process.stdout.columns, rows: process.stdout.rows } : undefined;
  const req: ExecRequest = { ...o.request, cmd: o.cmd, tty: o.tty, ...(size ? { size } : {}) };

  let restoreTty = (): void => undefined;
  let unforward = (): void => undefined;
  const finish = (): void => {
    unforward();
    restoreTty();
    process.stdin.pause();
  };
  const session: ExecSession = asCli(
    () =>
      new ExecSession(client.transport, o.name, req, {
        onOpen: () => {
          // Signals go to the command; with a terminal, Ctrl-C is a byte it sends like any key.
          unforward = forwardSignals(
            (sig) => session.signal(sig as ExecSignal),
            (code) => session.close(code),
          );
          if (o.tty && process.stdin.isTTY) {
            process.stdin.setRawMode(true);
            restoreTty = () => process.stdin.setRawMode(false);
            const resize = (): void => session.resize(process.stdout.columns, process.stdout.rows);
            process.stdout.on("resize", resize);
            const prev = restoreTty;
            restoreTty = () => {
              process.stdout.off("resize", resize);
              prev();
            };
          }
          if (o.stdin) {
            process.stdin.on("data", (chunk: Buffer) => void session.write(chunk));
            process.stdin.on("end", () => session.end());
            process.stdin.resume();
          } else {
            session.end();
          }
        },
        onStdout: (chunk) => void process.stdout.write(chunk),
        onStderr: (chunk) => void process.stderr.write(chunk),
        onError: (message) => process.stderr.write(`sandgate: ${message}\n`),
        onSignalFailed: (sig, message) => {
          // The command could not be told: stop waiting for it, as a shell's job would have ended.
          process.stderr.write(`sandgate: SIG${sig} was not delivered: ${message}; the command may still run\n`);
          session.close(128 + signalNumber(sig));
        },
      }),
  );
  return session.exit.then(
    // Let stdout drain before the exit code is returned.
    (code) => new Promise<number>((resolve) => process.stdout.write("", () => {
      finish();
      resolve(code);
    })),
    (err: unknown) => {
      finish();
      throw cliErrorOf(err);
    },
  );
}

export function execCommands(sandbox: Command, global: () => Common): void {
  addExecFlags(
    sandbox
      .command("exec")
      .description("run a command in a Ready sandbox; exits with the command's exit code (Ctrl-C goes to the command: 130)")
      .argument("<name>", "sandbox name or id")
      .argument("<command...>", "the command and its arguments (put -- before it)")
      .option("-i, --interactive", "forward a terminal's keystrokes as stdin (piped stdin is always forwarded)")
      .option("-t, --tty", "allocate a terminal"),
  )
    .addHelpText("after", "\nExamples:\n  sandgate sandbox exec demo -- ls -la /sandbox\n  echo hi | sandgate sandbox exec demo -- cat\n  sandgate sandbox exec demo -e MODE=ci -w /sandbox/app --timeout 10m -- make test")
    .action(async (name: string, cmd: string[], o: ExecFlags & { interactive?: boolean; tty?: boolean }) => {
      const client = new GatewayClient(global());
      if (o.detach) return runDetached(client, name, cmd, o);
      const { request } = execRequest(o);
      const forwardStdin = !process.stdin.isTTY || !!o.interactive;
      process.exitCode = await runSession(client, { name, cmd, tty: !!o.tty, stdin: forwardStdin, request });
    });
  execStatusCommand(sandbox, global);

  sandbox
    .command("connect")
    .description("open an interactive shell in a Ready sandbox")
    .argument("<name>", "sandbox name or id")
    .option("--shell <path>", "shell to run", "/bin/sh")
    .action(async (name: string, o: { shell: string }) => {
      const client = new GatewayClient(global());
      process.exitCode = await runSession(client, { name, cmd: [o.shell], tty: true, stdin: true });
    });
}
