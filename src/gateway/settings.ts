// The gateway's settings, declared once (issue 32, item 3): each with its name, its
// `gateway start` flag (null: environment only), its environment variable, its type and
// range (a zod schema of the parsed value), its default, a one-line help and its unit.
// From this table come the flags (gatewaySettingOptions), the environment parsing and
// its one-line errors (resolveSettings: flag, else environment, else default), the
// options a detached gateway is re-run with (settingsArgs), `gateway status`'s view
// (settingsView) and the table in docs/configuration.md (settingsDocTable).
//
// The gateway's own modules take their fallbacks from here (DEFAULT_SETTINGS). Modules
// the import rules keep from importing the gateway (the Docker driver, src/util,
// src/protocol) keep their constant, and the table names it rather than repeating it.

import { HOST_NAME, HOST_NAME_ALLOWED, checkHostName } from "../lifecycle/placement.js";
import { hostname } from "node:os";
import { z } from "zod";
import { SettingError, humanSeconds, parseChoice, parseDecimal, parseDuration, parseInteger, type DurationRange, type IntRange } from "../util/settings.js";
import { formatSize, parseByteSize, parseTransferSize } from "../util/byte-size.js";
import { readOriginCa, type OriginCa } from "../util/origin-ca.js";
import { CONNECTION_BOUNDS_RANGES, DEFAULT_CONNECTION_BOUNDS } from "../util/connection-bounds.js";
import { DEFAULT_PROXY_BOUNDS, PROXY_BOUNDS_RANGE } from "../protocol/launch.js";
import { RECOVERY_DEADLINE_DEFAULT_S } from "../driver/contract.js";
import { DEFAULT_UID_BASE, UID_BASE_RANGE, parseUidBase } from "../driver/docker/host-ids.js";
import { CONTAINER_LOG_LIMITS, DEFAULT_CONTAINER_LOG } from "../driver/docker/log-config.js";
import { DEFAULT_SANDBOX_SUBNETS, parseSandboxSubnets } from "../driver/docker/sandbox-subnets.js";
import { SUPERVISOR_RESOURCES } from "../driver/docker/objects.js";
import { formatCidr } from "../policy/cidr.js";
import { formatListenAddress, parseListenAddress, type ListenAddress } from "./api/listen-address.js";
import { explicit as checkResolvers } from "./control/resolvers.js";
import { STORE_ALLOWED, parseStoreLocation, showStoreLocation, type StoreLocation } from "../util/store-url.js";

/** How one type of setting is read from text, checked, shown and written back as a flag. */
export interface SettingType<T> {
  /** The parsed value's type and range. */
  schema: z.ZodType<T>;
  /** The flag's argument, as --help shows it: `<n>`, `<duration>`. */
  arg: string;
  /** What is allowed, for the docs: "1–64", "1 s–1 d". */
  allowed: string;
  /** Text → value; a bad value is a one-line SettingError naming `what`, the value and what is allowed. */
  parse: (what: string, raw: string) => T;
  /** The value as a person reads it (status, docs). */
  show: (v: T) => string;
  /** The value as the flag's arguments (a detached gateway is re-run with them); [] for none. */
  args: (v: T) => string[];
  /** Given more than once (a flag repeated, the variable comma-separated). */
  repeatable?: boolean;
}

const int = (r: IntRange): SettingType<number> => ({
  schema: z.number().int().min(r.min).max(r.max),
  arg: "<n>",
  allowed: `${r.min}–${r.max}`,
  parse: (w, raw) => parseInteger(w, raw, r),
  show: String,
  args: (v) => [String(v)],
});

const decimal = (r: IntRange): SettingType<number> => ({
  schema: z.number().min(r.min).max(r.max),
  arg: "<n>",
  allowed: `${r.min}–${r.max}`,
  parse: (w, raw) => parseDecimal(w, raw, r),
  show: String,
  args: (v) => [String(v)],
});

/** A duration, held in seconds. */
const seconds = (r: DurationRange, arg = "<duration>"): SettingType<number> => ({
  schema: z.number().min(r.minS).max(r.maxS),
  arg,
  allowed: `${humanSeconds(r.minS)}–${humanSeconds(r.maxS)}`,
  parse: (w, raw) => parseDuration(w, raw, r),
  show: humanSeconds,
  args: (v) => [`${v}s`],
});

