import { describe, expect, it } from "vitest";
import { NameMemory } from "../../../src/supervisor/transparent/name-memory.js";

describe("NameMemory: the names the resolver answered an address for", () => {
  it("remembers each name of an address, the most recent first; forgets them when their answer expires", () => {
    let now = 0;
    const m = new NameMemory({ ttlMs: 1000, now: () => now });
    m.remember("a.test", ["192.0.2.1", "192.0.2.2"]);
    now = 500;
    m.remember("b.test", ["192.0.2.1"]);
    expect(m.namesOf("192.0.2.1")).toEqual(["b.test", "a.test"]);
    expect(m.namesOf("192.0.2.2")).toEqual(["a.test"]);
    expect(m.namesOf("192.0.2.9")).toEqual([]);
    now = 1000;
    expect(m.namesOf("192.0.2.1")).toEqual(["b.test"]);
    expect(m.namesOf("192.0.2.2")).toEqual([]);
    expect(m.size).toBe(1);
    // A name answered again moves to the front and lives on.
    m.remember("a.test", ["192.0.2.1"]);
    now = 1499;
    expect(m.namesOf("192.0.2.1")).toEqual(["a.test", "b.test"]);
    now = 1500;
    expect(m.namesOf("192.0.2.1")).toEqual(["a.test"]);
  });

  it("is bounded: the least recently answered addresses go first, and each address keeps its newest names", () => {
    const m = new NameMemory({ maxAddresses: 2, maxNamesPerAddress: 2 });
    m.remember("a.test", ["192.0.2.1"]);
    m.remember("b.test", ["192.0.2.2"]);
    m.remember("c.test", ["192.0.2.1"]);
    m.remember("d.test", ["192.0.2.3"]);
    expect(m.size).toBe(2);
    expect(m.namesOf("192.0.2.2")).toEqual([]);
    m.remember("e.test", ["192.0.2.1"]);
    expect(m.namesOf("192.0.2.1")).toEqual(["e.test", "c.test"]);
    for (let i = 0; i < 10_000; i++) m.remember(`n${i}.test`, [`10.0.${i >> 8}.${i & 255}`]);
    expect(m.size).toBe(2);
  });
});
