// The origin CAs (`gateway start --origin-ca FILE`, SANDGATE_ORIGIN_CA; issue 31, item 12):
// read and checked at start, a bad file a one-line CA problem (exit 2) before anything starts,
// shown by `gateway status` and in `gateway start --help`.
import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ORIGIN_CA_MAX_BYTES, readOriginCa } from "../../../src/util/origin-ca.js";
import { issueSandboxCa } from "../../../src/util/x509.js";
import { CLI_TEST_TIMEOUT_MS, cli } from "../../support/cli-runner.js";
import { startTestGateway } from "../../support/gateway-fixture.js";
import { MemoryDriver } from "../../support/memory-driver.js";

let dir: string;
let good: string;
let pems: string[];
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "sg-origin-ca-"));
  pems = [(await issueSandboxCa("origin one")).certPem, (await issueSandboxCa("origin two")).certPem];
  good = join(dir, "good.pem");
  writeFileSync(good, `# our private CAs\n${pems.join("\n")}`);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const file = (name: string, text: string): string => {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
};

describe("readOriginCa", () => {
  it("takes every certificate of a PEM file (text around them left out), with their subjects", () => {
    const ca = readOriginCa("--origin-ca", good);
    expect(ca.subjects).toEqual([expect.stringContaining("origin one"), expect.stringContaining("origin two")]);
    expect(ca.pem).not.toContain("# our private CAs");
    expect(ca.pem.match(/BEGIN CERTIFICATE/g)).toHaveLength(2);
  });

  it("refuses, naming the setting, the file and the problem: missing, no certificate, a broken one, too large", () => {
    expect(() => readOriginCa("SANDGATE_ORIGIN_CA", join(dir, "nope.pem"))).toThrow(`SANDGATE_ORIGIN_CA: cannot read the CA file ${join(dir, "nope.pem")} (ENOENT)`);
    const key = file("key.pem", "-----BEGIN PRIVATE KEY-----\nabc\n-----END PRIVATE KEY-----\n");
    expect(() => readOriginCa("--origin-ca", key)).toThrow(`--origin-ca: ${key} holds no PEM certificate (expected -----BEGIN CERTIFICATE----- blocks)`);
    const broken = file("broken.pem", `${pems[0]}-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n`);
    expect(() => readOriginCa("--origin-ca", broken)).toThrow(new RegExp(`^--origin-ca: certificate 2 of ${broken} is not a valid X.509 certificate`));
    const big = file("big.pem", "x".repeat(ORIGIN_CA_MAX_BYTES + 1));
    expect(() => readOriginCa("--origin-ca", big)).toThrow(`--origin-ca: ${big} is ${ORIGIN_CA_MAX_BYTES + 1} bytes; a CA file is at most ${ORIGIN_CA_MAX_BYTES} bytes`);
  });
});

describe("gateway start and status", () => {
  it("a bad CA file is a CA problem: exit 2, one line naming it, not the Docker daemon; nothing starts", { timeout: CLI_TEST_TIMEOUT_MS }, async () => {
    const home = mkdtempSync(join(tmpdir(), "sg-home-ca-"));
    try {
      const notPem = file("not.pem", "hello\n");
      const env = await cli(["--home", home, "gateway", "start"], { SANDGATE_ORIGIN_CA: notPem });
      expect([env.code, env.stderr]).toEqual([2, `sandgate: SANDGATE_ORIGIN_CA: ${notPem} holds no PEM certificate (expected -----BEGIN CERTIFICATE----- blocks)\n`]);
      const flag = await cli(["--home", home, "gateway", "start", "--origin-ca", join(dir, "missing.pem")]);
      expect([flag.code, flag.stderr]).toEqual([2, `sandgate: --origin-ca: cannot read the CA file ${join(dir, "missing.pem")} (ENOENT)\n`]);
      expect(() => statSync(join(home, "gateway.json"))).toThrow();
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });

  it("--help names the flag, its variable and that running sandboxes need a restart", async () => {
    const help = await cli(["gateway", "start", "--help"]);
    expect(help.stdout.replace(/\s+/g, " ")).toMatch(/--origin-ca <file> .*running ones need `sandbox restart` \(a PEM file; env SANDGATE_ORIGIN_CA; default: none\)/);
  });

  it("gateway status shows the file and its certificates' subjects; null without one", async () => {
    const ca = readOriginCa("--origin-ca", good);
    const t = await startTestGateway(new MemoryDriver(), { originCa: { path: ca.path, subjects: ca.subjects } });
    try {
      expect((await t.api("GET", "/v1/status")).body.originCa).toEqual({ path: good, certificates: 2, subjects: ca.subjects });
      const table = await cli(["--home", t.home.dir, "gateway", "status"]);
      expect(table.stdout).toMatch(new RegExp(`originCa\\.path\\s+${good.replaceAll("/", "\\/")}`));
    } finally {
      await t.close();
    }
    const plain = await startTestGateway(new MemoryDriver());
    try {
      expect((await plain.api("GET", "/v1/status")).body.originCa).toBeNull();
    } finally {
      await plain.close();
    }
  });
});
