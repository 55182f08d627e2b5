// The gateway as a separate process (the real CLI entry point under tsx), for
// tests that SIGKILL it: start, wait until it answers, call its API, kill.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { EngineClient } from "../../src/driver/docker/engine/client.js";
import { PrivateDockerd } from "./dockerd.js";
import { eventually } from "./gateway-fixture.js";
import { CLI_MAIN } from "./cli-build.js";
import { apiFetch } from "./api-client.js";


export interface GatewayProcess {
  readonly home: string;
  readonly child: ChildProcess | undefined;
  /** Start it on DOCKER_HOST=unix://socketPath (removing a stale address file first, unless `keepAddress`: a standby beside a running gateway). */
  start(socketPath: string, extraArgs?: string[], env?: Record<string, string>, keepAddress?: boolean): ChildProcess;
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
    start(socketPath, extraArgs = [], env = {}, keepAddress = false) {
      if (!keepAddress) rmSync(join(home, "gateway.json"), { force: true });
      child = spawn(process.execPath, [CLI_MAIN, "--home", home, "gateway", "start", "--log-level", "warn", ...extraArgs], {
        env: { ...process.env, DOCKER_HOST: `unix://${socketPath}`, ...env },
        stdio: ["ignore", "ignore", "inherit"],
      });
      return child;
    },
    async api(method, path, body) {
      const addr = JSON.parse(readFileSync(join(home, "gateway.json"), "utf8")) as { url: string };
      const token = readFileSync(join(home, "token"), "utf8").trim();
      const res = await apiFetch(addr.url, path, {
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

/** A private daemon (live-restore), an Engine client on it, and a gateway process whose home it owns. */
export interface GatewayRig {
  readonly dockerd: PrivateDockerd;
  readonly engine: EngineClient;
  readonly home: string;
  readonly gw: GatewayProcess;
  /** Kill the gateway, destroy the daemon (unmounting what the gateway mounted), remove the home. */
  close(): Promise<void>;
}

export async function startGatewayRig(name: string): Promise<GatewayRig> {
  const dockerd = await PrivateDockerd.start({ liveRestore: true, name });
  const engine = new EngineClient({ socketPath: dockerd.socketPath });
  // Under the daemon's directory: its cleanup unmounts any workspace a failed test leaves.
  const home = mkdtempSync(join(dockerd.dir, "home-"));
  const gw = gatewayProcess(home);
  return {
    dockerd,
    engine,
    home,
    gw,
    async close() {
      await gw.kill9();
      await engine.close();
      await dockerd.destroy();
      rmSync(home, { recursive: true, force: true });
    },
  };
}
