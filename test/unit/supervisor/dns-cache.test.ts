// The supervisor's DNS cache: answers reused for their TTL (capped), bounded by entries,
// failures never cached, one query per name at a time. A fake source counts the queries
// and a fake clock moves time (no waiting).
import { describe, expect, it } from "vitest";
import { DnsCache, withoutTtl, type Answer } from "../../../src/supervisor/dns-cache.js";

function source(answers: Record<string, Answer | Error>) {
  const calls: string[] = [];
  let release: (() => void) | undefined;
  let hold = false;
  return {
    calls,
    holdNext: () => (hold = true),
    release: () => release?.(),
    fn: async (host: string): Promise<Answer> => {
      calls.push(host);
      if (hold) {
        hold = false;
        await new Promise<void>((r) => (release = r));
      }
      const a = answers[host];
      if (a === undefined) throw Object.assign(new Error(`no ${host}`), { code: "ENOTFOUND" });
      if (a instanceof Error) throw a;
      return a;
    },
  };
}

describe("DnsCache", () => {
  it("reuses an answer for its TTL, then asks again", async () => {
    let now = 0;
    const s = source({ "a.test": { addresses: ["192.0.2.1"], ttlS: 30 } });
    const c = new DnsCache(s.fn, { now: () => now });
    expect(await c.resolve("a.test")).toEqual(["192.0.2.1"]);
    now = 29_999;
    expect(await c.resolve("A.TEST")).toEqual(["192.0.2.1"]);
    expect(s.calls).toEqual(["a.test"]);
    now = 30_000;
    await c.resolve("a.test");
    expect(s.calls).toHaveLength(2);
    expect(c.stats()).toMatchObject({ hits: 1, misses: 2 });
  });

  it("cached(): the answer held now, without asking the source; nothing once it expired", async () => {
    let now = 0;
    const s = source({ "a.test": { addresses: ["192.0.2.1"], ttlS: 30 } });
    const c = new DnsCache(s.fn, { now: () => now });
    expect(c.cached("a.test")).toBeUndefined();
    await c.resolve("a.test");
    const held = c.cached("A.test");
    expect(held).toEqual(["192.0.2.1"]);
    held!.push("198.51.100.1"); // a copy: the caller cannot change what is held
    expect(c.cached("a.test")).toEqual(["192.0.2.1"]);
    now = 30_000;
    expect(c.cached("a.test")).toBeUndefined();
    expect(s.calls).toEqual(["a.test"]);
  });

  it("caps a long TTL, uses the default when the source gives none, and never keeps a TTL of 0", async () => {
    let now = 0;
    const s = source({ "long.test": { addresses: ["192.0.2.2"], ttlS: 86_400 }, "none.test": { addresses: ["192.0.2.3"] }, "zero.test": { addresses: ["192.0.2.4"], ttlS: 0 } });
    const c = new DnsCache(s.fn, { now: () => now, maxTtlS: 60, defaultTtlS: 5 });
    for (const h of ["long.test", "none.test", "zero.test"]) await c.resolve(h);
    now = 4_999;
    for (const h of ["long.test", "none.test", "zero.test"]) await c.resolve(h);
    expect(s.calls).toEqual(["long.test", "none.test", "zero.test", "zero.test"]);
    now = 5_000;
    await c.resolve("none.test");
    now = 60_000;
    await c.resolve("long.test");
    expect(s.calls.slice(4)).toEqual(["none.test", "long.test"]);
  });

  it("does not cache a failure or an empty answer", async () => {
    const s = source({ "bad.test": new Error("SERVFAIL"), "empty.test": { addresses: [], ttlS: 60 } });
    const c = new DnsCache(s.fn);
    await expect(c.resolve("bad.test")).rejects.toThrow("SERVFAIL");
    await expect(c.resolve("bad.test")).rejects.toThrow("SERVFAIL");
    expect(await c.resolve("empty.test")).toEqual([]);
    expect(await c.resolve("empty.test")).toEqual([]);
    expect(s.calls).toEqual(["bad.test", "bad.test", "empty.test", "empty.test"]);
  });

  it("keeps at most maxEntries names, dropping the least recently used", async () => {
    const answers = Object.fromEntries(["a", "b", "c", "d"].map((h) => [`${h}.test`, { addresses: ["192.0.2.9"], ttlS: 60 }]));
    const s = source(answers);
    const c = new DnsCache(s.fn, { maxEntries: 3 });
    for (const h of ["a", "b", "c"]) await c.resolve(`${h}.test`);
    await c.resolve("a.test"); // a is now the most recent; b the least
    await c.resolve("d.test"); // evicts b
    expect(c.stats()).toMatchObject({ entries: 3, evicted: 1 });
    await c.resolve("a.test");
    await c.resolve("b.test");
    expect(s.calls).toEqual(["a.test", "b.test", "c.test", "d.test", "b.test"]);
  });

  it("asks once for concurrent lookups of one name; a caller changing its copy changes no one else's", async () => {
    const s = source({ "a.test": { addresses: ["192.0.2.1", "2001:db8::1"], ttlS: 60 } });
    s.holdNext();
    const c = new DnsCache(s.fn);
    const both = [c.resolve("a.test"), c.resolve("a.test")];
    s.release();
    const [x, y] = await Promise.all(both);
    expect(s.calls).toEqual(["a.test"]);
    x!.length = 0;
    expect(y).toEqual(["192.0.2.1", "2001:db8::1"]);
    expect(await c.resolve("a.test")).toEqual(["192.0.2.1", "2001:db8::1"]);
  });

  it("withoutTtl wraps a plain resolver as a source whose answers take the default TTL", async () => {
    let now = 0;
    let n = 0;
    const c = new DnsCache(withoutTtl(async () => [`192.0.2.${String(++n)}`]), { now: () => now, defaultTtlS: 2 });
    expect(await c.resolve("x.test")).toEqual(["192.0.2.1"]);
    now = 1_999;
    expect(await c.resolve("x.test")).toEqual(["192.0.2.1"]);
    now = 2_000;
    expect(await c.resolve("x.test")).toEqual(["192.0.2.2"]);
  });
});
