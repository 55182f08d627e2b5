// Starts a real gateway (store, service, HTTP API on a random loopback port) in a
// temp home for tests, on whatever driver the test gives it.

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import type { ComputeDriver } from "../../src/driver/contract.js";
import { startGateway, type RunningGateway } from "../../src/gateway/gateway.js";
import { ensureApproverToken, ensureToken, resolveHome, type HomePaths } from "../../src/home.js";
import type { PortForwardLimits } from "../../src/gateway/api/port-forward-ws.js";
import type { WatchLimits } from "../../src/gateway/api/watch.js";
import type { LogLimits } from "../../src/gateway/api/logs-routes.js";
import type { AuditLimits } from "../../src/gateway/audit/audit-sink.js";
import type { ServiceOptions } from "../../src/gateway/sandboxes/service.js";
import type { FilesLimits } from "../../src/gateway/files/limits.js";
import type { ProposalLimits } from "../../src/gateway/sandboxes/policy-proposals.js";
import { checkAnswer } from "./openapi-check.js";
import type { ListenAddress } from "../../src/gateway/api/listen-address.js";
import { apiFetch, wsUrl } from "./api-client.js";
import type { ConnectionBoundsSettings } from "../../src/util/connection-bounds.js";
import type { StoreLocation } from "../../src/util/store-url.js";

export interface TestGateway {
  home: HomePaths;
  /** unix:///…/api.sock: give it to the SDK or the CLI (SANDGATE_URL), or use `fetch` and `wsUrl`. */
  url: string;
  token: string;
  /** The approver token (deciding policy proposals): <home>/approver-token. */
  approverToken: string;
  gw: RunningGateway;
  /**
   * fetch against the API with the right token; JSON in, { status, body } out. Every answer
   * is checked against the OpenAPI contract (openapi-check.ts): an undocumented status or a
   * body its schema refuses throws, so the test fails naming the route and the field.
   */
  api(method: string, path: string, body?: unknown, token?: string, headers?: Record<string, string>): Promise<{ status: number; body: any }>;
  /** A raw request to the API's socket (no token added, no contract check). */
  fetch(path: string, init?: Parameters<typeof apiFetch>[2]): ReturnType<typeof apiFetch>;
  /** The ws URL of an upgrade route (exec, port-forward) on the API's socket. */
  wsUrl(path: string): string;
  close(opts?: { keepHome?: boolean }): Promise<void>;
}

export async function startTestGateway(
  driver: ComputeDriver,
  opts: {
    homeDir?: string;
    service?: ServiceOptions;
    supervisorGraceMs?: number;
    supervisorPort?: number;
    watch?: Partial<WatchLimits>;
    logs?: Partial<LogLimits>;
    audit?: Partial<AuditLimits>;
    /** The gateway's --resolver list (canonical addr:port); absent: the containers' own resolver. */
    resolvers?: string[];
    hostAddressIntervalMs?: number;
    portForward?: Partial<PortForwardLimits>;
    /** Every log line of the gateway, from debug up (tests that check what it logs). */
    logSink?: (line: string) => void;
    /** Bounds of file transfers (`sandbox cp`). */
    files?: Partial<FilesLimits>;
    /** Bounds of policy proposals. */
    proposals?: Partial<ProposalLimits>;
    /** Listeners besides the home's socket (`gateway start --listen`). */
    listen?: ListenAddress[];
    /** Bounds of the listeners' connections (--header-timeout, --max-unauthenticated, …). */
    connections?: Partial<ConnectionBoundsSettings>;
    /** Connections each workload may hold to its proxy (--proxy-connections). */
    proxyConnections?: number;
    /** The origin CAs, as `gateway status` shows them (--origin-ca). */
    originCa?: { path: string; subjects: string[] };
    /** Where the state is kept (--store); default the home's SQLite file. */
    store?: StoreLocation;
    /** This gateway's host (--host-name); default the machine's hostname. */
    hostName?: string;
  } = {},
): Promise<TestGateway> {
  const home = resolveHome(opts.homeDir ?? mkdtempSync(join(tmpdir(), "sg-home-")));
  const log = opts.logSink === undefined ? pino({ level: process.env.SANDGATE_TEST_LOG ?? "silent" }) : pino({ level: "debug" }, { write: opts.logSink });
  const gw = await startGateway({ home, driver, log, service: opts.service, supervisorGraceMs: opts.supervisorGraceMs, supervisorPort: opts.supervisorPort, watch: opts.watch, audit: opts.audit, logs: opts.logs,
    ...(opts.resolvers === undefined ? {} : { resolvers: opts.resolvers }),
    ...(opts.hostAddressIntervalMs === undefined ? {} : { hostAddressIntervalMs: opts.hostAddressIntervalMs }),
    ...(opts.portForward === undefined ? {} : { portForward: opts.portForward }),
    ...(opts.files === undefined ? {} : { files: opts.files }),
    ...(opts.proposals === undefined ? {} : { proposals: opts.proposals }),
    ...(opts.listen === undefined ? {} : { listen: opts.listen }),
    ...(opts.connections === undefined ? {} : { connections: opts.connections }),
    ...(opts.proxyConnections === undefined ? {} : { proxyConnections: opts.proxyConnections }),
    ...(opts.originCa === undefined ? {} : { originCa: opts.originCa }),
    ...(opts.store === undefined ? {} : { store: opts.store }),
    ...(opts.hostName === undefined ? {} : { hostName: opts.hostName }),
  });
  const token = ensureToken(home);
  const approverToken = ensureApproverToken(home);
  return {
    home,
    url: gw.url,
    token,
    approverToken,
    gw,
    fetch: (path, init) => apiFetch(gw.url, path, init),
    wsUrl: (path) => wsUrl(gw.url, path),
    async api(method, path, body, tok = token, headers = {}) {
      const res = await apiFetch(gw.url, path, {
        method,
        headers: { ...headers, authorization: `Bearer ${tok}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      const answer = text ? JSON.parse(text) : undefined;
      const problem = checkAnswer(method, path, res.status, res.headers.get("content-type"), answer);
      if (problem !== null) throw new Error(`the answer to ${method} ${path} is not as the OpenAPI document says: ${problem}`);
      return { status: res.status, body: answer };
    },
    async close(o = {}) {
      await gw.close();
      if (!o.keepHome) rmSync(home.dir, { recursive: true, force: true });
    },
  };
}

/** Poll until `check` returns a value other than undefined, or fail after `ms`. */
export async function eventually<T>(check: () => T | undefined | Promise<T | undefined>, ms = 10_000, what = "condition"): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
