// The gateway's REST/JSON API under /v1, on loopback, behind a bearer token.

import http, { type RequestListener } from "node:http";
import Fastify, { type FastifyReply, type FastifyRequest } from "fastify";
import type { Logger } from "pino";
import { EXEC_ARGV_MAX_BYTES, LIST_PAGE_MAX } from "./schemas.js";
import { isPublicRoute, route } from "./register.js";
import { buildOpenApi } from "./openapi.js";
import type { StatusView } from "./responses.js";
import { PolicyTools, sinceTime } from "../sandboxes/policy-tools.js";
import { toOcsf } from "../audit/ocsf.js";
import { WatchHub, type WatchLimits } from "./watch.js";
import { LogStreams, type LogLimits } from "./logs-routes.js";
import type { ComputeDriver } from "../../driver/contract.js";
import { registerSecretRoutes, type SecretPlaces } from "./secrets-routes.js";
import { registerStatsRoutes } from "./stats-routes.js";
import { registerMetricsRoute } from "./metrics-route.js";
import type { ApiRequest, MetricsExposition } from "../metrics/contract.js";
import type { SandboxStats } from "../stats/sandbox-stats.js";
import { registerFileRoutes } from "./files-routes.js";
import type { FileTransfers } from "../files/transfers.js";
import type { SecretStore } from "../secrets/secret-store.js";
import { authorize, type Authenticated } from "./auth.js";
import { boundedServerOptions, type ConnectionBoundsSettings } from "../../util/connection-bounds.js";
import { ApiError, BODY_MAX_BYTES, POLICY_MAX_BYTES, tooLarge } from "../errors.js";
import type { SandboxReadModel } from "../sandboxes/read-model.js";
import type { SandboxService } from "../sandboxes/service.js";
import { eventView, sandboxSummaryView, sandboxView } from "./views.js";
import { registerExecRoutes } from "./exec-routes.js";
import type { ExecService } from "../sandboxes/exec-service.js";
import { registerProposalRoutes } from "./proposals-routes.js";
import type { PolicyProposals } from "../sandboxes/policy-proposals.js";

