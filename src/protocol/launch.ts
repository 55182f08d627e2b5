// The launch configuration: what the gateway hands one supervisor at start, as a
// read-only file in its container. Written by the Docker driver, read by the
// supervisor; both import this module, so the format and its defaults exist once.
// Anything wrong with it leaves the supervisor without a policy (deny all); it
// never falls back to allowing.
import { formatCidr, formatIp, parseCidr, parseIp, policyFromObject, type Policy } from "../policy/core.js";
import { normalizeFingerprint } from "./wire.js";

/** The supervisor's egress proxy port, as the workload sees it. */
export const PROXY_PORT = 3128;
/**
 * The transparent path: the supervisor's network namespace redirects every TCP connection
 * of the workload (to any address but the supervisor's own) to TRANSPARENT_PORT, every DNS
 * query (UDP or TCP, port 53, to any server) to DNS_PORT, and every other UDP datagram to
 * UDP_SINK_PORT, where it is counted and dropped (src/driver/docker/transparent-rules.ts).
 * The supervisor listens on them on its sandbox-network address only, as on PROXY_PORT.
 */
export const TRANSPARENT_PORT = 15001;
export const DNS_PORT = 15353;
export const UDP_SINK_PORT = 15354;
/** Where the launch files are mounted in the supervisor (read-only). */
export const LAUNCH_DIR = "/run/sandgate";
export const LAUNCH_CONFIG_FILE = "launch.json";
export const LAUNCH_TOKEN_FILE = "token";
export const LAUNCH_CONFIG_PATH = `${LAUNCH_DIR}/${LAUNCH_CONFIG_FILE}`;
/**
 * The supervisor's one writable directory of the host's (`run` in its launch directory,
 * mounted there read-write), where it serves its health endpoint as a Unix socket: only the
 * gateway (root) reaches it from the host; the workload, never (not mounted there).
 */
export const RUN_DIR_NAME = "run";
export const RUN_DIR = `${LAUNCH_DIR}/${RUN_DIR_NAME}`;
export const HEALTH_SOCKET_FILE = "health.sock";
export const HEALTH_SOCKET_PATH = `${RUN_DIR}/${HEALTH_SOCKET_FILE}`;
/** The longest path a Unix socket can have on Linux (sun_path is 108 bytes with its NUL). */
export const MAX_SOCKET_PATH_BYTES = 107;
/** Session down this long → the supervisor denies all egress. */
export const DEFAULT_GRACE_MS = 15_000;
export const GRACE_MS_RANGE = { min: 100, max: 3_600_000 } as const;

/**
 * Bounds on the workload's connections to its proxy: at most `max` open at once (a CONNECT
 * tunnel or a WebSocket counts as its connection; past it a new one is refused at once and
 * audited as `connection_limit`), a request head within `headerTimeoutMs`, a kept-alive
 * connection idle at most `idleTimeoutMs`.
 */
export interface ProxyBounds {
  max: number;
  headerTimeoutMs: number;
  idleTimeoutMs: number;
}
export const DEFAULT_PROXY_BOUNDS: ProxyBounds = { max: 512, headerTimeoutMs: 10_000, idleTimeoutMs: 60_000 };
export const PROXY_BOUNDS_RANGE = { max: { min: 1, max: 100_000 }, headerTimeoutMs: { min: 100, max: 600_000 }, idleTimeoutMs: { min: 100, max: 3_600_000 } } as const;

