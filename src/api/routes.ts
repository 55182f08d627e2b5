// The API's routes as contracts: one entry per operation, keyed by its operationId. The
// gateway registers its HTTP routes from this table (src/gateway/api/register.ts: the path comes from here,
// so there is no second list of paths), the WebSocket upgrades match paths made from it,
// and the OpenAPI document (openapi.ts) is generated from it. Adding a route is adding one
// entry here and its handler; a route registered any other way fails the OpenAPI test
// (test/unit/openapi.test.ts). Contract only: imports nothing but schemas and vocabulary.

import { z } from "zod";
import { NAME_RULE } from "../lifecycle/spec.js";
import { SECRET_NAME_RULE } from "../policy/index.js";
import { FILE_MEDIA_TYPE, RESULT_TRAILER, TAR_MEDIA_TYPE } from "../files/api.js";
import {
  AuditQuery,
  CheckPolicyBody,
  CreateSandboxBody,
  DeleteQuery,
  DetachedExecBody,
  EventsQuery,
  ExecQueryFull,
  FilesQuery,
  ListQuery,
  LogsQuery,
  ApproveBody,
  ProposalListQuery,
  ProposalShowQuery,
  ProposeBody,
  RejectBody,
  PortForwardQuery,
  ReviewPolicyBody,
  SetPolicyBody,
  SetSecretBody,
  StatsQuery,
  SuggestQuery,
  WatchQuery,
} from "./schemas.js";
import {
  AuditPage,
  ApproveResult,
  ProposalDetail,
  ProposalList,
  ProposalView,
  CheckPolicyResult,
  DeleteSecretResult,
  DetachedExecView,
  EventsPage,
  ExecList,
  FileStatView,
  PolicyDiffResult,
  PolicyReplayResult,
  PolicyRevisionView,
  PolicySuggestResult,
  SandboxDetailView,
  SandboxPage,
  SandboxView,
  SecretList,
  SetPolicyResult,
  SetSecretResult,
  StatsPage,
  StatsView,
  StatusView,
  UploadResult,
} from "./responses.js";

export type HttpMethod = "GET" | "PUT" | "POST" | "DELETE";
export const TAGS = ["gateway", "sandboxes", "policy", "audit", "execs", "files", "logs", "secrets", "stats"] as const;
export type Tag = (typeof TAGS)[number];

/** A JSON answer, validated against `schema` in the API tests. */
export interface JsonResponse {
  description: string;
  schema: z.ZodType;
}
/** A streamed or non-JSON answer: its media type and what it carries. */
export interface StreamResponse {
  description: string;
  content: string;
}
/** 101: the connection becomes a WebSocket. */
export interface UpgradeResponse {
  description: string;
  upgrade: true;
}
export type ResponseContract = JsonResponse | StreamResponse | UpgradeResponse;

/** Error statuses a route may answer besides those every route may (COMMON_ERRORS); the body is an ApiError. */
export type ErrorStatus = 403 | 404 | 409 | 413 | 503;
/**
 * Error statuses every route may answer: a malformed request, a missing or wrong token, a
 * failure of the gateway's own, and a listener that holds as many authenticated connections
 * as it may (`gateway start --max-connections`).
 */
export const COMMON_ERRORS = [400, 401, 500, 503] as const;

export interface RouteContract {
  method: HttpMethod;
  /** OpenAPI form: `/v1/sandboxes/{name}`. */
  path: string;
  summary: string;
  description?: string;
  tag: Tag;
  /** One schema per `{param}` of the path. */
  params: Record<string, z.ZodType>;
  query?: z.ZodType;
  /** A JSON body (`schema`), or raw bodies by media type (`content`: what each carries). */
  body?: { schema: z.ZodType; required?: boolean } | { content: Record<string, string> };
  responses: Partial<Record<100 | 101 | 200 | 201 | 202, ResponseContract>>;
  errors: readonly ErrorStatus[];
  /** A WebSocket upgrade, answered by the server's upgrade handler (src/gateway/api/exec-ws.ts, port-forward-ws.ts), not a fastify route. */
  websocket?: true;
  /** Answered without the token: it says nothing but that the gateway answers. */
  public?: true;
}

// ---- path parameters ----

const sandboxName = { name: z.string().min(1).describe(`The sandbox's name (${NAME_RULE}) or id.`) };
const secretName = { name: z.string().min(1).describe(`The secret's name: ${SECRET_NAME_RULE}.`) };
const proposalId = { ...sandboxName, id: z.string().describe("The proposal's id: `pp_` and 16 hex digits.") };
const execId = { ...sandboxName, id: z.string().describe("The detached exec's id: `ex_` and 16 hex digits, as `exec --detach` printed.") };

