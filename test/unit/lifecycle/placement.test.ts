// Where a new sandbox runs (src/lifecycle/placement.ts): every branch, as a table.
import { describe, expect, it } from "vitest";
import { checkHostName, place, type HostState } from "../../../src/lifecycle/placement.js";

const hosts: HostState[] = [
  { host: "h1", driven: true, live: 3 },
  { host: "h2", driven: true, live: 0 },
  { host: "gone", driven: false, live: 2 },
];

describe("placement", () => {
  it.each([
    // requested, self, hosts → result
    [undefined, "h1", hosts, { ok: true, host: "h1" }],
    [undefined, "h1", null, { ok: true, host: "h1" }],
    ["h1", "h1", null, { ok: true, host: "h1" }],
    ["h1", "h1", [], { ok: true, host: "h1" }],
    ["h2", "h1", hosts, { ok: true, host: "h2" }],
  ] as const)("%s asked of %s → placed", (requested, self, hs, want) => {
    expect(place(requested, self, hs)).toEqual(want);
  });

  it("a host no gateway drives now is refused, saying whether one ever did and which hosts have one", () => {
    expect(place("gone", "h1", hosts)).toEqual({ ok: false, error: `host: no gateway drives host "gone" now (its gateway is not running); hosts with a gateway: h1, h2` });
    expect(place("h9", "h1", hosts)).toEqual({ ok: false, error: `host: no gateway drives host "h9" now (no gateway has ever driven it); hosts with a gateway: h1, h2` });
    expect(place("h9", "h1", [{ host: "gone", driven: false, live: 0 }])).toEqual({ ok: false, error: `host: no gateway drives host "h9" now (no gateway has ever driven it); hosts with a gateway: none` });
  });

  it("another host on a store of one host is refused, naming both", () => {
    const r = place("h2", "h1", null);
    expect(r.ok).toBe(false);
    expect(!r.ok && r.error).toBe(`host: "h2" is not this gateway's host "h1", and its store is not a fleet's (--store postgres://…, docs/fleet.md): leave --host out`);
  });

  it("a name that is not a host name is refused before anything else, naming it and what is allowed", () => {
    for (const bad of ["", "-a", ".a", "a b", "a/b", "x".repeat(64), "é"]) {
      expect(place(bad, "h1", hosts)).toEqual({ ok: false, error: `host: ${JSON.stringify(bad)} is not a host name; allowed: 1–63 letters, digits, '.', '_' or '-', starting with a letter or digit` });
    }
    for (const good of ["a", "A.b_c-d", "9", "x".repeat(63)]) expect(checkHostName(good)).toBeNull();
  });
});