/** The file's content, as the gateway writes it. */
export interface LaunchConfig {
  sandboxId: string;
  generation: number;
  /** Per-launch secret, also in the containers' labels; never logged. */
  nonce: string;
  proxyPort: number;
  /** The policy in its canonical JSON form (serializePolicy). */
  policy: unknown;
  policyRevision: number;
  /**
   * The sandbox network's subnet (CIDR): the proxy listens only on the supervisor's address
   * in it, never on its leg on the egress network (where the host and other supervisors are).
   * Absent: `host` of the supervisor's options (standalone use).
   */
  proxySubnet?: string;
  /** The health endpoint's Unix socket (HEALTH_SOCKET_PATH). Absent: no health endpoint (standalone use). */
  healthSocket?: string;
  control?: ControlSettings;
  /**
   * Every address of the gateway's host (all interfaces) at launch: the proxy refuses them
   * unless an endpoint names them. Later changes arrive over the control session. Absent
   * (a launch file of an older gateway): none known until the gateway sends them.
   */
  hostAddresses?: string[];
  /**
   * The host's DNS servers ("addr" or "addr:port", "[v6]:port"), queried directly so that
   * names resolve while Docker (and its embedded DNS) is away. Absent: the container's own
   * resolver (Docker's embedded DNS), as launch files of older gateways say.
   */
  resolvers?: string[];
  /**
   * The sandbox's CA (PEM certificate and PKCS#8 key): with it the proxy terminates https
   * where the policy has L7 rules. `originCa`: extra PEM certificates trusted for origins
   * besides the system roots. Absent: such tunnels are refused (never tunnelled blind).
   */
  tls?: LaunchTls;
  /** Absent (a launch file of an older gateway): DEFAULT_PROXY_BOUNDS. */
  connections?: ProxyBounds;
  /**
   * The transparent path: the supervisor serves TRANSPARENT_PORT, DNS_PORT and UDP_SINK_PORT on
   * its address in `proxySubnet` (required then), and its namespace redirects the workload there.
   */
  transparent?: boolean;
}

export interface LaunchTls {
  caCertPem: string;
  caKeyPem: string;
  originCaPem?: string;
}

/** Largest PEM text a launch file may carry in one field. */
export const MAX_PEM_CHARS = 256 * 1024;

/** Most host addresses a launch file or a control message may carry. */
export const MAX_HOST_ADDRESSES = 4096;
/** Most upstream resolvers a launch file may name. */
export const MAX_RESOLVERS = 8;

/** How to reach and authenticate to the gateway's supervisor endpoint. */
export interface ControlSettings {
  /** wss://<egress bridge gateway IP>:<port>/v1/supervisor */
  url: string;
  /** Canonical "sha256:<hex>" pin of the gateway's endpoint certificate. */
  fingerprint: string;
  /** File holding the launch-scoped JWT (mounted only into the supervisor). */
  tokenPath: string;
  graceMs: number;
}

export interface LaunchSettings {
  sandboxId: string | null;
  generation: number | null;
  nonce: string | null;
  proxyPort: number;
  /** Canonical CIDR the proxy binds in; null: the supervisor's `host` option. */
  proxySubnet: string | null;
  /** Absolute path of the health endpoint's Unix socket; null: none. */
  healthSocket: string | null;
  /** Null: no control session configured (standalone; the launch policy applies as is). */
  control: ControlSettings | null;
  /** Canonical text; empty when the launch file names none. */
  hostAddresses: string[];
  /** Canonical "addr:port" / "[v6]:port" for dns.Resolver#setServers; null: the container's own resolver. */
  resolvers: string[] | null;
  tls: LaunchTls | null;
  connections: ProxyBounds;
  transparent: boolean;
}

export interface LaunchPolicy {
  readonly policy: Policy;
  readonly revision: number;
}

