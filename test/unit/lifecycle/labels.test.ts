// The rules on sandbox labels (src/lifecycle/labels.ts): bounded keys, values and
// counts, printable values, and the reserved prefixes of Sandgate's and Docker's own labels.

import { describe, expect, it } from "vitest";
import {
  LABELS_MAX,
  LABEL_KEY_MAX,
  LABEL_VALUE_MAX,
  checkLabelKey,
  checkLabelValue,
  checkLabels,
  formatLabels,
  labelsFromPairs,
  parseLabelPair,
} from "../../../src/lifecycle/labels.js";
import { LABEL } from "../../../src/driver/docker/objects.js";

describe("label keys", () => {
  it("allows Docker- and Kubernetes-style keys up to the limit", () => {
    for (const k of ["app", "a", "9", "com.example.team", "example.com/tier", "App_Name", "a-b.c_d/e", "x".repeat(LABEL_KEY_MAX)]) expect(checkLabelKey(k), k).toBeNull();
  });

  it("refuses empty, too long, bad characters and bad ends, naming the key and the rule", () => {
    for (const k of ["", "x".repeat(LABEL_KEY_MAX + 1), "-a", "a-", ".a", "a/", "_a", "a b", "a=b", "a,b", "é", "a\nb", "a\u0000", "__proto__", "a\"b"]) {
      const bad = checkLabelKey(k);
      expect(bad, JSON.stringify(k)).toMatch(/^invalid label key .*: 1-128 characters: letters, digits, '.', '_', '\/' and '-', starting and ending with a letter or digit$/);
    }
    // A long key is shown cut, with its length; control characters are escaped.
    expect(checkLabelKey("k".repeat(5000))).toMatch(/^invalid label key "k{40}"… \(5000 characters\)/);
    expect(checkLabelKey("a\u001b[31mb")).toContain("\\u001b");
  });

  it("refuses every key of Sandgate's own Docker labels, and the reserved prefixes in any case", () => {
    for (const k of [...Object.values(LABEL), "sandgate", "SandGate.Gateway", "SANDGATE.nonce", "sandgate/x", "org.sandgate.image", "org.sandgate.content-hash", "com.docker.compose.project", "io.docker.x", "org.dockerproject.x"]) {
      expect(checkLabelKey(k), k).toMatch(/is reserved: keys starting with sandgate\., sandgate\/, org\.sandgate\., com\.docker\., io\.docker\., org\.dockerproject\. belong to Sandgate and Docker$/);
    }
    // Only prefixes: a key that merely contains the word is the user's.
    for (const k of ["my.sandgate.x", "sandgatex", "sandgate-team"]) expect(checkLabelKey(k), k).toBeNull();
  });
});

describe("label values", () => {
  it("allows printable ASCII up to the limit, the empty value included", () => {
    for (const v of ["", "web", "a b", "x=y,z", "~!@#$%^&*()", "v".repeat(LABEL_VALUE_MAX)]) expect(checkLabelValue("k", v), v).toBeNull();
  });

  it("refuses control characters, non-ASCII (look-alikes, direction overrides) and over-long values", () => {
    for (const v of ["a\nb", "a\rb", "\t", "\u001b[2J", "\u007f", "\u0085", "caf\u00e9", "\u202eevil", "\u200b", "v".repeat(LABEL_VALUE_MAX + 1)]) {
      expect(checkLabelValue("k", v), JSON.stringify(v)).toMatch(/^invalid value .* of label "k": 0-256 printable ASCII characters$/);
    }
  });
});

describe("a set of labels", () => {
  it("is at most LABELS_MAX labels", () => {
    const many = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, "v"]));
    expect(checkLabels(many(LABELS_MAX))).toBeNull();
    expect(checkLabels(many(LABELS_MAX + 1))).toBe(`${LABELS_MAX + 1} labels; a sandbox has at most ${LABELS_MAX}`);
  });

  it("has string values only, and sees a __proto__ key given as data", () => {
    expect(checkLabels({ a: 1 })).toBe('the value of label "a" must be a string');
    expect(checkLabels(JSON.parse('{"__proto__": "x"}') as Record<string, unknown>)).toMatch(/^invalid label key "__proto__"/);
  });
});

describe("KEY=VALUE pairs", () => {
  it("split at the first '=': the value may be empty or hold '='", () => {
    expect(parseLabelPair("app=web")).toEqual({ ok: true, pair: ["app", "web"] });
    expect(parseLabelPair("app=")).toEqual({ ok: true, pair: ["app", ""] });
    expect(parseLabelPair("q=a=b")).toEqual({ ok: true, pair: ["q", "a=b"] });
  });

  it("refuse what is not a valid pair, naming it", () => {
    expect(parseLabelPair("app")).toEqual({ ok: false, error: 'expected KEY=VALUE, got "app"' });
    expect(parseLabelPair("=web")).toMatchObject({ ok: false, error: expect.stringMatching(/^invalid label key ""/) });
    expect(parseLabelPair("sandgate.gateway=x")).toMatchObject({ ok: false, error: expect.stringMatching(/is reserved/) });
    expect(parseLabelPair("a=\u001b")).toMatchObject({ ok: false, error: expect.stringMatching(/^invalid value "\\u001b" of label "a"/) });
  });

  it("become one object; a key given twice is refused", () => {
    expect(labelsFromPairs([["b", "2"], ["a", "1"]])).toEqual({ ok: true, labels: { b: "2", a: "1" } });
    expect(labelsFromPairs([["a", "1"], ["a", "2"]])).toEqual({ ok: false, error: 'label "a" is given twice' });
    expect(labelsFromPairs([["__proto__", "x"]])).toMatchObject({ ok: false, error: expect.stringMatching(/^invalid label key "__proto__"/) });
  });

  it("print in key order", () => {
    expect(formatLabels({ team: "infra", app: "web" })).toBe("app=web,team=infra");
    expect(formatLabels({})).toBe("-");
  });
});

describe("the create body's labels", () => {
  it("are checked as given: a __proto__ key is refused, not silently dropped (as z.record would)", async () => {
    const { CreateSandboxBody } = await import("../../../src/api/schemas.js");
    const r = CreateSandboxBody.safeParse(JSON.parse('{"name": "x", "labels": {"__proto__": "x", "a": "b"}}'));
    expect(r.success).toBe(false);
    expect(r.error?.issues[0]?.message).toMatch(/^invalid label key "__proto__"/);
    expect(CreateSandboxBody.safeParse({ name: "x", labels: { a: "b" } })).toMatchObject({ success: true, data: { labels: { a: "b" } } });
  });
});
