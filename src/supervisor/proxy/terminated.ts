// Terminated https: a tunnel whose endpoint has L7 rules has its TLS ended here (tls/terminate.ts),
// and each request inside, WebSocket upgrades included, is decided at the address checked for
// the tunnel, has its credential placeholders swapped where the policy binds them (refused
// anywhere else; credential-injector.ts), and goes to the origin over the proxy's own verified TLS.
import type http from "node:http";
import type { Duplex } from "node:stream";
import { overrideMethods, type WouldDeny } from "../../policy/core.js";
import { errorFields } from "../logger.js";
import type { LeafSource } from "../tls/ciphers.js";
import { TlsTerminator, isCertificateError, type TerminatedTunnel } from "../tls/terminate.js";
import type { CredentialRefusal } from "../credentials.js";
import type { ProxyContext } from "./context.js";
import { CREDENTIAL_ERROR, prepareRequest, readBoundedBody, refusalBody, swapBody, unreadableBody, type PreparedRequest } from "./credential-injector.js";
import { endToEndHeaders, hasBody, requestHeaders } from "./headers.js";
import { ORIGIN_FORM, POLICY_ERROR, PROXY_ERROR, UPSTREAM_ERROR, UPSTREAM_TLS_ERROR, certificateBody, denialBody, unreachable, unreachableBody, type Denial } from "./refusals.js";
import { grantOf, type Tunnel } from "./registry.js";
import { endRawJson, sendJson, type TunnelAnswer } from "./respond.js";
import { httpsAuthority, type Target } from "./target.js";
import { TLS_UNAVAILABLE, type AuditEvent } from "./types.js";
import { refuseOtherUpgrade, relayUpgrade, upgradeHeaders } from "./upgrade.js";

export interface TerminatedHttps {
  /**
   * A tunnel allowed as https-terminated, not yet answered: answered established, its TLS
   * ended here. Without the sandbox's CA it is refused (TLS_UNAVAILABLE), never tunnelled blind.
   * `record`: its opening's audit record, already sent; its close record goes out from `entry`.
   */
  intercept(entry: Tunnel, head: Buffer, t: Target, address: string, record: AuditEvent, answer: TunnelAnswer): void;
  close(): void;
}

/** A decided request in a terminated tunnel: allowed ones carry the request with placeholders swapped; a credential refusal says why. */
interface Decided {
  t: Target;
  outcome: Denial | { kind: "allow"; rule: string; wouldDeny?: WouldDeny };
  /** Its audit record, for the caller to send (a request's allow once it is over). */
  record: AuditEvent;
  prepared?: PreparedRequest;
  refusal?: CredentialRefusal;
}

