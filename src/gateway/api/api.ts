// The gateway's REST/JSON API under /v1, on loopback, behind a bearer token.

import http, { type RequestListener } from "node:http";
import Fastify, { type FastifyReply } from "fastify";
import type { Logger } from "pino";
import { EXEC_ARGV_MAX_BYTES } from "../../api/schemas.js";
import { isPublicRoute } from "./register.js";
import type { FleetView, StatusView } from "../../api/responses.js";
import { WatchHub, type WatchLimits } from "./watch.js";
import { LogStreams, logRoutes, type LogLimits } from "./logs-routes.js";
import type { ComputeDriver } from "../../driver/contract.js";
import { secretRoutes, type SecretPlaces } from "./secrets-routes.js";
import { statsRoutes } from "./stats-routes.js";
import { metricsRoute } from "./metrics-route.js";
import type { ApiRequest, MetricsExposition } from "../metrics/contract.js";
import type { SandboxStats } from "../stats/sandbox-stats.js";
import { fileRoutes } from "./files-routes.js";
import type { FileTransfers } from "../files/transfers.js";
import type { SecretStore } from "../secrets/secret-store.js";
import { authorize, type Authenticated } from "./auth.js";
import { boundedServerOptions, type ConnectionBoundsSettings } from "../../util/connection-bounds.js";
import { ApiError, BODY_MAX_BYTES, errorBody, tooLarge } from "../errors.js";
import { SandgateError } from "../../util/errors.js";
import type { SandboxReadModel } from "../sandboxes/read-model.js";
import type { SandboxService } from "../sandboxes/service.js";
import { execRoutes } from "./exec-routes.js";
import type { ExecService } from "../sandboxes/exec-service.js";
import { proposalRoutes } from "./proposals-routes.js";
import type { PolicyProposals } from "../sandboxes/policy-proposals.js";
import { gatewayRoutes } from "./gateway-routes.js";
import { sandboxRoutes } from "./sandbox-routes.js";
import { policyRoutes } from "./policy-routes.js";
import { watchRoute } from "./watch-route.js";

export interface ApiContext {
  /** Writes: intents and policy changes. */
  service: SandboxService;
  /** Reads. */
  read: SandboxReadModel;
  token: string;
  log: Logger;
  status: () => Promise<StatusView>;
  /** The fleet's hosts (GET /v1/fleet). */
  fleet: () => Promise<FleetView>;
  watch?: Partial<WatchLimits>;
  /** Secrets for the supervisors to inject; `usedBy` names the sandboxes whose policy binds one. */
  secrets?: { store: SecretStore; delivery: SecretPlaces };
  /** GET /metrics (Prometheus text), behind the token like the rest. */
  metrics?: MetricsExposition;
  /** Each API request answered (the metrics' request counters and durations). */
  observeRequest?: (r: ApiRequest) => void;
  /** GET /v1/sandboxes/:name/stats and GET /v1/stats. */
  stats?: SandboxStats;
  /** Container logs through the driver (GET /v1/sandboxes/:name/logs), with their bounds. */
  logs?: { driver: ComputeDriver; limits?: Partial<LogLimits> };
  /** Detached execs and their status. */
  execs?: ExecService;
  /** `sandbox cp`: files in and out of Ready sandboxes. */
  files?: FileTransfers;
  /** The bounds of the listeners' connections (the main server is made with node's matching options). */
  connections?: Partial<ConnectionBoundsSettings>;
  /** A request passed the token check on this socket (the listeners' connection bounds). */
  authenticated?: Authenticated;
  /** Policy proposals; deciding one needs `approverToken` too (null: none can be decided). */
  proposals?: { proposals: PolicyProposals; approverToken: string | null };
}

