// `sandgate sandbox port-forward NAME [LOCAL:]REMOTE`: listens on a loopback port and
// relays each accepted connection through its own WebSocket to the gateway, which
// connects to 127.0.0.1:REMOTE inside the workload (src/gateway/api/port-forward-ws.ts).
// Ends on Ctrl-C (exit 0) or when the sandbox leaves Ready (exit 5; 4 once deleted).

import { Command } from "commander";
import net from "node:net";
import WebSocket from "ws";
import { GatewayClient } from "./client.js";
import { CliError, EXIT, exitCodeForApi } from "./errors.js";
import { loopbackAddress, parseForwardSpec } from "./port-forward-args.js";
import type { SandboxView } from "../sdk/types.js";

interface Common {
  home?: string;
  url?: string;
}

/** Bytes of one connection the CLI holds unsent in each direction before it stops reading the other side. */
const CONNECTION_HIGH_WATER = 1 << 20;
/** How often the sandbox's phase is checked while the forward runs. */
const PHASE_POLL_MS = 1000;

interface ForwardOptions {
  name: string;
  address: string;
  local: number;
  remote: number;
  json: boolean;
}

const hostPort = (address: string, port: number): string => (address.includes(":") ? `[${address}]:${port}` : `${address}:${port}`);

/**
 * Relays one accepted connection; `onRefused` hears the gateway's refusals (the sandbox may be
 * gone). A connection that fails says why in one line: what follows from the failure (the
 * WebSocket torn down as the local socket closes) is not a second one.
 */
function relayConnection(sock: net.Socket, open: () => WebSocket, onRefused: (code: string, message: string) => void): void {
  const peer = hostPort(sock.remoteAddress ?? "?", sock.remotePort ?? 0);
  let said = false;
  const say = (msg: string): void => {
    if (said) return;
    said = true;
    process.stderr.write(`sandgate: connection from ${peer}: ${msg}\n`);
  };
  const ws = open();
  let error: string | null = null;
  let outstanding = 0;

  ws.on("unexpected-response", (_req, res) => {
    let body = "";
    res.on("data", (b: Buffer) => (body = (body + b.toString()).slice(0, 4096)));
    res.on("end", () => {
      let code = "unavailable";
      let message = `refused with HTTP ${res.statusCode ?? "?"}`;
      try {
        const e = (JSON.parse(body) as { error: { code: string; message: string } }).error;
        code = e.code;
        message = e.message;
      } catch {
        /* not the API's error: the status says it */
      }
      say(message);
      sock.destroy();
      onRefused(code, message);
    });
  });
  ws.on("error", (err) => {
    say(`the gateway connection failed: ${err.message}`);
    sock.destroy();
  });
  ws.on("open", () => sock.resume());
  ws.on("message", (data: Buffer, isBinary: boolean) => {
    if (isBinary) {
      if (!sock.write(data)) {
        ws.pause();
        sock.once("drain", () => ws.resume());
      }
      return;
    }
    try {
      const m = JSON.parse(data.toString()) as { type?: string; message?: string };
      if (m.type === "error") error = m.message ?? "error";
    } catch {
      error = "the gateway sent a frame this CLI does not understand";
    }
  });
  ws.on("close", (code) => {
    if (code === 1000 && !error) {
      sock.end(); // the workload's side closed; what we wrote still goes out
      return;
    }
    if (error) say(error);
    else if (!sock.destroyed) say(`closed by the gateway (WebSocket code ${code})`);
    sock.destroy();
  });

  sock.on("data", (chunk: Buffer) => {
    if (ws.readyState !== WebSocket.OPEN) return;
    outstanding += chunk.length;
    if (outstanding > CONNECTION_HIGH_WATER) sock.pause();
    ws.send(chunk, { binary: true }, () => {
      outstanding -= chunk.length;
      if (outstanding <= CONNECTION_HIGH_WATER / 2 && sock.isPaused() && ws.readyState === WebSocket.OPEN) sock.resume();
    });
  });
  sock.on("end", () => {
    if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: "eof" }));
  });
  sock.on("error", () => undefined); // a client that resets: the close below ends the relay
  sock.on("close", () => {
    if (ws.readyState === WebSocket.OPEN) ws.close(1000);
    else if (ws.readyState === WebSocket.CONNECTING) ws.terminate();
  });
}