export function createTerminatedHttps(ctx: ProxyContext, tls: LeafSource | undefined): TerminatedHttps {
  const { audit, authorizer, logger } = ctx;
  const terminator = tls ? new TlsTerminator(tls, (req, res, tun, expectContinue) => onRequest(req, res, tun, expectContinue), { onUpgrade: (req, socket, head, tun) => onUpgrade(req, socket, head, tun) }) : undefined;
  /** Each terminated tunnel's registry entry, for the WebSockets upgraded inside it. */
  const entries = new WeakMap<TerminatedTunnel, Tunnel>();

  function intercept(entry: Tunnel, head: Buffer, t: Target, address: string, record: AuditEvent, answer: TunnelAnswer): void {
    if (terminator === undefined) {
      const o = { kind: "deny", reason: TLS_UNAVAILABLE } as const;
      audit.audit(t, o);
      answer.refuse(entry.client, 403, POLICY_ERROR, denialBody(t, o));
      return;
    }
    entry.grant = grantOf(t, address);
    entry.onClose = audit.atClose(record, entry.client);
    answer.established(entry.client);
    const tun: TerminatedTunnel = { host: t.host, port: t.port, address, ...(t.via === undefined ? {} : { via: t.via }) };
    entries.set(tun, entry);
    terminator.terminate(entry.client, head, tun).catch((err: unknown) => {
      logger.warn("TLS from the workload failed", { host: t.host, ...errorFields(err) });
    });
  }

  /** Evaluates a request inside a terminated tunnel (its record for the caller to send); undefined when it is not in origin form. */
  function decide(req: http.IncomingMessage, tun: TerminatedTunnel): Decided | undefined {
    const method = req.method ?? "GET";
    const url = req.url ?? "/";
    if (!url.startsWith("/")) return undefined;
    const q = url.indexOf("?");
    const t: Target = { host: tun.host, port: tun.port, protocol: "https", method, path: q < 0 ? url : url.slice(0, q), overrides: overrideMethods(req.rawHeaders, url), ...(tun.via === undefined ? {} : { via: tun.via }) };
    const d = authorizer.decideAt(t, tun.address, url);
    if (d.kind === "deny") return { t, outcome: d, record: audit.record(t, d) };
    // Placeholders are swapped where the policy binds them and refused anywhere else.
    const p = prepareRequest(d.policy, { host: t.host, port: t.port, method, url }, requestHeaders(req), ctx.credentials);
    if (!p.ok) {
      const outcome: Denial = { kind: "deny", reason: p.refusal.reason, rule: d.rule };
      return { t, outcome, record: audit.record(t, outcome), refusal: p.refusal };
    }
    const outcome = { kind: "allow", rule: d.rule, ...(d.wouldDeny !== undefined && { wouldDeny: d.wouldDeny }) } as const;
    return { t, outcome, record: audit.record(t, Object.assign({}, outcome, { address: tun.address })), prepared: p.value };
  }

  /** One request inside a terminated tunnel: decided like plain HTTP, at the address checked for the tunnel. */
  function onRequest(req: http.IncomingMessage, res: http.ServerResponse, tun: TerminatedTunnel, expectContinue: boolean): void {
    const decided = decide(req, tun);
    if (decided === undefined) {
      sendJson(res, 400, PROXY_ERROR, ORIGIN_FORM, true);
      return;
    }
    const { t, outcome, prepared, refusal, record } = decided;
    if (outcome.kind === "deny") {
      audit.emit(record);
      if (refusal !== undefined) sendJson(res, 403, CREDENTIAL_ERROR, refusalBody(t, refusal), expectContinue || hasBody(req));
      else sendJson(res, 403, POLICY_ERROR, denialBody(t, outcome), expectContinue || hasBody(req));
      return;
    }
    if (expectContinue) res.writeContinue();
    const p = prepared!;
    const headers = [...p.headers, "Host", httpsAuthority(tun.host, tun.port)];
    if (p.bodyMaxBytes === null || !hasBody(req)) {
      if (req.headers["transfer-encoding"] !== undefined) headers.push("Transfer-Encoding", "chunked");
      forwardTls(req, res, t, tun, p.path, headers, undefined, audit.atEnd(record, res));
      return;
    }
    // The endpoint opts in to placeholders in bodies: read it whole (bounded), swap, re-frame.
    void readBoundedBody(req, p.bodyMaxBytes).then((read) => {
      if (!read.ok) {
        audit.audit(t, { kind: "deny", reason: read.error, rule: outcome.rule, address: tun.address });
        sendJson(res, read.status, CREDENTIAL_ERROR, unreadableBody(t, read), true);
        return;
      }
      const swapped = swapBody(read.body, req.headers["content-type"], p);
      if (!swapped.ok) {
        audit.audit(t, { kind: "deny", reason: swapped.refusal.reason, rule: outcome.rule, address: tun.address });
        sendJson(res, 403, CREDENTIAL_ERROR, refusalBody(t, swapped.refusal), true);
        return;
      }
      const framed: string[] = [];
      for (let i = 0; i < headers.length; i += 2) if (headers[i]!.toLowerCase() !== "content-length") framed.push(headers[i]!, headers[i + 1]!);
      framed.push("Content-Length", String(swapped.value.length));
      forwardTls(req, res, t, tun, p.path, framed, swapped.value, audit.atEnd(record, res));
    });
  }

  /**
   * A WebSocket upgrade inside a terminated tunnel: decided as a request, then relayed over the
   * proxy's own verified TLS to the origin. It is registered on its tunnel, so revocation
   * re-checks the request too (path, method), not only the tunnel's host:port.
   */
  function onUpgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer, tun: TerminatedTunnel): void {
    socket.on("error", () => socket.destroy());
    const entry = entries.get(tun);
    if (!refuseOtherUpgrade(req, socket) || entry === undefined) return;
    const decided = decide(req, tun);
    if (decided === undefined) {
      endRawJson(socket, 400, PROXY_ERROR, ORIGIN_FORM);
      return;
    }
    const { t, outcome, prepared, refusal, record } = decided;
    audit.emit(record);
    if (outcome.kind === "deny") {
      if (refusal !== undefined) endRawJson(socket, 403, CREDENTIAL_ERROR, refusalBody(t, refusal));
      else endRawJson(socket, 403, POLICY_ERROR, denialBody(t, outcome));
      return;
    }
    // With its method: the grant is re-checked as the request it was, not as the tunnel.
    const upgrade: NonNullable<Tunnel["upgrade"]> = { grant: { ...grantOf(t, tun.address), method: t.method } };
    entry.upgrade = upgrade;
    socket.once("close", audit.atClose(record, socket));
    // The upgrade request carries its placeholders swapped, like any request here.
    const upstream = terminator!.request(tun, { method: t.method, path: prepared!.path, headers: upgradeHeaders(prepared!.headers, httpsAuthority(tun.host, tun.port)), ca: ctx.upstreamCa });
    relayUpgrade({
      client: socket,
      head,
      upstream,
      responseHeaders: (raw) => endToEndHeaders(raw),
      onUpgraded: (s) => (upgrade.upstream = s),
      onError: (err) => {
        if (isCertificateError(err)) {
          logger.warn("origin certificate refused", { host: t.host, code: err.code });
          endRawJson(socket, 502, UPSTREAM_TLS_ERROR, certificateBody(t, err));
          return;
        }
        const o = unreachable(err);
        endRawJson(socket, o.status, UPSTREAM_ERROR, unreachableBody(t, o, tun.address));
      },
    });
  }

  /** `body`: the body already read (and swapped); undefined: streamed from the client. */
  function forwardTls(req: http.IncomingMessage, res: http.ServerResponse, t: Target, tun: TerminatedTunnel, path: string, headers: string[], body: Buffer | undefined, watch: (upReq: http.ClientRequest) => void): void {
    const upReq = terminator!.request(tun, { method: t.method, path, headers, ca: ctx.upstreamCa });
    watch(upReq);
    let responded = false;
    upReq.on("response", (upRes) => {
      responded = true;
      res.writeHead(upRes.statusCode ?? 502, upRes.statusMessage, endToEndHeaders(upRes.rawHeaders));
      upRes.pipe(res);
      upRes.once("error", () => res.destroy());
      upRes.once("close", () => {
        if (!upRes.complete) res.destroy();
      });
    });
    upReq.on("error", (err: NodeJS.ErrnoException) => {
      if (responded) return;
      req.unpipe(upReq);
      if (isCertificateError(err)) {
        logger.warn("origin certificate refused", { host: t.host, code: err.code });
        sendJson(res, 502, UPSTREAM_TLS_ERROR, certificateBody(t, err), true);
        return;
      }
      const o = unreachable(err);
      sendJson(res, o.status, UPSTREAM_ERROR, unreachableBody(t, o, tun.address), true);
    });
    res.once("close", () => {
      if (!res.writableFinished) upReq.destroy();
    });
    if (body !== undefined) upReq.end(body);
    else if (hasBody(req)) req.pipe(upReq);
    else upReq.end();
  }

  return { intercept, close: () => terminator?.close() };
}