/** A size in bytes (10M, 512K). */
const size = (r: IntRange): SettingType<number> => ({
  schema: z.number().int().min(r.min).max(r.max),
  arg: "<size>",
  allowed: `${formatSize(r.min)}–${formatSize(r.max)}`,
  parse: (w, raw) => parseByteSize(w, raw, r),
  show: formatSize,
  args: (v) => [String(v)],
});

/** A size in bytes of a file transfer's bounds (T allowed: 16T). */
const transferSize = (r: IntRange): SettingType<number> => ({
  ...size(r),
  allowed: `${formatSize(r.min)}–${r.max >= 1024 ** 4 ? `${r.max / 1024 ** 4} TiB` : formatSize(r.max)}`,
  parse: (w, raw) => parseTransferSize(w, raw, r),
});

const choice = <T extends string>(allowed: readonly T[]): SettingType<T> => ({
  schema: z.enum(allowed as readonly [T, ...T[]]),
  arg: "<level>",
  allowed: allowed.join(", "),
  parse: (w, raw) => parseChoice(w, raw, allowed),
  show: String,
  args: (v) => [v],
});

/** A type whose own parser returns { ok, error }: the error follows the setting's name. */
const checked = <T>(t: Omit<SettingType<T>, "parse">, parse: (raw: string) => { ok: true; value: T } | { ok: false; error: string }): SettingType<T> => ({
  ...t,
  parse: (what, raw) => {
    const r = parse(raw);
    if (!r.ok) throw new SettingError(`${what}: ${r.error}`);
    return r.value;
  },
});

/** Several values: the flag repeated, or the variable's values separated by `sep`. */
const list = <T>(one: SettingType<T>, sep: RegExp, allowed: string): SettingType<T[]> => ({
  schema: z.array(one.schema),
  arg: one.arg,
  allowed,
  parse: (what, raw) =>
    raw
      .split(sep)
      .map((v) => v.trim())
      .filter((v) => v !== "")
      .map((v) => one.parse(what, v)),
  show: (v) => (v.length === 0 ? "none" : v.map(one.show).join(", ")),
  args: (v) => v.flatMap(one.args),
  repeatable: true,
});

const text = (arg: string): SettingType<string> => ({ schema: z.string(), arg, allowed: "", parse: (_w, raw) => raw, show: String, args: (v) => [v] });

export const LOG_LEVELS = ["trace", "debug", "info", "warn", "error", "fatal", "silent"] as const;
const DEADLINE: DurationRange = { minS: 1, maxS: 86_400 };
const KIB = 1024;
const MIB = 1024 * KIB;
const GIB = 1024 * MIB;
const TIB = 1024 * GIB;

/** One setting of the table. */
export interface Setting<T> {
  /** `gateway start`'s flag; null: the environment only. */
  flag: `--${string}` | null;
  env: `SANDGATE_${string}`;
  type: SettingType<T>;
  /** Used when neither the flag nor the variable is given. */
  default: T;
  /** How the default reads when it is not a value (`none`, `the host's /etc/resolv.conf`). */
  defaultText?: string;
  /** One line: what it bounds or sets. */
  help: string;
  /** What the value counts, for the docs. */
  unit: string;
}

const setting = <T>(s: Setting<T>): Setting<T> => s;

/** The machine's hostname as a host name (a name the pattern refuses is cut to what it allows). */
function hostName(): string {
  const h = hostname().replace(/[^A-Za-z0-9._-]/g, "-").replace(/^[^A-Za-z0-9]+/, "").slice(0, 63);
  return HOST_NAME.test(h) ? h : "host";
}

