// The settings table (src/gateway/settings.ts; issue 32, item 3): every setting
// round-trips from its flag, its environment variable and its default (flag >
// environment > default); a bad value is one line naming the flag or variable, the value
// and what is allowed; the flags a detached gateway is re-run with give the same
// settings; and docs/configuration.md's table is the one the schema makes.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_SETTINGS, GatewaySettingsSchema, SETTINGS, SETTING_NAMES, resolveSettings, settingsArgs, settingsDocTable, settingsView, type SettingFlags, type SettingName } from "../../../src/gateway/settings.js";
import { issueSandboxCa } from "../../../src/util/x509.js";
import { SettingError } from "../../../src/util/settings.js";
import { CONFIGURATION_DOC, withTable } from "../../../scripts/settings-docs.js";

const dir = mkdtempSync(join(tmpdir(), "sg-settings-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const caFile = join(dir, "ca.pem");
beforeAll(async () => writeFileSync(caFile, (await issueSandboxCa("settings test")).certPem));

/**
 * For every setting: two good values (neither the default) and what each parses to, and a
 * bad one. A new setting fails here until it is given its cases.
 */
const CASES: Record<SettingName, { good: [string, unknown][]; bad: string }> = {
  listen: { good: [["unix:///tmp/a.sock", [{ kind: "unix", path: "/tmp/a.sock" }]], ["tcp://127.0.0.1:7000", [{ kind: "tcp", host: "127.0.0.1", port: 7000 }]]], bad: "http://x" },
  store: {
    good: [
      ["postgres://sandgate@db.example/sg", { kind: "postgres", url: "postgres://sandgate@db.example/sg" }],
      ["postgresql://u@localhost:5433/x?host=/run/pg", { kind: "postgres", url: "postgresql://u@localhost:5433/x?host=/run/pg" }],
    ],
    bad: "mysql://db.example/sg",
  },
  storeConnections: { good: [["1", 1], ["50", 50]], bad: "0" },
  hostName: { good: [["gw-a", "gw-a"], ["host.example_2", "host.example_2"]], bad: "-bad name" },
  logLevel: { good: [["debug", "debug"], ["warn", "warn"]], bad: "loud" },
  recoveryDeadlineS: { good: [["90s", 90], ["2m", 120]], bad: "abc" },
  boundaryDeadlineS: { good: [["45", 45], ["1m", 60]], bad: "-5" },
  uidBase: { good: [["3000000", 3_000_000], ["100000", 100_000]], bad: "12" },
  resolvers: { good: [["192.0.2.1", ["192.0.2.1:53"]], ["192.0.2.2:5353", ["192.0.2.2:5353"]]], bad: "127.0.0.1" },
  auditRate: { good: [["10", 10], ["1000", 1000]], bad: "lots" },
  auditKeep: { good: [["500", 500], ["20000", 20_000]], bad: "5" },
  auditMaxAgeS: { good: [["12h", 43_200], ["30d", 30 * 86_400]], bad: "forever" },
  supervisorCpus: { good: [["0.5", 0.5], ["2", 2]], bad: "0" },
  supervisorMemoryMb: { good: [["256", 256], ["64", 64]], bad: "lots" },
  containerLogSize: { good: [["512K", 512 * 1024], ["1M", 1024 ** 2]], bad: "1K" },
  containerLogFiles: { good: [["1", 1], ["10", 10]], bad: "0" },
  logStreams: { good: [["8", 8], ["100", 100]], bad: "0" },
  detachedExecs: { good: [["4", 4], ["64", 64]], bad: "10001" },
  launchConcurrency: { good: [["1", 1], ["16", 16]], bad: "65" },
  proposalsPending: { good: [["1", 1], ["100", 100]], bad: "0" },
  proposalsKept: { good: [["0", 0], ["10", 10]], bad: "-1" },
  sandboxSubnets: { good: [["10.200.0.0/16", "10.200.0.0/16"], ["172.30.0.0/20", "172.30.0.0/20"]], bad: "10.0.0.0/30" },
  headerTimeoutS: { good: [["3s", 3], ["1m", 60]], bad: "500ms" },
  idleTimeoutS: { good: [["5s", 5], ["30m", 1800]], bad: "2h" },
  maxConnections: { good: [["10", 10], ["5000", 5000]], bad: "0" },
  maxUnauthenticated: { good: [["4", 4], ["1000", 1000]], bad: "many" },
  proxyConnections: { good: [["64", 64], ["1000", 1000]], bad: "100001" },
  originCa: { good: [], bad: join(dir, "missing.pem") },
  portForwardMaxPerSandbox: { good: [["4", 4], ["100", 100]], bad: "0" },
  portForwardMax: { good: [["9", 9], ["1000", 1000]], bad: "lots" },
  cpMaxBytes: { good: [["2G", 2 * 1024 ** 3], ["1T", 1024 ** 4]], bad: "1K" },
  cpMaxEntries: { good: [["5000", 5000], ["1", 1]], bad: "0" },
  cpSymlinkMemory: { good: [["1MiB", 1024 ** 2], ["64K", 64 * 1024]], bad: "lots" },
  cpConcurrency: { good: [["3", 3], ["1024", 1024]], bad: "1.5" },
  cpPerSandbox: { good: [["1", 1], ["5", 5]], bad: "-1" },
  cpIdleTimeoutS: { good: [["90s", 90], ["1h", 3600]], bad: "never" },
};

const flagOf = (name: SettingName, raw: string): SettingFlags => ({ [name]: SETTINGS[name].type.repeatable ? [raw] : raw });

describe("the settings table", () => {
  it("declares every setting once: its own flag and variable, a default its own schema accepts, a help line", () => {
    expect(Object.keys(CASES).sort()).toEqual([...SETTING_NAMES].sort());
    const flags = SETTING_NAMES.map((n) => SETTINGS[n].flag).filter((f) => f !== null);
    const envs = SETTING_NAMES.map((n) => SETTINGS[n].env);
    expect(new Set(flags).size).toBe(flags.length);
    expect(new Set(envs).size).toBe(envs.length);
    for (const n of SETTING_NAMES) {
      expect(SETTINGS[n].help, n).toMatch(/^\S.*\S$/);
      expect(SETTINGS[n].help, n).not.toContain("\n");
    }
    expect(GatewaySettingsSchema.safeParse(DEFAULT_SETTINGS).success).toBe(true);
    expect(resolveSettings({}, {})).toEqual(DEFAULT_SETTINGS);
  });

  it.each(SETTING_NAMES.filter((n) => n !== "originCa"))("%s: flag > environment > default; an empty variable is not given", (name) => {
    const s = SETTINGS[name];
    const [[a, va], [b, vb]] = CASES[name].good as [[string, unknown], [string, unknown]];
    expect(resolveSettings({}, {})[name]).toEqual(s.default);
    expect(resolveSettings({}, { [s.env]: "" })[name]).toEqual(s.default);
    expect(resolveSettings({}, { [s.env]: a })[name]).toEqual(va);
    if (s.flag !== null) {
      expect(resolveSettings(flagOf(name, b), {})[name]).toEqual(vb);
      expect(resolveSettings(flagOf(name, b), { [s.env]: a })[name]).toEqual(vb);
    } else {
      // No flag: a flag value given anyway is not read.
      expect(resolveSettings(flagOf(name, b), { [s.env]: a })[name]).toEqual(va);
    }
  });

  it("originCa: a PEM file from the flag or the variable; none by default", () => {
    expect(resolveSettings({}, {}).originCa).toBeNull();
    expect(resolveSettings({}, { SANDGATE_ORIGIN_CA: caFile }).originCa).toMatchObject({ path: caFile, subjects: [expect.stringContaining("settings test")] });
    expect(resolveSettings({ originCa: caFile }, { SANDGATE_ORIGIN_CA: join(dir, "missing.pem") }).originCa?.path).toBe(caFile);
  });

  it.each(SETTING_NAMES)("%s: a bad value is one line naming the flag or variable and the value", (name) => {
    const s = SETTINGS[name];
    const bad = CASES[name].bad;
    const tries: [SettingFlags, NodeJS.ProcessEnv, string][] = [[{}, { [s.env]: bad }, s.env]];
    if (s.flag !== null) tries.push([flagOf(name, bad), { [s.env]: CASES[name].good[0]?.[0] ?? "" }, s.flag]);
    for (const [flags, env, named] of tries) {
      let message = "";
      try {
        resolveSettings(flags, env);
      } catch (err) {
        expect(err).toBeInstanceOf(SettingError);
        message = (err as Error).message;
      }
      expect(message, `${named}=${bad}`).toMatch(new RegExp(`^${named.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}\\b`));
      expect(message).toContain(bad);
      expect(message).not.toContain("\n");
    }
  });

  it("names the range in a bad number's error", () => {
    expect(() => resolveSettings({}, { SANDGATE_LAUNCH_CONCURRENCY: "lots" })).toThrow('SANDGATE_LAUNCH_CONCURRENCY must be a whole number from 1 to 64; got "lots"');
    expect(() => resolveSettings({ launchConcurrency: "0" }, {})).toThrow('--launch-concurrency must be a whole number from 1 to 64; got "0"');
    expect(() => resolveSettings({}, { SANDGATE_AUDIT_MAX_AGE: "1m" })).toThrow(/^SANDGATE_AUDIT_MAX_AGE must be a duration from 1 h to 366 d .*; got "1m"$/);
    expect(() => resolveSettings({}, { SANDGATE_CONTAINER_LOG_SIZE: "2G" })).toThrow(/^SANDGATE_CONTAINER_LOG_SIZE must be a size from 64 KiB to 1 GiB .*; got "2G"$/);
    expect(() => resolveSettings({}, { SANDGATE_UID_BASE: "12" })).toThrow(/^SANDGATE_UID_BASE: invalid uid base 12: expected an integer from 65536 to 2147483646$/);
  });

  it("the flags a detached gateway is re-run with give the same settings, with no environment", () => {
    const env: NodeJS.ProcessEnv = { SANDGATE_ORIGIN_CA: caFile };
    for (const n of SETTING_NAMES) if (n !== "originCa") env[SETTINGS[n].env] = CASES[n].good[0]![0];
    const given = resolveSettings({}, env);
    const byFlag = new Map(SETTING_NAMES.filter((n) => SETTINGS[n].flag !== null).map((n) => [SETTINGS[n].flag!, n]));
    const args = settingsArgs(given);
    const flags: Record<string, string | string[]> = {};
    for (let i = 0; i < args.length; i += 2) {
      const name = byFlag.get(args[i] as `--${string}`)!;
      expect(name, args[i]).toBeDefined();
      flags[name] = SETTINGS[name].type.repeatable ? [...((flags[name] as string[] | undefined) ?? []), args[i + 1]!] : args[i + 1]!;
    }
    const envOnly = Object.fromEntries(SETTING_NAMES.filter((n) => SETTINGS[n].flag === null).map((n) => [SETTINGS[n].env, env[SETTINGS[n].env]]));
    // The store's URL is never an argument (it may carry a password): the child gets it in its environment.
    expect(args).not.toContain("--store");
    envOnly.SANDGATE_STORE = env.SANDGATE_STORE;
    expect(resolveSettings(flags, envOnly)).toEqual(given);
  });

  it("store: a password in the URL is shown as *** in the status view and in errors, and never in the detached gateway's arguments", () => {
    const url = "postgres://sandgate:hunter2@db.example:5432/sg";
    const s = resolveSettings({ store: url }, {});
    expect(s.store).toEqual({ kind: "postgres", url });
    expect(settingsView(s).store).toBe("postgres://sandgate:***@db.example:5432/sg");
    expect(settingsArgs(s).join(" ")).not.toContain("hunter2");
    expect(() => resolveSettings({ store: "mysql://root:hunter2@db.example/x" }, {})).toThrow(/^--store: "mysql:\/\/root:\*\*\*@db.example\/x" is not a store/);
    expect(() => resolveSettings({}, { SANDGATE_STORE: "postgres://u:hunter2@/db" })).toThrow(/^SANDGATE_STORE: "postgres:…" is not a store; allowed: /);
    expect(() => resolveSettings({}, { SANDGATE_STORE: "postgres:///db" })).toThrow(/^SANDGATE_STORE: "postgres:\/\/\/db" names no host/);
    expect(resolveSettings({}, { SANDGATE_STORE: "sqlite" }).store).toEqual({ kind: "sqlite" });
  });

  it("gateway status's view: every setting by name, as text", () => {
    const view = settingsView(DEFAULT_SETTINGS);
    expect(Object.keys(view)).toEqual(SETTING_NAMES);
    expect(view).toMatchObject({ launchConcurrency: "4", auditMaxAgeS: "7 d", containerLogSize: "10 MiB", originCa: "none", listen: "none", logLevel: "info" });
  });

  it("docs/configuration.md's table is the one the schema makes (npx tsx scripts/settings-docs.ts writes it)", () => {
    const doc = readFileSync(CONFIGURATION_DOC, "utf8");
    expect(doc).toBe(withTable(doc));
    const table = settingsDocTable();
    for (const n of SETTING_NAMES) {
      expect(table).toContain(`\`${SETTINGS[n].env}\``);
      if (SETTINGS[n].flag !== null) expect(table).toContain(`\`${SETTINGS[n].flag} `);
    }
  });
});
