// `sandgate sandbox exec NAME -- CMD...` and `sandgate sandbox connect NAME`:
// a WebSocket to the gateway, which runs the exec. stdout and stderr stay
// separate; the exit code is the command's own.

import { Command } from "commander";
import WebSocket from "ws";
import { checkExecArgv } from "../gateway/api/schemas.js";
import { GatewayClient } from "./client.js";
import { CliError, EXIT, exitCodeForApi } from "./errors.js";
import { addExecFlags, execRequest, execStatusCommand, forwardSignals, runDetached, signalNumber, type ExecFlags } from "./exec-options.js";

const STDIN = 0;
const STDOUT = 1;
const STDERR = 2;

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
  /** More query pairs: env, workdir, user, timeout (exec-options.ts). */
  query?: [string, string][];
}

function runSession(client: GatewayClient, o: SessionOptions): Promise<number> {
  // As docker does: a terminal needs one at our end too; piped input would be lost in it.
  if (o.tty && o.stdin && !process.stdin.isTTY) {
    return Promise.reject(new CliError("the input is not a TTY: -t (and connect) need a terminal on stdin; drop -t to pipe input", EXIT.usage));
  }
  const over = checkExecArgv(o.cmd);
  if (over) return Promise.reject(new CliError(over.replace(/^cmd: /, ""), EXIT.usage));
  if (!client.url) return client.request("GET", "/v1/status").then(() => 1); // raises "not running"
  const q = new URLSearchParams();
  for (const c of o.cmd) q.append("cmd", c);
  q.set("tty", o.tty ? "1" : "0");
  for (const [k, v] of o.query ?? []) q.append(k, v);
  if (o.tty && process.stdout.isTTY) {
    q.set("cols", String(process.stdout.columns));
    q.set("rows", String(process.stdout.rows));
  }
  const url = `${client.url.replace(/^http/, "ws")}/v1/sandboxes/${encodeURIComponent(o.name)}/exec?${q.toString()}`;
  const ws = new WebSocket(url, { headers: client.authHeader(), perMessageDeflate: false });

  return new Promise<number>((resolve, reject) => {
    let exit: number | undefined;
    let restoreTty = (): void => undefined;
    let unforward = (): void => undefined;
    const finish = (fn: () => void): void => {
      unforward();
      restoreTty();
      process.stdin.pause();
      fn();
    };

    ws.on("unexpected-response", (_req, res) => {
      let body = "";
      res.on("data", (b: Buffer) => (body += b.toString()));
      res.on("end", () => {
        try {
          const err = (JSON.parse(body) as { error: { code: string; message: string } }).error;
          finish(() => reject(new CliError(err.message, exitCodeForApi(err.code))));
        } catch {
          const text = body.trim().slice(0, 200);
          finish(() => reject(new CliError(`exec refused with HTTP ${res.statusCode ?? "?"} ${res.statusMessage ?? ""}${text ? `: ${text}` : " (no explanation)"}`)));
        }
      });
    });
    ws.on("error", (err: Error & { code?: string }) => {
      const unreachable = err.code === "ECONNREFUSED" || err.code === "ENOENT";
      finish(() =>
        reject(
          unreachable
            ? new CliError(`the gateway is not running at ${client.url}: ${err.code}; start it with: sandgate gateway start`, EXIT.unreachable)
            : new CliError(`exec connection failed: ${err.message}`),
        ),
      );
    });
    ws.on("open", () => {
      // Signals go to the command; with a terminal, Ctrl-C is a byte it sends like any key.
      unforward = forwardSignals(
        (sig) => ws.send(JSON.stringify({ type: "signal", signal: sig })),
        (code) => {
          exit = code;
          ws.close();
        },
      );
      if (o.tty && process.stdin.isTTY) {
        process.stdin.setRawMode(true);
        restoreTty = () => process.stdin.setRawMode(false);
        const resize = (): void => ws.send(JSON.stringify({ type: "resize", cols: process.stdout.columns, rows: process.stdout.rows }));
        process.stdout.on("resize", resize);
        const prev = restoreTty;
        restoreTty = () => {
          process.stdout.off("resize", resize);
          prev();
        };
      }
      if (o.stdin) {
        process.stdin.on("data", (chunk: Buffer) => ws.send(Buffer.concat([Buffer.of(STDIN), chunk])));
        process.stdin.on("end", () => ws.send(JSON.stringify({ type: "eof" })));
        process.stdin.resume();
      } else {
        ws.send(JSON.stringify({ type: "eof" }));
      }
    });
    ws.on("message", (data: Buffer, isBinary: boolean) => {
      if (isBinary) {
        if (data[0] === STDOUT) process.stdout.write(data.subarray(1));
        else if (data[0] === STDERR) process.stderr.write(data.subarray(1));
        return;
      }
      const msg = JSON.parse(data.toString()) as { type: string; code?: number; message?: string; signal?: string };
      if (msg.type === "exit") exit = msg.code;
      else if (msg.type === "error") process.stderr.write(`sandgate: ${msg.message ?? "exec error"}\n`);
      else if (msg.type === "signal-failed") {
        // The command could not be told: stop waiting for it, as a shell's job would have ended.
        process.stderr.write(`sandgate: SIG${msg.signal ?? "?"} was not delivered: ${msg.message ?? "unknown error"}; the command may still run\n`);
        exit = 128 + signalNumber(msg.signal ?? "");
        ws.close();
      }
    });
    ws.on("close", () => {
      if (exit !== undefined) {
        const code = exit;
        // Let stdout drain before the exit code is returned.
        process.stdout.write("", () => finish(() => resolve(code)));
      } else finish(() => reject(new CliError("the exec session ended without an exit code (gateway or sandbox went away)")));
    });
  });
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
      const { query } = execRequest(o);
      const forwardStdin = !process.stdin.isTTY || !!o.interactive;
      process.exitCode = await runSession(client, { name, cmd, tty: !!o.tty, stdin: forwardStdin, query });
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