/** Every gateway setting, in the order the docs and `gateway start --help` list them. */
export const SETTINGS = {
  listen: setting<ListenAddress[]>({
    flag: "--listen",
    env: "SANDGATE_LISTEN",
    type: list(
      checked<ListenAddress>({ schema: z.custom<ListenAddress>((v) => typeof v === "object" && v !== null), arg: "<url>", allowed: "", show: formatListenAddress, args: (a) => [formatListenAddress(a)] }, (raw) => {
        const r = parseListenAddress(raw);
        return r.ok ? { ok: true, value: r.address } : r;
      }),
      /,/,
      "unix:///PATH, tcp://HOST:PORT",
    ),
    default: [],
    help: "also serve the API at unix:///PATH or tcp://HOST:PORT (TLS only, with <home>/api-cert.pem, which a client pins: SANDGATE_CERT); repeatable, the variable comma-separated. The API always listens on <home>/api.sock, which the CLI, SDK and MCP use",
    unit: "addresses",
  }),
  store: setting<StoreLocation>({
    flag: "--store",
    env: "SANDGATE_STORE",
    type: checked<StoreLocation>({ schema: z.custom<StoreLocation>((v) => typeof v === "object" && v !== null), arg: "<url>", allowed: STORE_ALLOWED, show: showStoreLocation, args: () => [] }, parseStoreLocation),
    default: { kind: "sqlite" },
    defaultText: "sqlite (<home>/state.db)",
    help: "where the gateway keeps its state: the embedded SQLite file in its home, or a PostgreSQL database a fleet of gateways shares (docs/fleet.md). Give the password in PGPASSWORD or ~/.pgpass rather than the URL: a command line is readable by every local user; a detached gateway gets the URL through its environment",
    unit: "URL",
  }),
  storeConnections: setting({ flag: "--store-connections", env: "SANDGATE_STORE_CONNECTIONS", type: int({ min: 1, max: 100 }), default: 10, help: "connections to PostgreSQL the gateway opens at most (one more listens for other gateways' events); an operation waits up to 10 s for one, then fails (503)", unit: "connections" }),
  hostName: setting({
    flag: "--host-name",
    env: "SANDGATE_HOST_NAME",
    type: checked<string>({ schema: z.string().regex(HOST_NAME), arg: "<name>", allowed: HOST_NAME_ALLOWED, show: String, args: (v) => [v] }, (raw) => {
      const bad = checkHostName(raw);
      return bad === null ? { ok: true, value: raw } : { ok: false, error: bad };
    }),
    default: hostName(),
    defaultText: "the machine's hostname",
    help: "this gateway's host in a fleet (--store postgres://…): it drives this machine's Docker daemon while it holds the host's lease; a second gateway of the same home and host name stands by and takes over when the first ends (docs/fleet.md)",
    unit: "name",
  }),
  logLevel: setting<(typeof LOG_LEVELS)[number]>({ flag: "--log-level", env: "SANDGATE_LOG_LEVEL", type: choice(LOG_LEVELS), default: "info", help: "what the gateway logs (JSON lines)", unit: "level" }),
  recoveryDeadlineS: setting({
    flag: "--recovery-deadline",
    env: "SANDGATE_RECOVERY_DEADLINE",
    type: seconds(DEADLINE, "<seconds>"),
    default: RECOVERY_DEADLINE_DEFAULT_S,
    help: "how long a sandbox may stay Recovering before it fails closed",
    unit: "seconds",
  }),
  boundaryDeadlineS: setting({
    flag: "--boundary-deadline",
    env: "SANDGATE_BOUNDARY_DEADLINE",
    type: seconds(DEADLINE, "<seconds>"),
    default: 30,
    help: "how long a sandbox whose supervisor runs but cannot show its boundary may stay Recovering",
    unit: "seconds",
  }),
  uidBase: setting({
    flag: "--uid-base",
    env: "SANDGATE_UID_BASE",
    type: checked<number>({ schema: z.number().int().min(UID_BASE_RANGE.min).max(UID_BASE_RANGE.max), arg: "<id>", allowed: `${UID_BASE_RANGE.min}–${UID_BASE_RANGE.max}`, show: String, args: (v) => [String(v)] }, (raw) => {
      const r = parseUidBase(raw);
      return r.ok ? { ok: true, value: r.base } : r;
    }),
    default: DEFAULT_UID_BASE,
    help: "uid (and gid) of every workload; supervisors run as the next id. No host account or group may hold either",
    unit: "id",
  }),
  resolvers: setting({
    flag: "--resolver",
    env: "SANDGATE_RESOLVERS",
    type: {
      ...list(text("<addr>"), /[\s,]+/, "IP[:port]"),
      parse: (what, raw) => {
        const r = checkResolvers(
          raw.split(/[\s,]+/).filter((v) => v !== ""),
          what,
        );
        if (!r.ok) throw new SettingError(r.error);
        return r.resolvers;
      },
    },
    default: [] as string[],
    defaultText: "the host's /etc/resolv.conf",
    help: "a DNS server supervisors ask directly, IP[:port]; repeatable, the variable separated by commas or spaces",
    unit: "addresses",
  }),
  auditRate: setting({ flag: "--audit-rate", env: "SANDGATE_AUDIT_RATE", type: int({ min: 1, max: 100_000 }), default: 50, help: "audit records a sandbox may add per second; more are dropped and counted", unit: "records/s" }),
  auditKeep: setting({ flag: "--audit-keep", env: "SANDGATE_AUDIT_KEEP", type: int({ min: 100, max: 100_000_000 }), default: 10_000, help: "audit records kept per sandbox, newest first", unit: "records" }),
  auditMaxAgeS: setting({ flag: "--audit-max-age", env: "SANDGATE_AUDIT_MAX_AGE", type: seconds({ minS: 3600, maxS: 366 * 86_400 }), default: 7 * 86_400, help: "how long audit records are kept, e.g. 12h, 7d", unit: "duration" }),
  supervisorCpus: setting({ flag: "--supervisor-cpus", env: "SANDGATE_SUPERVISOR_CPUS", type: decimal({ min: 0.1, max: 64 }), default: SUPERVISOR_RESOURCES.cpus, help: "CPU limit of each sandbox's supervisor, a cap not a reservation", unit: "CPUs" }),
  supervisorMemoryMb: setting({ flag: "--supervisor-memory", env: "SANDGATE_SUPERVISOR_MEMORY", type: { ...int({ min: 64, max: 65_536 }), arg: "<MiB>" }, default: SUPERVISOR_RESOURCES.memoryMb, help: "memory limit of each sandbox's supervisor", unit: "MiB" }),
  containerLogSize: setting({ flag: "--container-log-size", env: "SANDGATE_CONTAINER_LOG_SIZE", type: size(CONTAINER_LOG_LIMITS.maxBytes), default: DEFAULT_CONTAINER_LOG.maxBytes, help: "output Docker keeps per log file of each sandbox container before rotating it, e.g. 512K, 10M", unit: "bytes" }),
  containerLogFiles: setting({ flag: "--container-log-files", env: "SANDGATE_CONTAINER_LOG_FILES", type: int(CONTAINER_LOG_LIMITS.files), default: DEFAULT_CONTAINER_LOG.files, help: "log files kept per container, so at most size × files of output", unit: "files" }),
  logStreams: setting({ flag: "--log-streams", env: "SANDGATE_LOG_STREAMS", type: int({ min: 1, max: 100_000 }), default: 64, help: "log streams (sandbox logs) open at once; more are refused", unit: "streams" }),
  detachedExecs: setting({ flag: "--detached-execs", env: "SANDGATE_DETACHED_EXECS", type: int({ min: 1, max: 10_000 }), default: 32, help: "detached execs (exec --detach) kept per sandbox; when every one is running, another is refused", unit: "execs" }),
  launchConcurrency: setting({ flag: "--launch-concurrency", env: "SANDGATE_LAUNCH_CONCURRENCY", type: int({ min: 1, max: 64 }), default: 4, help: "sandboxes launched (provisioned, started, verified) at once; more wait their turn in order, Provisioning, and say so", unit: "sandboxes" }),
  proposalsPending: setting({ flag: "--proposals-pending", env: "SANDGATE_PROPOSALS_PENDING", type: int({ min: 1, max: 1000 }), default: 16, help: "pending policy proposals per sandbox; past it a new one is refused until a person decides one", unit: "proposals" }),
  proposalsKept: setting({ flag: "--proposals-kept", env: "SANDGATE_PROPOSALS_KEPT", type: int({ min: 0, max: 10_000 }), default: 50, help: "decided policy proposals kept per sandbox, the most recently decided", unit: "proposals" }),
  sandboxSubnets: setting({
    flag: "--sandbox-subnets",
    env: "SANDGATE_SANDBOX_SUBNETS",
    type: checked<string>({ schema: z.string(), arg: "<cidr>", allowed: "an IPv4 range /8–/24", show: String, args: (v) => [v] }, (raw) => {
      const r = parseSandboxSubnets(raw);
      return r.ok ? { ok: true, value: formatCidr(r.range) } : r;
    }),
    default: DEFAULT_SANDBOX_SUBNETS,
    help: "IPv4 range each sandbox's internal network takes a /28 from, instead of Docker's address pools; the host gets an unreachable route for it",
    unit: "CIDR",
  }),
  headerTimeoutS: setting({
    flag: "--header-timeout",
    env: "SANDGATE_HEADER_TIMEOUT",
    type: seconds(CONNECTION_BOUNDS_RANGES.headerTimeout),
    default: DEFAULT_CONNECTION_BOUNDS.headerTimeoutMs / 1000,
    help: "a connection to the gateway's listeners or a sandbox's proxy that has not sent a complete request head (TLS handshake included) in this long is closed, e.g. 10s",
    unit: "duration",
  }),
  idleTimeoutS: setting({ flag: "--idle-timeout", env: "SANDGATE_IDLE_TIMEOUT", type: seconds(CONNECTION_BOUNDS_RANGES.idleTimeout), default: DEFAULT_CONNECTION_BOUNDS.idleTimeoutMs / 1000, help: "a kept-alive connection with no request in flight is closed after this long, on the same listeners", unit: "duration" }),
  maxConnections: setting({
    flag: "--max-connections",
    env: "SANDGATE_MAX_CONNECTIONS",
    type: int(CONNECTION_BOUNDS_RANGES.maxAuthenticated),
    default: DEFAULT_CONNECTION_BOUNDS.maxAuthenticated,
    help: "authenticated connections per listener; the supervisor endpoint holds one per running sandbox; past it a newly authenticated one is refused",
    unit: "connections",
  }),
  maxUnauthenticated: setting({
    flag: "--max-unauthenticated",
    env: "SANDGATE_MAX_UNAUTHENTICATED",
    type: int(CONNECTION_BOUNDS_RANGES.maxUnauthenticated),
    default: DEFAULT_CONNECTION_BOUNDS.maxUnauthenticated,
    help: "connections not yet authenticated per listener; past it the oldest is closed to admit the new one",
    unit: "connections",
  }),
  proxyConnections: setting({
    flag: "--proxy-connections",
    env: "SANDGATE_PROXY_CONNECTIONS",
    type: int(PROXY_BOUNDS_RANGE.max),
    default: DEFAULT_PROXY_BOUNDS.max,
    help: "connections a sandbox's workload may hold open to its proxy; past it a new one is refused at once and counted in its audit trail",
    unit: "connections",
  }),
  originCa: setting<OriginCa | null>({
    flag: "--origin-ca",
    env: "SANDGATE_ORIGIN_CA",
    type: {
      schema: z.custom<OriginCa | null>((v) => v === null || (typeof v === "object" && typeof (v as OriginCa).path === "string")),
      arg: "<file>",
      allowed: "a PEM file",
      parse: (what, raw) => readOriginCa(what, raw),
      show: (v) => (v === null ? "none" : v.path),
      args: (v) => (v === null ? [] : [v.path]),
    },
    default: null,
    defaultText: "none",
    help: "a PEM file of CAs the supervisors trust for origins besides the system roots (an origin on a private CA); a sandbox takes them when it starts, so running ones need `sandbox restart`",
    unit: "file",
  }),
  portForwardMaxPerSandbox: setting({ flag: null, env: "SANDGATE_PORT_FORWARD_MAX_PER_SANDBOX", type: int({ min: 1, max: 100_000 }), default: 32, help: "forwarded connections (sandbox port-forward) open at once into one sandbox; past it a new one is refused (503)", unit: "connections" }),
  portForwardMax: setting({ flag: null, env: "SANDGATE_PORT_FORWARD_MAX", type: int({ min: 1, max: 100_000 }), default: 256, help: "forwarded connections open at once through the gateway; past it a new one is refused (503)", unit: "connections" }),
  cpMaxBytes: setting({ flag: null, env: "SANDGATE_CP_MAX_BYTES", type: transferSize({ min: MIB, max: 16 * TIB }), default: 16 * GIB, help: "bytes one `sandbox cp` transfer may move (the tar stream, or one file)", unit: "bytes" }),
  cpMaxEntries: setting({ flag: null, env: "SANDGATE_CP_MAX_ENTRIES", type: int({ min: 1, max: 100_000_000 }), default: 1_000_000, help: "members one transfer may hold", unit: "entries" }),
  cpSymlinkMemory: setting({ flag: null, env: "SANDGATE_CP_SYMLINK_MEMORY", type: transferSize({ min: 64 * KIB, max: 4 * GIB }), default: 16 * MIB, help: "bytes of symlink names one upload may make the gateway remember", unit: "bytes" }),
  cpConcurrency: setting({ flag: null, env: "SANDGATE_CP_CONCURRENCY", type: int({ min: 1, max: 1024 }), default: 8, help: "transfers at once, over all sandboxes", unit: "transfers" }),
  cpPerSandbox: setting({ flag: null, env: "SANDGATE_CP_PER_SANDBOX", type: int({ min: 1, max: 1024 }), default: 2, help: "transfers at once, per sandbox", unit: "transfers" }),
  cpIdleTimeoutS: setting({ flag: null, env: "SANDGATE_CP_IDLE_TIMEOUT", type: seconds({ minS: 1, maxS: 86_400 }), default: 60, help: "a transfer with no bytes moving in either direction for this long is ended", unit: "duration" }),
} as const;

