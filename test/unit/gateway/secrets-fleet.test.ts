// Secrets on a store several gateways share (docs/fleet.md): a secret one gateway sets or
// deletes reaches every other gateway's SecretStore (the store's onSecretChange), which
// tells its listeners (the gateway pushes it to its supervisors), and a gateway that missed
// notices (its LISTEN connection was re-established) reads every secret again. Real parts:
// a throwaway PostgreSQL cluster; the SQLite store where a store is given the notices by hand.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SecretStore, ensureSecretsKey } from "../../../src/gateway/secrets/secret-store.js";
import type { Store } from "../../../src/store/contract.js";
import { PostgresStore } from "../../../src/store/postgres/postgres-store.js";
import { SqliteStore } from "../../../src/store/store.js";
import { eventually, startTestGateway } from "../../support/gateway-fixture.js";
import { MemoryDriver } from "../../support/memory-driver.js";
import { pgQuery, startPostgres, type PostgresCluster } from "../../support/postgres.js";

const key = randomBytes(32);
const text = (s: SecretStore, name: string): string | null => s.reveal(name)?.toString() ?? null;

let pg: PostgresCluster;
beforeAll(() => {
  pg = startPostgres();
});
afterAll(() => pg?.stop());

describe("secrets across gateways", () => {
  it("on PostgreSQL: what one gateway sets, sets again and deletes reaches the other, whose listeners hear of each", async () => {
    const url = pg.createDatabase("secrets_fleet");
    const [sa, sb] = await Promise.all([PostgresStore.open(url), PostgresStore.open(url)]);
    try {
      const [a, b] = await Promise.all([SecretStore.open(sa, key), SecretStore.open(sb, key)]);
      const heard: string[] = [];
      b.onChange((n) => heard.push(n));
      await a.set("tok", Buffer.from("v1"));
      expect(text(a, "tok")).toBe("v1");
      await eventually(() => (text(b, "tok") === "v1" ? true : undefined), 10_000, "v1 on b");
      await a.set("tok", Buffer.from("v2"));
      await eventually(() => (text(b, "tok") === "v2" ? true : undefined), 10_000, "v2 on b");
      await a.delete("tok");
      await eventually(() => (text(b, "tok") === null ? true : undefined), 10_000, "tok gone on b");
      expect(heard).toEqual(["tok", "tok", "tok"]);
      a.close();
      b.close();

      // The LISTEN connection lost (PostgreSQL restarted, a proxy's timeout): once it is back,
      // the store says that any secret may have changed meanwhile.
      const notices: (string | null)[] = [];
      sb.onSecretChange((n) => notices.push(n));
      await pgQuery(url, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN%' AND pid <> pg_backend_pid()`);
      await eventually(() => (notices.includes(null) ? true : undefined), 20_000, "the notice after re-listening");
    } finally {
      await Promise.all([sa.close(), sb.close()]);
    }
  });
});

describe("a gateway on a fleet's store", () => {
  it("hears of a secret another gateway sets and pushes it to its own sandboxes that use it (logged by name, never the value)", async () => {
    const url = pg.createDatabase("secrets_gateway");
    const lines: string[] = [];
    const t = await startTestGateway(new MemoryDriver(), { store: { kind: "postgres", url }, hostName: "h1", logSink: (l) => lines.push(l) });
    const other = await PostgresStore.open(url);
    try {
      const elsewhere = await SecretStore.open(other, ensureSecretsKey(t.home.dir));
      await elsewhere.set("tok", Buffer.from("value-from-h2"));
      const line = await eventually(() => lines.find((l) => l.includes("a secret changed through another gateway")), 10_000, "the push logged");
      expect(JSON.parse(line)).toMatchObject({ secret: "tok", pushed: [] });
      expect(lines.join("\n")).not.toContain("value-from-h2");
      elsewhere.close();
    } finally {
      await other.close();
      await t.close();
    }
  });
});

describe("a store's notices, by hand", () => {
  it("null (notices were missed) reads every secret again: changed and deleted ones are told, unchanged ones are not", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sg-secrets-"));
    const store = SqliteStore.open(join(dir, "state.db"));
    let notify: (name: string | null) => void = () => undefined;
    // The SQLite store with a notice channel the test drives (its own has no other writer).
    const noticed = new Proxy(store, {
      get(target, prop) {
        if (prop === "onSecretChange") return (l: (name: string | null) => void) => ((notify = l), () => undefined);
        const own = Reflect.get(target, prop, target) as unknown;
        return typeof own === "function" ? (own as (...a: unknown[]) => unknown).bind(target) : own;
      },
    }) as Store;
    try {
      const writer = await SecretStore.open(store, key);
      await writer.set("kept", Buffer.from("same"));
      await writer.set("changed", Buffer.from("old"));
      await writer.set("gone", Buffer.from("x"));
      const b = await SecretStore.open(noticed, key);
      const heard: string[] = [];
      b.onChange((n) => heard.push(n));
      // Another gateway's writes, whose notices b misses.
      await writer.set("changed", Buffer.from("new"));
      await writer.delete("gone");
      await writer.set("added", Buffer.from("fresh"));
      expect([text(b, "changed"), text(b, "gone"), text(b, "added")]).toEqual(["old", "x", null]);
      notify(null);
      await eventually(() => (heard.length === 3 ? true : undefined), 10_000, "three changes heard");
      expect(heard.sort()).toEqual(["added", "changed", "gone"]);
      expect([text(b, "kept"), text(b, "changed"), text(b, "gone"), text(b, "added")]).toEqual(["same", "new", null, "fresh"]);
      // A notice of a write it already holds tells nobody.
      notify("changed");
      notify(null);
      await writer.set("later", Buffer.from("l"));
      notify("later");
      await eventually(() => (heard.includes("later") ? true : undefined), 10_000, "later heard");
      expect(heard.sort()).toEqual(["added", "changed", "gone", "later"]);
    } finally {
      store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