export interface LaunchLoadResult {
  settings: LaunchSettings;
  /** Undefined whenever anything in the config or policy was invalid. */
  policy: LaunchPolicy | undefined;
  errors: string[];
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function port(v: unknown, fallback: number, name: string, errors: string[]): number {
  if (v === undefined) return fallback;
  if (typeof v === "number" && Number.isInteger(v) && v >= 1 && v <= 65535) return v;
  errors.push(`${name} must be an integer port (1-65535)`);
  return fallback;
}

function parseControl(raw: unknown, errors: string[]): ControlSettings | null {
  if (raw === undefined) return null;
  if (!isRecord(raw)) {
    errors.push("control must be an object");
    return null;
  }
  const before = errors.length;
  let url = "";
  try {
    const u = new URL(typeof raw.url === "string" ? raw.url : "");
    if (u.protocol !== "wss:") throw new Error("not wss");
    url = u.toString();
  } catch {
    errors.push("control.url must be a wss:// URL");
  }
  const fingerprint = typeof raw.fingerprint === "string" ? normalizeFingerprint(raw.fingerprint) : null;
  if (fingerprint === null) errors.push("control.fingerprint must be sha256:<64 hex digits>");
  const tokenPath = typeof raw.tokenPath === "string" && raw.tokenPath.startsWith("/") ? raw.tokenPath : "";
  if (tokenPath === "") errors.push("control.tokenPath must be an absolute path");
  let graceMs = DEFAULT_GRACE_MS;
  if (raw.graceMs !== undefined) {
    const g = raw.graceMs;
    if (typeof g === "number" && Number.isInteger(g) && g >= GRACE_MS_RANGE.min && g <= GRACE_MS_RANGE.max) graceMs = g;
    else errors.push(`control.graceMs must be an integer between ${GRACE_MS_RANGE.min} and ${GRACE_MS_RANGE.max}`);
  }
  if (errors.length > before || fingerprint === null) return null;
  return { url, fingerprint, tokenPath, graceMs };
}

/**
 * A DNS server address: "192.0.2.53", "192.0.2.53:5353", "2001:db8::53" or "[2001:db8::53]:5353".
 * Canonical form: "addr:port" or "[v6]:port" (what dns.Resolver#setServers takes).
 */
export function parseResolverAddress(text: string): { ok: true; value: string; address: string; port: number } | { ok: false; error: string } {
  const bad = { ok: false as const, error: `not a DNS server address (IP, IP:port or [IPv6]:port): ${JSON.stringify(text)}` };
  let addrText = text;
  let portText: string | undefined;
  const bracketed = /^\[([^\]]+)\](?::([^:]*))?$/.exec(text);
  if (bracketed) {
    addrText = bracketed[1]!;
    portText = bracketed[2];
    if (!addrText.includes(":")) return bad;
  } else if (text.split(":").length === 2) {
    // Exactly one colon: IPv4:port (a bare IPv6 address has at least two).
    [addrText, portText] = text.split(":") as [string, string];
    if (!addrText.includes(".")) return bad;
  }
  const ip = parseIp(addrText);
  if (ip === null) return bad;
  let port = 53;
  if (portText !== undefined) {
    if (!/^[1-9][0-9]{0,4}$/.test(portText) || Number(portText) > 65535) return { ok: false, error: `DNS server port must be 1-65535: ${JSON.stringify(text)}` };
    port = Number(portText);
  }
  const address = formatIp(ip);
  return { ok: true, value: ip.family === 6 ? `[${address}]:${String(port)}` : `${address}:${String(port)}`, address, port };
}

function parseHostAddresses(raw: unknown, errors: string[]): string[] {
  if (raw === undefined) return [];
  if (!Array.isArray(raw) || raw.length > MAX_HOST_ADDRESSES) {
    errors.push(`hostAddresses must be a list of at most ${String(MAX_HOST_ADDRESSES)} IP addresses`);
    return [];
  }
  const out = new Set<string>();
  for (const a of raw) {
    const ip = typeof a === "string" ? parseIp(a) : null;
    if (ip === null) errors.push(`hostAddresses: not an IP address: ${JSON.stringify(a)}`);
    else out.add(formatIp(ip));
  }
  return [...out];
}

function parseResolvers(raw: unknown, errors: string[]): string[] | null {
  if (raw === undefined) return null;
  if (!Array.isArray(raw) || raw.length === 0 || raw.length > MAX_RESOLVERS) {
    errors.push(`resolvers must be a list of 1-${String(MAX_RESOLVERS)} DNS server addresses`);
    return null;
  }
  const out: string[] = [];
  for (const r of raw) {
    const parsed = typeof r === "string" ? parseResolverAddress(r) : { ok: false as const, error: `not a DNS server address: ${JSON.stringify(r)}` };
    if (parsed.ok) out.push(parsed.value);
    else errors.push(`resolvers: ${parsed.error}`);
  }
  return out;
}

const pemOf = (v: unknown, label: string): boolean =>
  typeof v === "string" && v.length <= MAX_PEM_CHARS && v.includes(`-----BEGIN ${label}-----`) && v.includes(`-----END ${label}-----`);

function parseTls(raw: unknown, errors: string[]): LaunchTls | null {
  if (raw === undefined) return null;
  if (!isRecord(raw)) {
    errors.push("tls must be an object");
    return null;
  }
  const before = errors.length;
  if (!pemOf(raw.caCertPem, "CERTIFICATE")) errors.push("tls.caCertPem must be a PEM certificate");
  if (!pemOf(raw.caKeyPem, "PRIVATE KEY")) errors.push("tls.caKeyPem must be a PEM private key (PKCS#8)");
  if (raw.originCaPem !== undefined && !pemOf(raw.originCaPem, "CERTIFICATE")) errors.push("tls.originCaPem must be PEM certificates");
  if (errors.length > before) return null;
  return { caCertPem: raw.caCertPem as string, caKeyPem: raw.caKeyPem as string, ...(raw.originCaPem === undefined ? {} : { originCaPem: raw.originCaPem as string }) };
}

