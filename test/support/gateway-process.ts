// The gateway as a separate process (the real CLI entry point under tsx), for
// tests that SIGKILL it: start, wait until it answers, call its API, kill.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { eventually } from "./gateway-fixture.js";

const MAIN = join(import.meta.dirname, "../../src/cli/main.ts");

export interface GatewayProcess {
  readonly home: string;
  readonly child: ChildProcess | undefined;
  /** Start it on DOCKER_HOST=unix://socketPath (removing a stale address file first). */
  start(socketPath: string, extraArgs?: string[], env?: Record<string, string>): ChildProcess;
  /** Resolves once its API answers. */
  up(ms?: number): Promise<void>;
  api(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }>;
  kill9(): Promise<void>;
}

export function gatewayProcess(home: string): GatewayProcess {
  let child: ChildProcess | undefined;
  const self: GatewayProcess = {
    home,
    get child() {
      return child;
    },
    start(socketPath, extraArgs = [], env = {}) {
      rmSync(join(home, "gateway.json"), { force: true });
      child = spawn(process.execPath, ["--import", "tsx", MAIN, "--home", home, "gateway", "start", "--port", "0", "--log-level", "warn", ...extraArgs], {
        env: { ...process.env, DOCKER_HOST: `unix://${socketPath}`, ...env },
        stdio: ["ignore", "ignore", "inherit"],
      });
      return child;
    },
    async api(method, path, body) {
      const addr = JSON.parse(readFileSync(join(home, "gateway.json"), "utf8")) as { url: string };
      const token = readFileSync(join(home, "token"), "utf8").trim();
      const res = await fetch(addr.url + path, {
        method,
        headers: { authorization: `Bearer ${token}`, ...(body ? { "content-type": "application/json" } : {}) },
        body: body ? JSON.stringify(body) : undefined,
      });
      return { status: res.status, body: await res.json() };
    },
    up(ms = 60_000) {
      return eventually(async () => (existsSync(join(home, "gateway.json")) ? await self.api("GET", "/v1/status").then(() => true, () => undefined) : undefined), ms, "gateway up").then(() => undefined);
    },
    kill9() {
      const p = child;
      if (!p || p.exitCode !== null || p.signalCode !== null) return Promise.resolve();
      return new Promise((resolve) => {
        p.once("exit", () => resolve());
        p.kill("SIGKILL");
      });
    },
  };
  return self;
}