export function buildApi(ctx: ApiContext) {
  const { service, read } = ctx;
  // The request handler, kept for the API's other listeners (listeners.ts): one handler behind them all.
  let handler: RequestListener | undefined;
  const app = Fastify({
    serverFactory: (h) => {
      handler = h;
      return http.createServer(boundedServerOptions(ctx.connections), h);
    },
    loggerInstance: ctx.log,
    // Our own one-line request log (below) replaces fastify's two lines per request.
    logController: new Fastify.LogController({ disableRequestLogging: true }),
    bodyLimit: BODY_MAX_BYTES,
    // Long path segments reach our own checks (a clear 400 naming the rule), not find-my-way's 414.
    routerOptions: { maxParamLength: 4096 },
    // Errors of fastify's own router and parsers (a malformed URL) get our shape too.
    frameworkErrors: (err, _req, reply) => {
      const e = new ApiError("invalid_request", err.message);
      void (reply as unknown as FastifyReply).code(e.status).send(errorBody(e));
    },
    // Bytes that are not HTTP get our error shape too, and the socket is closed.
    clientErrorHandler: (err, socket) => {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === "ECONNRESET" || !socket.writable) {
        socket.destroy();
        return;
      }
      if (code === "HPE_HEADER_OVERFLOW") {
        const big = JSON.stringify({ error: { code: "too_large", message: `the request's URL and headers are over 16 KiB; an exec command line is at most ${EXEC_ARGV_MAX_BYTES} bytes` } });
        socket.end(`HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(big)}\r\nConnection: close\r\n\r\n${big}`);
        return;
      }
      const body = JSON.stringify({ error: { code: "invalid_request", message: `malformed HTTP request (${code ?? err.message})` } });
      socket.end(`HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
    },
  });
  // What fastify actually serves, for the check that every route is documented (test/unit/api/openapi.test.ts).
  const registered: { method: string; url: string }[] = [];
  app.addHook("onRoute", (r) => {
    for (const method of [r.method].flat()) registered.push({ method, url: r.url });
  });
  app.addHook("onResponse", async (req, reply) => {
    req.log.debug({ method: req.method, url: req.url.replace(/\?.*/, ""), status: reply.statusCode, ms: Math.round(reply.elapsedTime) }, "request");
    // By route template, never the path (a sandbox's name stays out of the metrics).
    ctx.observeRequest?.({ route: req.routeOptions.url ?? "unmatched", method: req.method, status: reply.statusCode, seconds: reply.elapsedTime / 1000 });
  });

  app.addHook("onRequest", async (req, reply) => {
    // GET /healthz says "ok" and nothing else: the one route without the token.
    if (isPublicRoute(req)) return;
    // The same check as every WebSocket upgrade's (upgrades.ts).
    const refused = authorize(req.headers.authorization, req.raw.socket, ctx.token, ctx.authenticated);
    if (refused === null) return;
    // Refused for a full pool: the connection is not kept.
    if (refused.code === "unavailable") void reply.header("connection", "close");
    throw refused;
  });

  app.setErrorHandler((err: Error & { statusCode?: number; code?: string }, req, reply) => {
    if (err instanceof ApiError) {
      return reply.code(err.status).send(errorBody(err));
    }
    if (err.code === "FST_ERR_CTP_BODY_TOO_LARGE") {
      const bytes = Number(req.headers["content-length"]);
      const policy = req.method === "PUT" && /\/policy(?:\?|$)/.test(req.url);
      const e = Number.isSafeInteger(bytes) && bytes > 0
        ? tooLarge(policy ? "policy" : "the request body", bytes, policy ? "1 MiB" : "2 MiB")
        : new ApiError("too_large", `the request body is over the limit of ${policy ? "1 MiB (the policy)" : "2 MiB"}`);
      return reply.code(e.status).header("connection", "close").send(errorBody(e));
    }
    // Fastify's own 4xx (malformed JSON, wrong content type).
    if (err.statusCode && err.statusCode >= 400 && err.statusCode < 500) {
      return reply.code(err.statusCode).send(errorBody(new ApiError("invalid_request", err.message)));
    }
    // The state store out of reach (PostgreSQL down or cut off): the caller may try again; its message names no URL or password.
    if (err instanceof SandgateError && err.code === "unavailable") {
      req.log.warn({ err: err.message }, "request failed: the state store is unavailable");
      return reply.code(503).send(errorBody(new ApiError("unavailable", err.message)));
    }
    req.log.error({ err }, "request failed");
    const internal = new ApiError("internal", "internal error; see the gateway log");
    return reply.code(internal.status).send(errorBody(internal));
  });

  app.setNotFoundHandler((req, reply) => {
    const e = new ApiError("not_found", `no route ${req.method} ${req.url}`);
    return reply.code(e.status).send(errorBody(e));
  });

  // Every route group is a fastify plugin (register.ts's RouteGroup), registered here and
  // nowhere else, after the hooks and handlers above so that every group gets them. Within
  // a group every route comes from the table (routes.ts) through route(): none is
  // registered undocumented.
  const hub = new WatchHub(read, ctx.watch);
  const logs = ctx.logs ? new LogStreams(read, ctx.logs.driver, ctx.log, ctx.logs.limits) : null;
  // On the root, not in their groups: they end the streams their routes hijacked.
  app.addHook("preClose", async () => {
    hub.close();
    logs?.close();
  });
  void app.register(gatewayRoutes, { status: ctx.status, fleet: ctx.fleet });
  void app.register(sandboxRoutes, { service, read });
  void app.register(policyRoutes, { service, read });
  void app.register(watchRoute, { read, hub });
  if (ctx.secrets) void app.register(secretRoutes, ctx.secrets);
  if (ctx.stats) void app.register(statsRoutes, { stats: ctx.stats });
  if (ctx.metrics) void app.register(metricsRoute, { metrics: ctx.metrics });
  if (ctx.execs) void app.register(execRoutes, { execs: ctx.execs });
  if (ctx.files) void app.register(fileRoutes, { files: ctx.files });
  if (ctx.proposals) void app.register(proposalRoutes, { ...ctx.proposals, service, read });
  if (logs) void app.register(logRoutes, { logs });

  return Object.assign(app, { handler: handler!, watchStats: () => hub.stats(), logStats: () => logs?.stats() ?? null, registeredRoutes: (): readonly { method: string; url: string }[] => registered });
}