function parseProxyBounds(raw: unknown, errors: string[]): ProxyBounds {
  if (raw === undefined) return { ...DEFAULT_PROXY_BOUNDS };
  if (!isRecord(raw)) {
    errors.push("connections must be an object");
    return { ...DEFAULT_PROXY_BOUNDS };
  }
  const out = { ...DEFAULT_PROXY_BOUNDS };
  for (const key of ["max", "headerTimeoutMs", "idleTimeoutMs"] as const) {
    const v = raw[key];
    const r = PROXY_BOUNDS_RANGE[key];
    if (v === undefined) continue;
    if (typeof v === "number" && Number.isInteger(v) && v >= r.min && v <= r.max) out[key] = v;
    else errors.push(`connections.${key} must be an integer from ${r.min} to ${r.max}`);
  }
  return out;
}

/** Validate a parsed launch file; every problem is listed, and any problem withholds the policy. */
export function parseLaunchConfig(raw: unknown): LaunchLoadResult {
  const errors: string[] = [];
  const settings: LaunchSettings = { sandboxId: null, generation: null, nonce: null, proxyPort: PROXY_PORT, proxySubnet: null, healthSocket: null, control: null, hostAddresses: [], resolvers: null, tls: null, connections: { ...DEFAULT_PROXY_BOUNDS }, transparent: false };
  if (!isRecord(raw)) return { settings, policy: undefined, errors: ["launch config must be a JSON object"] };

  if (typeof raw.sandboxId === "string" && raw.sandboxId !== "") settings.sandboxId = raw.sandboxId;
  else errors.push("sandboxId must be a non-empty string");
  if (typeof raw.generation === "number" && Number.isSafeInteger(raw.generation) && raw.generation >= 0) settings.generation = raw.generation;
  else errors.push("generation must be a non-negative integer");
  if (typeof raw.nonce === "string" && raw.nonce !== "") settings.nonce = raw.nonce;
  else errors.push("nonce must be a non-empty string");
  settings.proxyPort = port(raw.proxyPort, PROXY_PORT, "proxyPort", errors);
  if (raw.proxySubnet !== undefined) {
    const c = typeof raw.proxySubnet === "string" ? parseCidr(raw.proxySubnet) : null;
    if (c?.ok && c.cidr.family === 4) settings.proxySubnet = formatCidr(c.cidr);
    else errors.push("proxySubnet must be an IPv4 CIDR such as 198.18.0.0/28");
  }
  if (raw.healthSocket !== undefined) {
    const p = raw.healthSocket;
    if (typeof p === "string" && p.startsWith("/") && !p.includes("\0") && Buffer.byteLength(p) <= MAX_SOCKET_PATH_BYTES) settings.healthSocket = p;
    else errors.push(`healthSocket must be an absolute path of at most ${String(MAX_SOCKET_PATH_BYTES)} bytes`);
  }
  settings.control = parseControl(raw.control, errors);
  settings.hostAddresses = parseHostAddresses(raw.hostAddresses, errors);
  settings.resolvers = parseResolvers(raw.resolvers, errors);
  settings.tls = parseTls(raw.tls, errors);
  settings.connections = parseProxyBounds(raw.connections, errors);
  if (raw.transparent !== undefined) {
    if (typeof raw.transparent !== "boolean") errors.push("transparent must be true or false");
    else if (raw.transparent && settings.proxySubnet === null) errors.push("transparent needs proxySubnet (the address it serves the workload on)");
    else settings.transparent = raw.transparent;
  }

  const revision = raw.policyRevision;
  if (!(typeof revision === "number" && Number.isSafeInteger(revision) && revision >= 0)) {
    errors.push("policyRevision must be a non-negative integer");
  }
  let policy: LaunchPolicy | undefined;
  if (raw.policy === undefined) {
    errors.push("policy is missing");
  } else {
    const parsed = policyFromObject(raw.policy);
    if (!parsed.ok) errors.push(...parsed.errors.map((e) => `policy: ${e}`));
    else if (typeof revision === "number") policy = { policy: parsed.policy, revision };
  }
  return { settings, policy: errors.length === 0 ? policy : undefined, errors };
}