const json = <S extends z.ZodType>(description: string, schema: S): { description: string; schema: S } => ({ description, schema });

/** Every operation of the API, by operationId. Key order is the document's order. */
export const ROUTES = {
  getStatus: {
    method: "GET",
    path: "/v1/status",
    summary: "The gateway's version, readiness and counters",
    tag: "gateway",
    params: {},
    responses: { 200: json("The gateway's status.", StatusView) },
    errors: [],
  },
  getOpenApi: {
    method: "GET",
    path: "/v1/openapi.json",
    summary: "This document",
    description: "The OpenAPI 3.1 document of this gateway's API, generated from the schemas it validates requests and answers with.",
    tag: "gateway",
    params: {},
    responses: { 200: json("The OpenAPI document.", z.looseObject({ openapi: z.literal("3.1.0"), info: z.looseObject({ version: z.string() }), paths: z.record(z.string(), z.unknown()) })) },
    errors: [],
  },
  healthz: {
    method: "GET",
    path: "/healthz",
    summary: "Liveness",
    description: "`ok`, and nothing else: the one route answered without the token, for a load balancer's or a supervisor process's liveness check. Anything about the gateway is `GET /v1/status`, with the token.",
    tag: "gateway",
    params: {},
    responses: { 200: { description: "The text `ok`.", content: "text/plain" } },
    errors: [],
    public: true,
  },
  getMetrics: {
    method: "GET",
    path: "/metrics",
    summary: "Prometheus metrics",
    description: "The Prometheus text exposition (docs/architecture.md lists the metrics). Behind the token like every route: scrape with `authorization: { credentials_file: ~/.sandgate/token }`.",
    tag: "gateway",
    params: {},
    responses: { 200: { description: "The metrics, Prometheus text format 0.0.4.", content: "text/plain" } },
    errors: [],
  },
  listSandboxes: {
    method: "GET",
    path: "/v1/sandboxes",
    summary: "A page of sandboxes in name order",
    description: "Without `limit` a page holds up to 1000 sandboxes; without `view` each is the full view. `view=lean` gives list rows (one indexed read per page).",
    tag: "sandboxes",
    params: {},
    query: ListQuery,
    responses: { 200: json("A page: full views, or list rows with `view=lean`.", SandboxPage) },
    errors: [],
  },
  createSandbox: {
    method: "POST",
    path: "/v1/sandboxes",
    summary: "Create a sandbox",
    description: "Accepted at once in phase Provisioning; watch it (or poll GET) for Ready. A policy is at most 1 MiB.",
    tag: "sandboxes",
    params: {},
    body: { schema: CreateSandboxBody },
    responses: { 201: json("The sandbox, Provisioning.", SandboxView) },
    errors: [409, 413, 503],
  },
  getSandbox: {
    method: "GET",
    path: "/v1/sandboxes/{name}",
    summary: "One sandbox",
    tag: "sandboxes",
    params: sandboxName,
    responses: { 200: json("The sandbox, with its workspace usage and expiry.", SandboxDetailView) },
    errors: [404],
  },
  deleteSandbox: {
    method: "DELETE",
    path: "/v1/sandboxes/{name}",
    summary: "Delete a sandbox, workspace included",
    description: "`generation`: only if the sandbox is still at that generation (409 `stale_generation` otherwise; nothing is done).",
    tag: "sandboxes",
    params: sandboxName,
    query: DeleteQuery,
    responses: { 202: json("Accepted: the sandbox, Deleting.", SandboxView) },
    errors: [404, 409, 503],
  },
  startSandbox: {
    method: "POST",
    path: "/v1/sandboxes/{name}/start",
    summary: "Start a Stopped, Completed or Error sandbox as a new generation",
    tag: "sandboxes",
    params: sandboxName,
    responses: { 202: json("Accepted: the sandbox.", SandboxView) },
    errors: [404, 409, 503],
  },
  stopSandbox: {
    method: "POST",
    path: "/v1/sandboxes/{name}/stop",
    summary: "Stop a sandbox (its workspace is kept)",
    tag: "sandboxes",
    params: sandboxName,
    responses: { 202: json("Accepted: the sandbox.", SandboxView) },
    errors: [404, 409, 503],
  },
  listEvents: {
    method: "GET",
    path: "/v1/sandboxes/{name}/events",
    summary: "A window of the sandbox's event log",
    tag: "sandboxes",
    params: sandboxName,
    query: EventsQuery,
    responses: { 200: json("The events, oldest first.", EventsPage) },
    errors: [404],
  },
  watch: {
    method: "GET",
    path: "/v1/watch",
    summary: "Phase changes as they happen (Server-Sent Events)",
    description:
      "One `event: sandbox` per lifecycle event (`id:` its sequence, `data:` `{event, sandbox}`), for every sandbox or the one named; resumable with `after` or `Last-Event-ID`. A client too far behind gets `event: overflow` (or `reload`) with `resumeAfter` and is disconnected.",
    tag: "sandboxes",
    params: {},
    query: WatchQuery,
    responses: { 200: { description: "The event stream.", content: "text/event-stream" } },
    errors: [404, 503],
  },
  getPolicy: {
    method: "GET",
    path: "/v1/sandboxes/{name}/policy",
    summary: "The active policy revision",
    tag: "policy",
    params: sandboxName,
    responses: { 200: json("The revision, its source text and whether the supervisor enforces it.", PolicyRevisionView) },
    errors: [404],
  },
  setPolicy: {
    method: "PUT",
    path: "/v1/sandboxes/{name}/policy",
    summary: "A new policy revision, pushed to the running supervisor",
    description: "With `wait` (seconds): answers once the supervisor enforces it and has closed the open connections it no longer allows, or when the wait ends.",
    tag: "policy",
    params: sandboxName,
    body: { schema: SetPolicyBody },
    responses: { 200: json("The new revision.", SetPolicyResult) },
    errors: [404, 409, 413, 503],
  },
  checkPolicy: {
    method: "POST",
    path: "/v1/sandboxes/{name}/policy/check",
    summary: "What the active policy decides for a URL (dry run)",
    tag: "policy",
    params: sandboxName,
    body: { schema: CheckPolicyBody },
    responses: { 200: json("The decision.", CheckPolicyResult) },
    errors: [404],
  },
  diffPolicy: {
    method: "POST",
    path: "/v1/sandboxes/{name}/policy/diff",
    summary: "What a candidate policy changes, rule by rule",
    tag: "policy",
    params: sandboxName,
    body: { schema: ReviewPolicyBody },
    responses: { 200: json("The changes against the active revision.", PolicyDiffResult) },
    errors: [404, 413],
  },
  replayPolicy: {
    method: "POST",
    path: "/v1/sandboxes/{name}/policy/replay",
    summary: "The recorded egress decided under a candidate policy",
    tag: "policy",
    params: sandboxName,
    body: { schema: ReviewPolicyBody },
    responses: { 200: json("What the candidate would newly deny or allow.", PolicyReplayResult) },
    errors: [404, 413],
  },
  suggestPolicy: {
    method: "GET",
    path: "/v1/sandboxes/{name}/policy/suggest",
    summary: "Rules that would allow what was denied for want of a rule",
    tag: "policy",
    params: sandboxName,
    query: SuggestQuery,
    responses: { 200: json("The suggested rules, for review.", PolicySuggestResult) },
    errors: [404],
  },
  proposePolicy: {
    method: "POST",
    path: "/v1/sandboxes/{name}/policy/proposals",
    summary: "Propose a policy change for a person to approve",
    description: "Checked as PUT policy checks a policy (invalid: 400, nothing stored); stored against the active revision. At most `--proposals-pending` pending per sandbox (409).",
    tag: "policy",
    params: sandboxName,
    body: { schema: ProposeBody },
    responses: { 201: json("The proposal, pending.", ProposalView) },
    errors: [404, 409, 413],
  },
  listProposals: {
    method: "GET",
    path: "/v1/sandboxes/{name}/policy/proposals",
    summary: "The sandbox's policy proposals, oldest first",
    tag: "policy",
    params: sandboxName,
    query: ProposalListQuery,
    responses: { 200: json("The proposals.", ProposalList) },
    errors: [404],
  },
  getProposal: {
    method: "GET",
    path: "/v1/sandboxes/{name}/policy/proposals/{id}",
    summary: "One proposal with its diff against the active policy and a replay of the recorded traffic under it",
    tag: "policy",
    params: proposalId,
    query: ProposalShowQuery,
    responses: { 200: json("The proposal, its text, diff and replay.", ProposalDetail) },
    errors: [404],
  },
  approveProposal: {
    method: "POST",
    path: "/v1/sandboxes/{name}/policy/proposals/{id}/approve",
    summary: "Approve a proposal: applied as PUT policy, only while its base revision is active",
    description: "Needs the approver token in `X-Sandgate-Approver` besides the API token (403 without). A policy changed since: 409 `stale_revision`, and the proposal is superseded.",
    tag: "policy",
    params: proposalId,
    body: { schema: ApproveBody, required: false },
    responses: { 200: json("The proposal, approved, and the revision it made.", ApproveResult) },
    errors: [403, 404, 409, 503],
  },
  rejectProposal: {
    method: "POST",
    path: "/v1/sandboxes/{name}/policy/proposals/{id}/reject",
    summary: "Reject a proposal",
    description: "Needs the approver token in `X-Sandgate-Approver` besides the API token (403 without).",
    tag: "policy",
    params: proposalId,
    body: { schema: RejectBody, required: false },
    responses: { 200: json("The proposal, rejected.", ProposalView) },
    errors: [403, 404, 409],
  },
  listAudit: {
    method: "GET",
    path: "/v1/sandboxes/{name}/audit",
    summary: "A window of the sandbox's egress decisions",
    description: "`format=ocsf`: each record as an OCSF 1.3 event.",
    tag: "audit",
    params: sandboxName,
    query: AuditQuery,
    responses: { 200: json("The records, oldest first.", AuditPage) },
    errors: [404],
  },
  getLogs: {
    method: "GET",
    path: "/v1/sandboxes/{name}/logs",
    summary: "A container's output (NDJSON)",
    description:
      'One record per line: `{"t": TIME, "s": "out"|"err", "l": TEXT}` (`"p": true`: no newline ended it), blank lines as keep-alives, and a last record saying why it ended: `{"end": REASON}` or `{"error": {"code", "message"}}`. A stream that stops without one was cut: ask again with `since` = the last `t` (docs/logs.md). Headers `x-sandgate-generation` and `x-sandgate-stream` name what is read.',
    tag: "logs",
    params: sandboxName,
    query: LogsQuery,
    responses: { 200: { description: "The output, one JSON record per line.", content: "application/x-ndjson" } },
    errors: [404, 409, 503],
  },
  getSandboxStats: {
    method: "GET",
    path: "/v1/sandboxes/{name}/stats",
    summary: "What a Ready sandbox uses now",
    tag: "stats",
    params: sandboxName,
    responses: { 200: json("CPU, memory, pids, workspace and egress.", StatsView) },
    errors: [404, 409, 503],
  },
  listStats: {
    method: "GET",
    path: "/v1/stats",
    summary: "What each Ready sandbox uses now, a page in name order",
    tag: "stats",
    params: {},
    query: StatsQuery,
    responses: { 200: json("One row per Ready sandbox; a row whose sample failed says why in `error`.", StatsPage) },
    errors: [],
  },
  execSession: {
    method: "GET",
    path: "/v1/sandboxes/{name}/exec",
    summary: "Run a command attached (WebSocket)",
    description:
      'Upgraded to a WebSocket once the command started. Server → client: binary `[1, …stdout]` or `[2, …stderr]`; text `{"type":"exit","code":N}` then close, `{"type":"error","message":…}`, `{"type":"signal-failed","signal":S,"message":…}`. Client → server: binary `[0, …stdin]`; text `{"type":"eof"}`, `{"type":"resize","cols":C,"rows":R}`, `{"type":"signal","signal":"INT"|"TERM"|"HUP"|"QUIT"|"KILL"}`. A refusal before the upgrade is an ApiError answer.',
    tag: "execs",
    params: sandboxName,
    query: ExecQueryFull,
    responses: { 101: { description: "Switching to the WebSocket protocol.", upgrade: true } },
    errors: [404, 409, 503],
    websocket: true,
  },
  portForward: {
    method: "GET",
    path: "/v1/sandboxes/{name}/port-forward",
    summary: "One TCP connection to a port inside the workload (WebSocket)",
    description:
      'Upgraded once the relay inside the workload has connected to 127.0.0.1:`port`. Binary frames both ways are the connection\'s bytes; client → server text `{"type":"eof"}` half-closes. The server closes with 1000 when the workload\'s side closed, else sends `{"type":"error","message":…}` and closes with 1011. Past the per-sandbox or total limit of forwarded connections: 503.',
    tag: "execs",
    params: sandboxName,
    query: PortForwardQuery,
    responses: { 101: { description: "Switching to the WebSocket protocol.", upgrade: true } },
    errors: [404, 409, 503],
    websocket: true,
  },
  startDetachedExec: {
    method: "POST",
    path: "/v1/sandboxes/{name}/execs",
    summary: "Start a command detached (no streams)",
    tag: "execs",
    params: sandboxName,
    body: { schema: DetachedExecBody },
    responses: { 201: json("The exec, with the id to ask about it.", DetachedExecView) },
    errors: [404, 409, 413, 503],
  },
  listDetachedExecs: {
    method: "GET",
    path: "/v1/sandboxes/{name}/execs",
    summary: "The sandbox's detached execs",
    tag: "execs",
    params: sandboxName,
    responses: { 200: json("The table, as the gateway holds it in memory.", ExecList) },
    errors: [404],
  },
  getDetachedExec: {
    method: "GET",
    path: "/v1/sandboxes/{name}/execs/{id}",
    summary: "One detached exec: running, or how it ended",
    tag: "execs",
    params: execId,
    responses: { 200: json("The exec.", DetachedExecView) },
    errors: [404],
  },
  statFile: {
    method: "GET",
    path: "/v1/sandboxes/{name}/files/stat",
    summary: "What a path inside /sandbox is",
    tag: "files",
    params: sandboxName,
    query: FilesQuery,
    responses: { 200: json("The path's type, mode and size.", FileStatView) },
    errors: [404, 409, 503],
  },
  downloadFiles: {
    method: "GET",
    path: "/v1/sandboxes/{name}/files",
    summary: "A path inside /sandbox as a tar stream",
    description: `Chunked; the trailer \`${RESULT_TRAILER}\` says how it ended: \`{"ok":true, path, entries, skipped, bytes}\` or \`{"ok":false,"error":{…}}\`. The end-of-archive marker is sent only when the copy succeeded.`,
    tag: "files",
    params: sandboxName,
    query: FilesQuery,
    responses: { 200: { description: "The tar stream.", content: TAR_MEDIA_TYPE } },
    errors: [404, 409, 503],
  },
  uploadFiles: {
    method: "PUT",
    path: "/v1/sandboxes/{name}/files",
    summary: "Files into /sandbox: a tar extracted into a directory, or one file",
    description: "Streamed; bounded by the gateway's SANDGATE_CP_* limits (413 past them).",
    tag: "files",
    params: sandboxName,
    query: FilesQuery,
    body: {
      content: {
        [TAR_MEDIA_TYPE]: "A tar, extracted into the directory `path`; each member keeps its mode (set-uid/set-gid dropped).",
        [FILE_MEDIA_TYPE]: "One file written at `path` (with `mode`, default 644), replaced only once complete; needs a Content-Length.",
      },
    },
    responses: { 200: json("What was written.", UploadResult) },
    errors: [404, 409, 413, 503],
  },
  setSecret: {
    method: "PUT",
    path: "/v1/secrets/{name}",
    summary: "Create or replace a secret",
    description: "Pushed at once to every running sandbox whose policy references it; with `wait` (seconds) answers once each acknowledged it or the wait ended (`pending` names those that did not).",
    tag: "secrets",
    params: secretName,
    body: { schema: SetSecretBody },
    responses: { 200: json("Its version and where it is bound (never the value).", SetSecretResult) },
    errors: [413],
  },
  listSecrets: {
    method: "GET",
    path: "/v1/secrets",
    summary: "Secrets: names, versions, sizes and where each is bound (never values)",
    tag: "secrets",
    params: {},
    responses: { 200: json("The secrets.", SecretList) },
    errors: [],
  },
  deleteSecret: {
    method: "DELETE",
    path: "/v1/secrets/{name}",
    summary: "Delete a secret; running sandboxes drop it",
    tag: "secrets",
    params: secretName,
    responses: { 200: json("Deleted.", DeleteSecretResult) },
    errors: [404],
  },
} as const satisfies Record<string, RouteContract>;

export type OperationId = keyof typeof ROUTES;
/** The operations fastify serves (every one but the WebSocket upgrades). */
export type HttpOperationId = { [K in OperationId]: (typeof ROUTES)[K] extends { websocket: true } ? never : K }[OperationId];

/** Every route, with its operationId. */
export function routeList(): (RouteContract & { operationId: OperationId })[] {
  return (Object.keys(ROUTES) as OperationId[]).map((operationId) => ({ operationId, ...(ROUTES[operationId] as RouteContract) }));
}

/** `/v1/sandboxes/{name}` → `/v1/sandboxes/:name` (fastify's form). */
export const fastifyPath = (path: string): string => path.replace(/\{(\w+)\}/g, ":$1");

/** A request URL (query allowed) matching the path: each `{param}` one segment, captured in order. */
export function pathPattern(path: string): RegExp {
  const parts = path.split(/\{\w+\}/).map((s) => s.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&"));
  return new RegExp(`^${parts.join("([^/?]+)")}(?:\\?|$)`);
}
