// Plain HTTP from the workload: each request, and each ws:// Upgrade, is decided as the
// request it is (method, path, method overrides), refused if it carries a credential
// placeholder (credentials bind to terminated https only), then forwarded (forward.ts) or
// relayed (upgrade.ts). How a request names its target is the listener's: the forward
// proxy reads the absolute form (ABSOLUTE_FORM); another listener passes its own reader.
import http from "node:http";
import type net from "node:net";
import type { Duplex } from "node:stream";
import { overrideMethods } from "../../policy/core.js";
import { errorFields } from "../logger.js";
import { TimeoutError } from "../../util/timeout.js";
import type { ProxyContext } from "./context.js";
import { CREDENTIAL_ERROR, refusalBody, refusePlain } from "./credential-injector.js";
import { forward } from "./forward.js";
import { endToEndHeaders, hasBody, requestHeaders } from "./headers.js";
import { POLICY_ERROR, PROXY_ERROR, PROXY_FAILED, UPGRADE_NOT_ABSOLUTE, UPSTREAM_ERROR, denialBody, notAbsoluteForm, unreachable, unreachableBody } from "./refusals.js";
import { grantOf } from "./registry.js";
import { endRawJson, sendJson } from "./respond.js";
import { parseAbsoluteHttp, type HttpTarget } from "./target.js";
import { refuseOtherUpgrade, relayUpgrade, upgradeHeaders } from "./upgrade.js";

/** How a listener's plain-HTTP requests name what they want to reach. */
export interface TargetReader {
  /** The request's target; undefined when it names none this listener accepts. */
  read(req: http.IncomingMessage): HttpTarget | undefined;
  /** The 400 body of a request that names none (`upgrade`: it asked to upgrade). */
  refusal(req: http.IncomingMessage, upgrade: boolean): object;
}

/** The forward proxy's requests: absolute form (GET http://host/path). */
export const ABSOLUTE_FORM: TargetReader = {
  read: (req) => parseAbsoluteHttp(req.url, req.method ?? "GET"),
  refusal: (req, upgrade) => (upgrade ? UPGRADE_NOT_ABSOLUTE : notAbsoluteForm(req.url)),
};

export interface PlainHttp {
  /** An http.Server's "request" (expectContinue false) and "checkContinue" (true). */
  request: (req: http.IncomingMessage, res: http.ServerResponse, expectContinue: boolean) => void;
  /** An http.Server's "upgrade": from the request on, the socket is a tunnel in the registry. */
  upgrade: (req: http.IncomingMessage, socket: Duplex, head: Buffer) => void;
}