export type SettingName = keyof typeof SETTINGS;
type ValueOf<S> = S extends Setting<infer T> ? T : never;
/** The resolved settings: one value for every setting of the table. */
export type GatewaySettings = { -readonly [K in SettingName]: ValueOf<(typeof SETTINGS)[K]> };

export const SETTING_NAMES = Object.keys(SETTINGS) as SettingName[];
const entry = (name: SettingName): Setting<unknown> => SETTINGS[name] as unknown as Setting<unknown>;

/** Every default, as the gateway's modules fall back to them. */
export const DEFAULT_SETTINGS: GatewaySettings = Object.fromEntries(SETTING_NAMES.map((n) => [n, entry(n).default])) as GatewaySettings;

/** The resolved settings' schema: each value's type and range. */
export const GatewaySettingsSchema = z.strictObject(Object.fromEntries(SETTING_NAMES.map((n) => [n, entry(n).type.schema])));

/** The raw flag values commander collected (a string, or strings for a repeatable one; undefined when not given). */
export type SettingFlags = Partial<Record<SettingName, string | string[] | undefined>>;

/**
 * Each setting from its flag, else its environment variable (unset or empty: not given),
 * else its default; whichever is used is parsed, and named in the one-line SettingError
 * a bad value throws. The result is checked against GatewaySettingsSchema.
 */
