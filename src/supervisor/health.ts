// Health endpoint for the companion container: the gateway asks whether this supervisor
// can actually enforce a policy. It is served on a Unix socket, never a network port
// (supervisor.ts): the host's users and the workload cannot reach it.
import http from "node:http";
import type { PolicyHolder } from "./policy-holder.js";
import type { ControlSessionStatus } from "./control-session.js";
import { listenUnix } from "./listen.js";

export interface HealthIdentity {
  sandboxId: string | null;
  generation: number | null;
}

export interface HealthServerOptions {
  identity: HealthIdentity;
  policy: PolicyHolder;
  proxyListening: () => boolean;
  /** The control session, when one is configured. */
  session?: () => ControlSessionStatus;
  /** The transparent path's listeners, when the launch config turns it on (then part of being healthy). */
  transparentListening?: () => boolean;
}

export interface HealthReport {
  ok: boolean;
  sandboxId: string | null;
  generation: number | null;
  policyRevision: number | null;
  policy: "loaded" | "missing";
  proxy: "listening" | "not_listening";
  /** "disabled" when the launch config does not turn the transparent path on. */
  transparent: "listening" | "not_listening" | "disabled";
  /** "disabled" when the launch config has no control section. */
  session: "connecting" | "up" | "down" | "stopped" | "disabled";
  /** Why all egress is denied regardless of policy (e.g. control_session_lost); null otherwise. */
  lockdown: string | null;
}

export function healthReport(opts: HealthServerOptions): HealthReport {
  const loaded = opts.policy.current();
  const listening = opts.proxyListening();
  const transparent = opts.transparentListening?.();
  const session = opts.session?.();
  return {
    // Healthy only when it can enforce: a proxy without a policy (or locked down, which
    // hides the policy) denies everything. A session that is down within its grace
    // period still enforces the last confirmed policy, so it does not make this false.
    ok: listening && transparent !== false && loaded !== undefined,
    sandboxId: opts.identity.sandboxId,
    generation: opts.identity.generation,
    policyRevision: loaded?.revision ?? null,
    policy: loaded === undefined ? "missing" : "loaded",
    proxy: listening ? "listening" : "not_listening",
    transparent: transparent === undefined ? "disabled" : transparent ? "listening" : "not_listening",
    session: session?.state ?? "disabled",
    lockdown: session?.lockdown ?? null,
  };
}

export interface HealthServer {
  readonly server: http.Server;
  /** Listen on a Unix socket at `path` (each launch has a fresh run directory: nothing is there before). */
  listenUnix(path: string): Promise<void>;
  close(): Promise<void>;
}

export function createHealthServer(opts: HealthServerOptions): HealthServer {
  const server = http.createServer((req, res) => {
    const path = (req.url ?? "").split("?")[0];
    let status: number;
    let body: object;
    if (path !== "/healthz") {
      status = 404;
      body = { error: "not_found" };
    } else if (req.method !== "GET" && req.method !== "HEAD") {
      status = 405;
      body = { error: "method_not_allowed" };
    } else {
      const report = healthReport(opts);
      status = report.ok ? 200 : 503;
      body = report;
    }
    const json = JSON.stringify(body);
    res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(json), "cache-control": "no-store" });
    res.end(req.method === "HEAD" ? undefined : json);
  });
  return {
    server,
    listenUnix(path) {
      return listenUnix(server, path);
    },
    close() {
      return new Promise((resolve) => {
        if (!server.listening) {
          resolve();
          return;
        }
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}