export interface ApiContext {
  /** Writes: intents and policy changes. */
  service: SandboxService;
  /** Reads. */
  read: SandboxReadModel;
  token: string;
  log: Logger;
  status: () => StatusView;
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

const nameParam = (req: FastifyRequest): string => (req.params as { name: string }).name;

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
      void (reply as unknown as FastifyReply).code(400).send({ error: { code: "invalid_request", message: err.message } });
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
  // What fastify actually serves, for the check that every route is documented (test/unit/openapi.test.ts).
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
      return reply.code(err.status).send({ error: { code: err.code, message: err.message } });
    }
    if (err.code === "FST_ERR_CTP_BODY_TOO_LARGE") {
      const bytes = Number(req.headers["content-length"]);
      const policy = req.method === "PUT" && /\/policy(?:\?|$)/.test(req.url);
      const e = Number.isSafeInteger(bytes) && bytes > 0
        ? tooLarge(policy ? "policy" : "the request body", bytes, policy ? "1 MiB" : "2 MiB")
        : new ApiError("too_large", `the request body is over the limit of ${policy ? "1 MiB (the policy)" : "2 MiB"}`);
      return reply.code(e.status).header("connection", "close").send({ error: { code: e.code, message: e.message } });
    }
    // Fastify's own 4xx (malformed JSON, wrong content type).
    if (err.statusCode && err.statusCode >= 400 && err.statusCode < 500) {
      return reply.code(err.statusCode).send({ error: { code: "invalid_request", message: err.message } });
    }
    req.log.error({ err }, "request failed");
    return reply.code(500).send({ error: { code: "internal", message: "internal error; see the gateway log" } });
  });

  app.setNotFoundHandler((req, reply) =>
    reply.code(404).send({ error: { code: "not_found", message: `no route ${req.method} ${req.url}` } }),
  );

  // Every route comes from the table (routes.ts) through route(): none is registered undocumented.
  route(app, "healthz", async (_req, reply) => reply.type("text/plain; charset=utf-8").send("ok\n"));
  route(app, "getStatus", async () => ctx.status());
  let openapi: ReturnType<typeof buildOpenApi> | undefined;
  route(app, "getOpenApi", async () => (openapi ??= buildOpenApi()));

  // Paged by name; without `limit` a page is LIST_PAGE_MAX (every sandbox up to that many,
  // as before paging), without `view` the full view (as before). `sandbox list` asks for
  // lean pages: one indexed read per page, nothing per row.
  route(app, "listSandboxes", async (_req, _reply, input) => {
    const q = input.query();
    const page = { after: q.after, limit: q.limit ?? LIST_PAGE_MAX, phase: q.phase, labels: q.label };
    if (q.view === "lean") {
      const p = read.listSummaries(page);
      return { sandboxes: p.sandboxes.map(sandboxSummaryView), next: p.next };
    }
    const p = read.listPage(page);
    return { sandboxes: p.sandboxes.map((s) => sandboxView(s, read.boundaryOf(s.id))), next: p.next };
  });

  route(app, "createSandbox", async (_req, reply, input) => {
    const body = input.body();
    checkPolicySize(body.policy);
    const s = await service.create(body);
    return reply.code(201).send(sandboxView(s));
  });

  route(app, "getSandbox", async (req) => {
    const s = read.get(nameParam(req));
    return { ...sandboxView(s, read.boundaryOf(s.id), read.diskOf(s)), expiry: read.expiryOf(s) };
  });

  route(app, "getPolicy", async (req) => {
    const p = read.policyOf(nameParam(req));
    return { sandbox: p.sandbox.name, revision: p.revision, hash: p.hash, createdAt: p.createdAt, policy: p.policy, source: p.source, boundary: p.boundary };
  });

  route(app, "setPolicy", async (req, _reply, input) => {
    const body = input.body();
    checkPolicySize(body.policy);
    const { revision, pushed, phase } = service.setPolicy(nameParam(req), body.policy);
    const s = read.get(nameParam(req));
    if (!body.wait) return { revision, pushed, phase, enforced: null, connectionsClosed: null, boundary: read.boundaryOf(s.id) };
    const w = await service.waitForPolicy(s.id, revision, body.wait * 1000);
    return { revision, pushed, phase, enforced: w.enforced, connectionsClosed: w.connectionsClosed, boundary: w.boundary };
  });

  route(app, "checkPolicy", async (req, _reply, input) => {
    const body = input.body();
    return service.checkPolicy(nameParam(req), body.url, body.method);
  });

  // Reviewing a change before making it; nothing here writes.
  const tools = new PolicyTools(read);
  route(app, "diffPolicy", async (req, _reply, input) => tools.diff(nameParam(req), input.body().policy));
  route(app, "replayPolicy", async (req, _reply, input) => {
    const body = input.body();
    return tools.replay(nameParam(req), body.policy, body.since);
  });
  route(app, "suggestPolicy", async (req, _reply, input) => tools.suggest(nameParam(req), input.query().since));

  for (const [op, intent] of [["startSandbox", "start"], ["stopSandbox", "stop"]] as const) {
    route(app, op, async (req, reply) => reply.code(202).send(sandboxView(service.request(nameParam(req), intent))));
  }

  route(app, "deleteSandbox", async (req, reply, input) => reply.code(202).send(sandboxView(service.request(nameParam(req), "delete", input.query()))));

  // Logs are read in pages by cursor: `next` is the cursor of the following page
  // (pass it as `after`), null when this page reached the end.
  route(app, "listEvents", async (req, _reply, input) => {
    const q = input.query();
    const s = read.get(nameParam(req));
    const events = read.events(s.id, { afterSeq: q.after, beforeSeq: q.before, limit: q.limit, tail: q.tail });
    return { events: events.map(eventView), next: pageCursor(events, q) };
  });

  route(app, "listAudit", async (req, _reply, input) => {
    const q = input.query();
    const s = read.get(nameParam(req));
    const records = read.audit(s.id, { afterSeq: q.after, beforeSeq: q.before, limit: q.limit, tail: q.tail, decision: q.decision, since: sinceTime(q.since) });
    const next = pageCursor(records, q);
    if (q.format === "ocsf") return { audit: records.map((r) => toOcsf(r, { sandboxName: s.name })), next };
    return { audit: records, next };
  });

  if (ctx.secrets) registerSecretRoutes(app, ctx.secrets.store, ctx.secrets.delivery);
  if (ctx.stats) registerStatsRoutes(app, ctx.stats);
  if (ctx.metrics) registerMetricsRoute(app, ctx.metrics);
  if (ctx.execs) registerExecRoutes(app, ctx.execs);
  if (ctx.files) registerFileRoutes(app, ctx.files);
  if (ctx.proposals) registerProposalRoutes(app, { ...ctx.proposals, service, read });

  // Watch streams are hijacked from fastify: the hub ends them on close.
  const hub = new WatchHub(read, ctx.watch);
  app.addHook("preClose", async () => hub.close());
  route(app, "watch", (req, reply, input) => {
    const q = input.query();
    // By id, a deleted sandbox whose events are still in the log can be resumed to its end.
    const only = q.sandbox === undefined ? undefined : read.watchable(q.sandbox);
    const lastId = Number(req.headers["last-event-id"]);
    const after = q.after ?? (Number.isSafeInteger(lastId) && lastId >= 0 ? lastId : undefined);
    if (!hub.canAccept()) throw new ApiError("unavailable", `too many watch streams open (${hub.size}); close one or raise the limit`);
    reply.hijack();
    hub.attach(req.raw, reply.raw, { only, after });
    return undefined;
  });

  const logs = ctx.logs ? new LogStreams(read, ctx.logs.driver, ctx.log, ctx.logs.limits) : null;
  logs?.register(app);

  return Object.assign(app, { handler: handler!, watchStats: () => hub.stats(), logStats: () => logs?.stats() ?? null, registeredRoutes: (): readonly { method: string; url: string }[] => registered });
}

/** A policy (YAML text, or an object as JSON) is at most POLICY_MAX_BYTES: 413 naming its size. */
function checkPolicySize(policy: string | Record<string, unknown> | undefined): void {
  if (policy === undefined) return;
  const bytes = Buffer.byteLength(typeof policy === "string" ? policy : JSON.stringify(policy));
  if (bytes > POLICY_MAX_BYTES) throw tooLarge("policy", bytes, "1 MiB");
}

/** The cursor after a page: its last sequence number when the page is full, else null. */
function pageCursor(rows: { seq: number }[], q: { limit?: number; tail?: number }): number | null {
  if (q.tail !== undefined) return null;
  return rows.length === (q.limit ?? 1000) ? rows.at(-1)!.seq : null;
}