/** The plain-HTTP handlers of a listener whose sockets are in ctx.registry (addClient). */
export function createPlainHttp(ctx: ProxyContext, reader: TargetReader): PlainHttp {
  const { registry, audit, authorizer, logger, policy } = ctx;

  /** A placeholder in a plain request is refused (403): the record and the answer are the caller's. */
  const placeholderRefusal = (target: HttpTarget, headers: readonly string[]): ReturnType<typeof refusePlain> => {
    const loaded = policy.current();
    return loaded === undefined ? null : refusePlain(loaded.policy, target.requestPath, headers);
  };

  function request(req: http.IncomingMessage, res: http.ServerResponse, expectContinue: boolean): void {
    registry.track(req, res);
    const target = reader.read(req);
    if (target === undefined) {
      sendJson(res, 400, PROXY_ERROR, reader.refusal(req, false), true);
      return;
    }
    target.overrides = overrideMethods(req.rawHeaders, target.requestPath);
    authorizer.authorize(target, true).then(
      (outcome) => {
        if (outcome.kind === "deny") {
          sendJson(res, 403, POLICY_ERROR, denialBody(target, outcome), ctx.closing() || expectContinue || hasBody(req));
        } else if (outcome.kind === "unreachable") {
          logger.warn("upstream unreachable", { host: target.host, port: target.port, code: outcome.code });
          sendJson(res, outcome.status, UPSTREAM_ERROR, unreachableBody(target, outcome), ctx.closing() || expectContinue || hasBody(req));
        } else if (!res.destroyed) {
          const headers = requestHeaders(req);
          const refusal = placeholderRefusal(target, headers);
          if (refusal !== null) {
            audit.audit(target, { kind: "deny", reason: refusal.reason, rule: outcome.rule, address: outcome.address });
            sendJson(res, 403, CREDENTIAL_ERROR, refusalBody(target, refusal), ctx.closing() || expectContinue || hasBody(req));
            return;
          }
          registry.granted(req, res, grantOf(target, outcome.address));
          const watch = outcome.record === undefined ? undefined : audit.atEnd(outcome.record, res);
          if (expectContinue) res.writeContinue();
          forward(ctx, req, res, target, outcome.address, headers, true, watch);
        }
      },
      (err: unknown) => {
        logger.error("proxy request failed", { host: target.host, ...errorFields(err) });
        sendJson(res, 502, PROXY_ERROR, PROXY_FAILED, true);
      },
    );
  }

  /**
   * A plain ws:// upgrade: decided as the GET it is, then relayed. From the request on, its
   * connection is registered as a tunnel, so revocation and lockdown reach it.
   */
  function upgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer): void {
    const entry = registry.asTunnel(socket);
    if (!refuseOtherUpgrade(req, socket)) return;
    const target = reader.read(req);
    if (target === undefined) {
      endRawJson(socket, 400, PROXY_ERROR, reader.refusal(req, true));
      return;
    }
    target.overrides = overrideMethods(req.rawHeaders, target.requestPath);
    authorizer.authorize(target, true).then(
      (outcome) => {
        if (outcome.kind === "deny") endRawJson(socket, 403, POLICY_ERROR, denialBody(target, outcome));
        else if (outcome.kind === "unreachable") endRawJson(socket, outcome.status, UPSTREAM_ERROR, unreachableBody(target, outcome));
        else if (!socket.destroyed) {
          const { address } = outcome;
          const headers = requestHeaders(req);
          // Plain http carries no credential: a placeholder here is refused as on any plain request.
          const refusal = placeholderRefusal(target, headers);
          if (refusal !== null) {
            audit.audit(target, { kind: "deny", reason: refusal.reason, rule: outcome.rule, address });
            endRawJson(socket, 403, CREDENTIAL_ERROR, refusalBody(target, refusal));
            return;
          }
          entry.grant = grantOf(target, address);
          const record = outcome.record ?? audit.record(target, outcome);
          audit.emit(record);
          entry.onClose = audit.atClose(record, socket);
          // A fresh connection, never a pooled one: it becomes this WebSocket's alone.
          const upstream = http.request({ host: address, port: target.port, method: target.method, path: target.requestPath, headers: upgradeHeaders(headers, target.authority), setHost: false, agent: false, timeout: ctx.connectTimeoutMs });
          upstream.once("socket", (s: net.Socket) => {
            entry.upstream = s;
            s.once("connect", () => s.setTimeout(0));
          });
          upstream.once("timeout", () => upstream.destroy(new TimeoutError(`connect to ${address}:${target.port} timed out`)));
          relayUpgrade({
            client: socket,
            head,
            upstream,
            responseHeaders: (raw) => endToEndHeaders(raw),
            onUpgraded: () => undefined,
            onError: (err) => {
              const o = unreachable(err);
              logger.warn("upstream unreachable", { host: target.host, port: target.port, address, code: o.code });
              endRawJson(socket, o.status, UPSTREAM_ERROR, unreachableBody(target, o, address));
            },
          });
        }
      },
      (err: unknown) => {
        logger.error("proxy upgrade failed", { host: target.host, ...errorFields(err) });
        endRawJson(socket, 502, PROXY_ERROR, PROXY_FAILED);
      },
    );
  }

  return { request, upgrade };
}