export function resolveSettings(flags: SettingFlags, env: NodeJS.ProcessEnv): GatewaySettings {
  const out: Record<string, unknown> = {};
  for (const name of SETTING_NAMES) {
    const s = entry(name);
    const flag = s.flag === null ? undefined : flags[name];
    const given = Array.isArray(flag) ? (flag.length > 0 ? flag : undefined) : flag;
    const fromEnv = env[s.env];
    if (given !== undefined) {
      const values = Array.isArray(given) ? given.map((v) => s.type.parse(s.flag!, v)) : [s.type.parse(s.flag!, given)];
      out[name] = s.type.repeatable ? values.flat() : values[0];
    } else if (fromEnv !== undefined && fromEnv !== "") {
      out[name] = s.type.parse(s.env, fromEnv);
    } else {
      out[name] = s.default;
    }
  }
  const checked = GatewaySettingsSchema.safeParse(out);
  if (!checked.success) throw new SettingError(`settings out of range: ${checked.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`);
  return out as GatewaySettings;
}

/** The flags that give these settings again (environment-only ones are inherited): a detached gateway's arguments. */
export function settingsArgs(s: GatewaySettings): string[] {
  return SETTING_NAMES.flatMap((name) => {
    const e = entry(name);
    if (e.flag === null) return [];
    const values = e.type.args(s[name]);
    return e.type.repeatable ? values.flatMap((v) => [e.flag!, v]) : values.length === 0 ? [] : [e.flag, ...values];
  });
}

