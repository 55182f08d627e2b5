// Terminating a tunnel's TLS inside the boundary: the workload's TLS ends here, with a
// leaf for the CONNECT host signed by the sandbox's CA; each decrypted request is handed
// to the proxy to be evaluated like plain HTTP; the proxy's own TLS connection upstream
// verifies the origin. HTTP/1.1 only on both sides (ALPN), so every request is seen.
import http from "node:http";
import https from "node:https";
import type { Duplex } from "node:stream";
import tls from "node:tls";
import { CIPHERS_FAST_FIRST, type LeafSource } from "./ciphers.js";

/** The tunnel a decrypted request arrived on: the CONNECT target and the address checked for it. */
export interface TerminatedTunnel {
  host: string;
  port: number;
  address: string;
  /** The path the tunnel came by, when not the proxy's (each request's audit record says so). */
  via?: "transparent";
}

/** `expectContinue`: the client waits for 100 Continue, which only an allowed request gets. */
export type TerminatedRequestHandler = (req: http.IncomingMessage, res: http.ServerResponse, tunnel: TerminatedTunnel, expectContinue: boolean) => void;

/** A decrypted request asking to upgrade (its socket is the workload's TLS socket, `head` read past it). */
export type TerminatedUpgradeHandler = (req: http.IncomingMessage, socket: Duplex, head: Buffer, tunnel: TerminatedTunnel) => void;

/** Upstream TLS errors that mean "the origin's certificate is not what it must be". */
const CERT_ERRORS = new Set([
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "UNABLE_TO_GET_ISSUER_CERT",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "CERT_HAS_EXPIRED",
  "CERT_NOT_YET_VALID",
  "CERT_UNTRUSTED",
  "CERT_REJECTED",
  "ERR_TLS_CERT_ALTNAME_INVALID",
]);

export const isCertificateError = (err: unknown): boolean => CERT_ERRORS.has((err as NodeJS.ErrnoException | undefined)?.code ?? "");

export class TlsTerminator {
  /** Decrypted connections are served by one HTTP server that never listens. */
  private readonly server: http.Server;
  private readonly tunnels = new WeakMap<Duplex, TerminatedTunnel>();
  /** Upstream keep-alive: pools are keyed by address, port and servername, all checked. */
  readonly agent: https.Agent;
  /**
   * The system roots plus the per-endpoint CA, joined once (one entry: the supervisor has one
   * upstream CA). Given as an array, node's https spent ~10 ms per request on it even on a
   * reused connection (measured on loopback; bench/https.ts shows it); as one string, nothing measurable.
   */
  private bundle: { ca: string; pem: string } | undefined;

  constructor(
    private readonly leafs: LeafSource,
    onRequest: TerminatedRequestHandler,
    opts: { maxFreeSockets?: number; onUpgrade?: TerminatedUpgradeHandler } = {},
  ) {
    this.agent = new https.Agent({ keepAlive: true, maxFreeSockets: opts.maxFreeSockets ?? 256, scheduling: "lifo", noDelay: true });
    this.server = http.createServer({ requestTimeout: 0, noDelay: true });
    const dispatch = (req: http.IncomingMessage, res: http.ServerResponse, expectContinue: boolean): void => {
      const t = this.tunnels.get(req.socket);
      if (t) onRequest(req, res, t, expectContinue);
      else res.destroy();
    };
    this.server.on("request", (req, res) => dispatch(req, res, false));
    this.server.on("checkContinue", (req, res) => dispatch(req, res, true));
    const { onUpgrade } = opts;
    if (onUpgrade !== undefined) {
      this.server.on("upgrade", (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
        const t = this.tunnels.get(req.socket);
        if (t) onUpgrade(req, socket, head, t);
        else socket.destroy();
      });
    }
  }

  /**
   * Ends the client's TLS on `client` (a tunnel already answered 200), with `head` the
   * bytes read so far. Resolves with the TLS socket once the handshake is done; rejects
   * (and destroys the client) when it fails.
   */
  async terminate(client: Duplex, head: Buffer, tunnel: TerminatedTunnel): Promise<tls.TLSSocket> {
    const secureContext = await this.leafs.context(tunnel.host);
    if (head.length > 0) client.unshift(head);
    // Node's default high-water mark (16 KiB, one TLS record). 256 KiB cut the syscalls per MiB
    // by two thirds and the CPU per MiB by a sixth (bench tls-cpu), yet lowered the throughput of
    // 1 MiB bodies in bench https from 0.39x to 0.30-0.36x direct: measured, and not taken.
    const socket = new tls.TLSSocket(client, { isServer: true, secureContext, ALPNProtocols: ["http/1.1"] });
    this.tunnels.set(socket, tunnel);
    return new Promise((resolve, reject) => {
      const fail = (err: Error): void => {
        socket.destroy();
        client.destroy();
        reject(err);
      };
      socket.once("error", fail);
      socket.once("secure", () => {
        socket.off("error", fail);
        socket.on("error", () => client.destroy());
        this.server.emit("connection", socket);
        resolve(socket);
      });
    });
  }

  /** A request to the origin over the proxy's own TLS, verifying its certificate for `host`. */
  request(t: TerminatedTunnel, opts: { method: string; path: string; headers: string[]; ca?: string | undefined }): http.ClientRequest {
    return https.request({
      host: t.address,
      port: t.port,
      servername: t.host,
      // The origin's name is checked against the CONNECT host, not the address dialled.
      checkServerIdentity: (_addr, cert) => tls.checkServerIdentity(t.host, cert),
      method: opts.method,
      path: opts.path,
      headers: opts.headers,
      setHost: false,
      agent: this.agent,
      ciphers: CIPHERS_FAST_FIRST,
      // A per-endpoint CA adds to the system roots; it never replaces them.
      ...(opts.ca ? { ca: this.caBundle(opts.ca) } : {}),
    });
  }

  private caBundle(ca: string): string {
    if (this.bundle?.ca !== ca) this.bundle = { ca, pem: [...tls.rootCertificates, ca].join("\n") };
    return this.bundle.pem;
  }

  close(): void {
    this.server.closeAllConnections();
    this.agent.destroy();
  }
}
