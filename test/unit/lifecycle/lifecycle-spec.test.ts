// Sandbox names and the default resources: the rules a create request is checked against.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { checkSandboxName, DEFAULT_RESOURCES, NAME_RULE } from "../../../src/lifecycle/spec.js";

const RULE = "1-63 characters: lowercase letters, digits and '-', starting and ending with a letter or digit";

describe("checkSandboxName", () => {
  it.each([
    "a",
    "0",
    "ab",
    "a-b",
    "a--b",
    "demo-1",
    "1-demo",
    "x".repeat(63),
    `a${"-".repeat(61)}b`,
    "0123456789abcdefghijklmnopqrstuvwxyz",
  ])("accepts %j", (name) => {
    expect(checkSandboxName(name)).toBeNull();
  });

  it.each([
    ["empty", ""],
    ["64 characters", "x".repeat(64)],
    ["leading -", "-a"],
    ["trailing -", "a-"],
    ["only -", "-"],
    ["uppercase", "Demo"],
    ["uppercase inside", "deMo"],
    ["underscore", "a_b"],
    ["dot", "a.b"],
    ["space", "a b"],
    ["trailing newline", "demo\n"],
    ["leading newline", "\ndemo"],
    ["suffix after a valid name", "demo/x"],
    ["prefix before a valid name", "../demo"],
    ["non-ASCII letter", "dém"],
  ])("refuses %s", (_label, name) => {
    expect(checkSandboxName(name)).toBe(`invalid sandbox name ${JSON.stringify(name)}: ${RULE}`);
  });

  it("the rule text shown to users is the documented one", () => {
    expect(NAME_RULE).toBe(RULE);
  });

  it("property: valid exactly for 1-63 of [a-z0-9-] that neither start nor end with '-'", () => {
    const chars = fc.constantFrom(..."ab09-_A.".split(""));
    fc.assert(
      fc.property(fc.array(chars, { maxLength: 70 }).map((cs) => cs.join("")), (name) => {
        const valid = name.length >= 1 && name.length <= 63 && /^[a-z0-9-]*$/.test(name) && !name.startsWith("-") && !name.endsWith("-");
        expect(checkSandboxName(name) === null).toBe(valid);
      }),
      { numRuns: 2000 },
    );
  });
});

describe("DEFAULT_RESOURCES", () => {
  it("is 512 MiB, one CPU, 256 processes", () => {
    expect(DEFAULT_RESOURCES).toEqual({ memoryMb: 512, cpus: 1, pids: 256 });
  });
});
