// The gateway's side of the supervisors' control sessions: the TLS identity and
// launch-token key (kept in the gateway's home, mode 0600), the boundary health
// registry, and the supervisor endpoint listener on an address the supervisors'
// network can reach.

import type { Logger } from "pino";
import { DEFAULT_GRACE_MS, DEFAULT_PROXY_BOUNDS } from "../../protocol/launch.js";
import { DEFAULT_CONNECTION_BOUNDS, type ConnectionBoundsSettings } from "../../util/connection-bounds.js";
import type { LaunchControl, LaunchNetwork } from "../../driver/contract.js";
import { HostAddressWatcher, type HostAddressWatcherOptions } from "./host-addresses.js";
import { BoundaryRegistry } from "./boundary.js";
import type { SecretValuesSource } from "./secrets-push.js";
import { LaunchTokens } from "./launch-tokens.js";
import { startSupervisorEndpoint, type ExpectedLaunch, type SupervisorEndpoint } from "./supervisor-endpoint.js";
import { ensureEndpointTls, type EndpointTls } from "./tls.js";

export const DEFAULT_SUPERVISOR_PORT = 7421;


export interface ControlPlaneOptions {
  homeDir: string;
  gatewayId: string;
  log: Logger;
  expected: (sandboxId: string) => Promise<ExpectedLaunch | null>;
  port?: number;
  /** How long a supervisor keeps egress open without its session. */
  graceMs?: number;
  /** The host's DNS servers supervisors ask directly (canonical addr:port); null/absent: the containers' own resolver. */
  resolvers?: string[] | null;
  /** How the host's addresses are read (default: every interface), watched (default `ip monitor`) and polled without a feed (default 3 s). */
  hostAddresses?: Omit<HostAddressWatcherOptions, "onChange" | "onFeedLost">;
  /** The values of the secrets a sandbox's policy references, for its supervisor only. */
  secretValues?: SecretValuesSource;
  /** Bounds of the endpoint's connections; their header and idle timeouts also bound each proxy's (defaults: DEFAULT_CONNECTION_BOUNDS). */
  bounds?: Partial<ConnectionBoundsSettings>;
  /** Open connections each workload may hold to its proxy (default DEFAULT_PROXY_BOUNDS.max). */
  proxyConnections?: number;
}

export class ControlPlane {
  readonly boundary: BoundaryRegistry;
  private endpoint: SupervisorEndpoint | undefined;
  private listening: Promise<void> | undefined;
  private readonly hostAddresses: HostAddressWatcher;

  private constructor(
    private readonly opts: ControlPlaneOptions,
    private readonly tls: EndpointTls,
    private readonly tokens: LaunchTokens,
  ) {
    const log = opts.log.child({ component: "control" });
    // Idle below the supervisors' grace, so a half-open session frees its slot in time.
    this.boundary = new BoundaryRegistry({ log, sessionIdleMs: Math.min(10_000, Math.floor(this.graceMs / 2)), ...(opts.secretValues === undefined ? {} : { secretValues: opts.secretValues }) });
    this.hostAddresses = new HostAddressWatcher({
      ...opts.hostAddresses,
      onChange: (addresses, previous) => {
        const added = addresses.filter((a) => !previous.includes(a));
        const removed = previous.filter((a) => !addresses.includes(a));
        log.info({ event: "host_addresses_changed", added, removed }, "host addresses changed: telling the supervisors");
        this.boundary.setHostAddresses(addresses);
      },
      onFeedLost: (why) => log.warn({ event: "host_address_feed_lost", why }, "no host-address change feed: polling the interfaces instead"),
    });
    this.boundary.setHostAddresses(this.hostAddresses.current());
  }

  static async open(opts: ControlPlaneOptions): Promise<ControlPlane> {
    const tls = await ensureEndpointTls(opts.homeDir);
    const tokens = LaunchTokens.open(opts.homeDir, opts.gatewayId);
    return new ControlPlane(opts, tls, tokens);
  }

  get graceMs(): number {
    return this.opts.graceMs ?? DEFAULT_GRACE_MS;
  }

  get url(): string | null {
    return this.endpoint?.url ?? null;
  }

  stats(): object | null {
    return this.endpoint?.stats() ?? null;
  }

  /** Start the endpoint on `host` once (the runtime knows which address supervisors reach). */
  listen(host: string): Promise<void> {
    this.listening ??= (async () => {
      this.endpoint = await startSupervisorEndpoint({
        host,
        // Fixed, so that running supervisors find a restarted gateway again.
        port: this.opts.port ?? DEFAULT_SUPERVISOR_PORT,
        tls: this.tls,
        tokens: this.tokens,
        expected: this.opts.expected,
        boundary: this.boundary,
        log: this.opts.log.child({ component: "supervisor-endpoint" }),
        ...(this.opts.bounds === undefined ? {} : { bounds: this.opts.bounds }),
      });
      this.opts.log.info({ url: this.endpoint.url, fingerprint: this.tls.fingerprint }, "supervisor endpoint listening");
    })();
    return this.listening;
  }

  async launchControl(launch: { sandboxId: string; generation: number; nonce: string }): Promise<LaunchControl> {
    await this.listening;
    if (!this.endpoint) throw new Error("the supervisor endpoint is not listening");
    const { token } = await this.tokens.mint(launch);
    return { url: this.endpoint.url, fingerprint: this.tls.fingerprint, token, graceMs: this.graceMs };
  }

  /** What a launch file says of the host's network: its addresses now, the resolvers, and the bounds of the proxy's connections. */
  launchNetwork(): LaunchNetwork {
    const b = this.opts.bounds;
    return {
      hostAddresses: [...this.hostAddresses.current()],
      resolvers: this.opts.resolvers ?? null,
      connections: {
        max: this.opts.proxyConnections ?? DEFAULT_PROXY_BOUNDS.max,
        headerTimeoutMs: b?.headerTimeoutMs ?? DEFAULT_CONNECTION_BOUNDS.headerTimeoutMs,
        idleTimeoutMs: b?.idleTimeoutMs ?? DEFAULT_CONNECTION_BOUNDS.idleTimeoutMs,
      },
    };
  }

  async close(): Promise<void> {
    this.hostAddresses.close();
    this.boundary.close();
    await this.listening?.catch(() => undefined);
    await this.endpoint?.close();
  }
}
