// The relay a port-forward runs inside the workload, one per forwarded connection:
// a Docker exec (by container id) of `node -e SCRIPT` that connects to 127.0.0.1:PORT
// in the workload's own network namespace and copies stdin → socket → stdout. It runs
// with the workload's own user and namespaces, so it can reach nothing the workload
// cannot; the workload gains no route out. Pure: no I/O here.
//
// Handshake on stderr (stdout carries only the connection's bytes):
//   "sandgate-relay: connected\n" once the socket is connected;
//   "sandgate-relay: failed CODE\n" and exit 1 when it cannot connect (CODE: ECONNREFUSED…).
// Half-close: stdin's EOF ends the socket's write side (FIN); the peer's FIN ends the
// relay (exit 0) once pending writes are flushed, so the gateway sees stdout end.

export const RELAY_BINARY = "node";
export const RELAY_CONNECTED = "sandgate-relay: connected\n";
export const RELAY_FAILED = "sandgate-relay: failed ";

/** Exit codes of an exec whose binary could not be started (Docker/runc: 126 not executable, 127 not found). */
export const EXEC_NOT_STARTED = new Set([126, 127]);

export function isPort(n: number): boolean {
  return Number.isInteger(n) && n >= 1 && n <= 65535;
}

/** The relay's script; `port` must already be a valid port (it is written into the code). */
export function relayScript(port: number): string {
  if (!isPort(port)) throw new RangeError(`not a port: ${port}`);
  return [
    `const s=require("net").connect(${port},"127.0.0.1");`,
    `s.on("connect",()=>process.stderr.write(${JSON.stringify(RELAY_CONNECTED)}));`,
    `s.on("error",(e)=>process.stderr.write(${JSON.stringify(RELAY_FAILED)}+(e.code||e.message)+"\\n",()=>process.exit(1)));`,
    // A full pipe queues writes: exit only once everything written to stdout is out
    // (callbacks run in order), or a slow reader loses the connection's last bytes.
    `s.on("close",(hadError)=>{if(!hadError)process.stdout.write("",()=>process.exit(0))});`,
    // The gateway went away (its end of the exec closed): nothing left to relay to.
    `process.stdout.on("error",()=>process.exit(0));`,
    `process.stdin.pipe(s);`,
    `s.pipe(process.stdout);`,
  ].join("");
}

export function relayCommand(port: number): string[] {
  return [RELAY_BINARY, "-e", relayScript(port)];
}

/** Parses the `port` query value: decimal digits only, 1-65535; else a one-line reason. */
export function parsePortQuery(raw: string | null): { port: number } | { error: string } {
  if (raw === null) return { error: "port: required, a TCP port from 1 to 65535 inside the workload" };
  const n = /^\d{1,5}$/.test(raw) ? Number(raw) : Number.NaN;
  if (!isPort(n)) return { error: `port: must be a whole number from 1 to 65535; got ${JSON.stringify(raw)}` };
  return { port: n };
}