/** Each setting as a person reads it, by name (`gateway status`). */
export function settingsView(s: GatewaySettings): Record<string, string> {
  return Object.fromEntries(SETTING_NAMES.map((name) => [name, entry(name).type.show(s[name])]));
}

const defaultText = (s: Setting<unknown>): string => s.defaultText ?? s.type.show(s.default);

/** The line `gateway start --help` shows for a setting: its help, range, variable and default. */
export function settingHelp(name: SettingName): string {
  const s = entry(name);
  const allowed = s.type.allowed === "" || s.type.repeatable ? "" : `${s.type.allowed}; `;
  return `${s.help} (${allowed}env ${s.env}; default${s.defaultText === undefined ? "" : ":"} ${defaultText(s)})`;
}

/** The markdown table of docs/configuration.md. */
export function settingsDocTable(): string {
  const cell = (t: string): string => t.replace(/\|/g, "\\|");
  const rows = SETTING_NAMES.map((name) => {
    const s = entry(name);
    return `| \`${name}\` | ${s.flag === null ? "(environment only)" : `\`${s.flag} ${s.type.arg}\``} | \`${s.env}\` | ${cell(s.type.allowed)} | ${cell(defaultText(s))} | ${s.unit} | ${cell(s.help)} |`;
  });
  return ["| Setting | Flag | Environment | Allowed | Default | Unit | What it does |", "| --- | --- | --- | --- | --- | --- | --- |", ...rows].join("\n");
}