async function runForward(client: GatewayClient, o: ForwardOptions): Promise<number> {
  if (!client.url) await client.request("GET", "/v1/status"); // raises "not running"
  const path = `/v1/sandboxes/${encodeURIComponent(o.name)}`;
  const s = await client.request<SandboxView>("GET", path);
  if (s.phase !== "Ready") throw new CliError(`sandbox "${s.name}" is ${s.phase}; port-forward needs Ready`, EXIT.conflict);
  const open = (): WebSocket => client.transport.webSocket(`${path}/port-forward?port=${o.remote}`, { perMessageDeflate: false, maxPayload: CONNECTION_HIGH_WATER });

  const server = net.createServer({ pauseOnConnect: true });
  await new Promise<void>((resolve, reject) => {
    server.once("error", (err: Error & { code?: string }) => {
      const why = err.code === "EADDRINUSE" ? "it is in use; pick another LOCAL port, or 0 for a free one" : err.message;
      reject(new CliError(`cannot listen on ${hostPort(o.address, o.local)}: ${why}`, err.code === "EADDRINUSE" ? EXIT.failed : EXIT.usage));
    });
    server.listen({ host: o.address, port: o.local, exclusive: true }, () => resolve());
  });
  const local = (server.address() as net.AddressInfo).port;
  if (o.json) process.stdout.write(JSON.stringify({ sandbox: s.name, address: o.address, localPort: local, remotePort: o.remote }) + "\n");
  else process.stdout.write(`Forwarding from ${hostPort(o.address, local)} -> ${o.remote}\n`);

  const sockets = new Set<net.Socket>();
  return new Promise<number>((resolve, reject) => {
    let over = false;
    let timer: NodeJS.Timeout | undefined;
    const end = (outcome: { code: number } | { error: CliError }): void => {
      if (over) return;
      over = true;
      clearTimeout(timer);
      process.off("SIGINT", onSignal);
      process.off("SIGTERM", onSignal);
      server.close();
      for (const sock of sockets) sock.destroy();
      if ("code" in outcome) resolve(outcome.code);
      else reject(outcome.error);
    };
    const onSignal = (): void => end({ code: EXIT.ok });
    process.once("SIGINT", onSignal);
    process.once("SIGTERM", onSignal);

    // The forward lives as long as the sandbox is Ready.
    let checking = false;
    const check = async (): Promise<void> => {
      if (checking || over) return;
      checking = true;
      try {
        const now = await client.request<SandboxView>("GET", path);
        if (now.phase !== "Ready") {
          end({ error: new CliError(`sandbox "${now.name}" is ${now.phase}: the forward from ${hostPort(o.address, local)} ended`, EXIT.conflict) });
        }
      } catch (err) {
        if (err instanceof CliError && err.exitCode === EXIT.notFound) {
          end({ error: new CliError(`sandbox "${o.name}" was deleted: the forward from ${hostPort(o.address, local)} ended`, EXIT.notFound) });
        } else end({ error: err instanceof CliError ? err : new CliError((err as Error).message) });
      } finally {
        checking = false;
      }
    };
    const poll = (): void => {
      timer = setTimeout(() => void check().then(() => !over && poll()), PHASE_POLL_MS);
    };
    poll();

    server.on("connection", (sock: net.Socket) => {
      sockets.add(sock);
      sock.on("close", () => sockets.delete(sock));
      relayConnection(sock, open, (code, message) => {
        // A refusal for the sandbox's sake (gone, not Ready, bad token) ends the forward now.
        if (code === "not_allowed" || code === "not_found") void check();
        if (code === "unauthorized") end({ error: new CliError(client.transport.refusedToken(message).message, exitCodeForApi(code)) });
      });
    });
  });
}

export function portForwardCommand(sandbox: Command, global: () => Common): void {
  sandbox
    .command("port-forward")
    .description("forward a loopback port on this host to a port inside a Ready sandbox (a server on its 127.0.0.1 included)")
    .argument("<name>", "sandbox name or id")
    .argument("<ports>", "[LOCAL:]REMOTE: REMOTE is the port inside the workload; LOCAL defaults to REMOTE, and 0 or an empty LOCAL (:REMOTE) picks a free port")
    .option("--address <ip>", "loopback address to listen on (127.0.0.1, another 127.x.y.z, ::1 or localhost)", "127.0.0.1")
    .option("--json", 'print the forward as one JSON line ({"sandbox","address","localPort","remotePort"}) instead of "Forwarding from ..."')
    .addHelpText(
      "after",
      `
Each connection to the local port is relayed through the gateway to 127.0.0.1:REMOTE
inside the workload. Any local user can connect to the local port while it runs.
Runs until Ctrl-C (exit 0) or the sandbox leaves Ready (exit 5; 4 if deleted).

Examples:
  sandgate sandbox port-forward demo 8080
  sandgate sandbox port-forward demo :8080      # a free local port, printed`,
    )
    .action(async (name: string, ports: string, o: { address: string; json?: boolean }) => {
      const spec = parseForwardSpec(ports);
      if ("error" in spec) throw new CliError(spec.error, EXIT.usage);
      const addr = loopbackAddress(o.address);
      if ("error" in addr) throw new CliError(addr.error, EXIT.usage);
      const client = new GatewayClient(global());
      process.exitCode = await runForward(client, { name, address: addr.address, local: spec.local, remote: spec.remote, json: !!o.json });
    });
}
