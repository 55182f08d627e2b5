// Secrets at rest and through the API and CLI: encrypted in state.db under a key
// kept apart from it (mode 0600), bound to their name, never in an answer, a list,
// the database file or an error. Real gateway, real SQLite file, real CLI.
import { readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { SECRETS_KEY_FILE, SecretStore, ensureSecretsKey } from "../../../src/gateway/secrets/secret-store.js";
import { CLI_TEST_TIMEOUT_MS, cli } from "../../support/cli-runner.js";
import { MemoryDriver } from "../../support/memory-driver.js";
import { startTestGateway, type TestGateway } from "../../support/gateway-fixture.js";

// Spawn-heavy: see CLI_TEST_TIMEOUT_MS.
vi.setConfig({ testTimeout: CLI_TEST_TIMEOUT_MS });

const VALUE = "ghp_SECRET-value-7f3a9c1e-do-not-leak";
let t: TestGateway;

beforeEach(async () => {
  t = await startTestGateway(new MemoryDriver());
});
afterEach(async () => {
  await t.close();
});

/** Every byte the gateway keeps on disk, as one string. */
function onDisk(): string {
  t.gw.sqlite!.db.pragma("wal_checkpoint(TRUNCATE)");
  return ["state.db", "state.db-wal"].map((f) => {
    try {
      return readFileSync(join(t.home.dir, f)).toString("latin1");
    } catch {
      return "";
    }
  }).join("");
}

describe("secrets through the API", () => {
  it("set, list, replace and delete: the value is never answered, never stored in clear", async () => {
    const set = await t.api("PUT", "/v1/secrets/github", { value: VALUE });
    expect(set).toMatchObject({ status: 200, body: { name: "github", version: 1, bytes: VALUE.length } });
    expect(JSON.stringify(set.body)).not.toContain(VALUE);
    expect((await t.api("PUT", "/v1/secrets/github", { valueBase64: Buffer.from(VALUE + "2").toString("base64") })).body.version).toBe(2);
    const list = await t.api("GET", "/v1/secrets");
    expect(list.body.secrets).toMatchObject([{ name: "github", version: 2, bytes: VALUE.length + 1 }]);
    expect(JSON.stringify(list.body)).not.toContain(VALUE);
    expect(onDisk()).not.toContain(VALUE);
    expect(statSync(join(t.home.dir, SECRETS_KEY_FILE)).mode & 0o777).toBe(0o600);
    expect((await t.api("DELETE", "/v1/secrets/github")).body).toMatchObject({ name: "github", deleted: true });
    expect((await t.api("DELETE", "/v1/secrets/github")).status).toBe(404);
    expect((await t.api("GET", "/v1/secrets")).body.secrets).toEqual([]);
  });

  it.each([
    ["a bad name", "/v1/secrets/Bad%20Name", { value: "x" }, /invalid secret name/],
    ["no value", "/v1/secrets/ok", {}, /exactly one of value and valueBase64/],
    ["both values", "/v1/secrets/ok", { value: "x", valueBase64: "eA==" }, /exactly one of value and valueBase64/],
    ["too large", "/v1/secrets/ok", { value: "x".repeat(64 * 1024 + 1) }, /value/],
    ["an unknown field", "/v1/secrets/ok", { value: "x", extra: 1 }, /extra/],
  ])("%s: 400 naming the problem, nothing stored, the value not echoed", async (_n, path, body, message) => {
    const r = await t.api("PUT", path, body);
    expect(r.status).toBe(400);
    expect(r.body.error.message).toMatch(message);
    expect(JSON.stringify(r.body)).not.toContain("x".repeat(100));
    expect((await t.api("GET", "/v1/secrets")).body.secrets).toEqual([]);
  });
});

describe("the secret store", () => {
  it("decrypts with its key only, and a ciphertext moved to another name does not decrypt", async () => {
    const s = await SecretStore.open(t.gw.store, ensureSecretsKey(t.home.dir));
    await s.set("a", Buffer.from(VALUE));
    expect(s.reveal("a")?.toString()).toBe(VALUE);
    t.gw.sqlite!.db.prepare(`INSERT INTO secrets SELECT 'b', version, nonce, ciphertext, tag, created_at, updated_at FROM secrets WHERE name = 'a'`).run();
    // Written behind its back: unknown to it until it is opened again, then refused.
    expect(s.reveal("b")).toBeNull();
    const again = await SecretStore.open(t.gw.store, ensureSecretsKey(t.home.dir));
    expect(() => again.reveal("b")).toThrow(/cannot be decrypted/);
    const other = await SecretStore.open(t.gw.store, Buffer.alloc(32, 7));
    expect(() => other.reveal("a")).toThrow(/cannot be decrypted/);
    expect(() => other.reveal("a")).not.toThrow(new RegExp(VALUE));
  });

  it("a damaged key file is one clear error", () => {
    writeFileSync(join(t.home.dir, SECRETS_KEY_FILE), "c2hvcnQ=\n");
    expect(() => ensureSecretsKey(t.home.dir)).toThrow(/does not hold a 32-byte key \(it holds 5 bytes\)/);
  });
});

describe("sandgate secret", () => {
  it("set from stdin and from a file, list, delete; the value never in argv or output", async () => {
    const home = ["--home", t.home.dir];
    const set = await cli([...home, "secret", "set", "github"], {}, VALUE + "\n");
    expect(set.code, set.stderr).toBe(0);
    expect(set.stdout).toBe("secret github: version 1 (37 bytes)\n");
    const file = join(t.home.dir, "v.txt");
    writeFileSync(file, "from-file");
    expect((await cli([...home, "secret", "set", "other", "--from-file", file])).stdout).toBe("secret other: version 1 (9 bytes)\n");
    const list = await cli([...home, "secret", "list"]);
    expect(list.stdout).toMatch(/^NAME\s+VERSION\s+BYTES/);
    expect(list.stdout).toMatch(/github\s+1\s+37/);
    expect(list.stdout + list.stderr).not.toContain(VALUE);
    const empty = await cli([...home, "secret", "set", "x"], {}, "");
    expect(empty).toMatchObject({ code: 2, stderr: "sandgate: the secret value is empty\n" });
    expect((await cli([...home, "secret", "delete", "github"])).stdout).toBe("secret github deleted\n");
    expect((await cli([...home, "secret", "delete", "github"])).stdout).toBe("secret github already deleted (there is no such secret)\n");
  });
});

describe("where secrets are bound", () => {
  const POLICY = `version: 1
network:
  rules:
    - name: gh
      endpoints:
        - host: api.github.com
          port: 443
          protocol: https
          credentials:
            - secret: github
              paths: ["/repos/**"]
            - header: X-Api-Key
              value: "{{secret:apikey}}"
`;

  it("list, set and the CLI show the sandboxes and bindings, never a value; set answers who it was sent to", async () => {
    expect((await t.api("POST", "/v1/sandboxes", { name: "agent", policy: POLICY })).status).toBe(201);
    const set = await t.api("PUT", "/v1/secrets/github", { value: VALUE, wait: 1 });
    expect(set.body).toMatchObject({
      usedBy: ["agent"],
      bindings: [{ sandbox: "agent", rule: "gh", host: "api.github.com", ports: [443], paths: ["/repos/**"], form: "placeholder" }],
      // The in-memory driver runs no supervisor: nothing to send to, nothing pending.
      pushed: [],
      acknowledged: [],
      pending: [],
    });
    const list = await t.api("GET", "/v1/secrets");
    expect(list.body.secrets[0]).toMatchObject({ name: "github", usedBy: ["agent"] });
    expect(JSON.stringify(list.body)).not.toContain(VALUE);
    const home = ["--home", t.home.dir];
    await cli([...home, "secret", "set", "apikey", "--wait", "--timeout", "1"], {}, "k");
    const shown = await cli([...home, "secret", "list"]);
    expect(shown.stdout).toMatch(/apikey\s+1\s+1\s+\S+ \S+\s+agent\s+agent:api\.github\.com:443\(header\)/);
    expect(shown.stdout).toMatch(/github\s+1\s+37\s+\S+ \S+\s+agent\s+agent:api\.github\.com:443\/repos\/\*\*/);
    expect(shown.stdout + shown.stderr).not.toContain(VALUE);
  });

  it("a bad wait is a 400 naming it, nothing stored", async () => {
    const r = await t.api("PUT", "/v1/secrets/github", { value: VALUE, wait: 301 });
    expect(r.status).toBe(400);
    expect(r.body.error.message).toMatch(/wait: expected seconds 0-300/);
    expect(JSON.stringify(r.body)).not.toContain(VALUE);
    expect((await t.api("GET", "/v1/secrets")).body.secrets).toEqual([]);
  });
});
