import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { pathMatches, requestPathSegments, validatePathGlob } from "../../../src/policy/paths.js";

describe("validatePathGlob", () => {
  it.each(["/", "/health", "/v1/**", "/**", "/a/*/c", "/a/*.json", "/a/**/b", "/users/@me", "/x:y", "/a-b_c.d~e"])("accepts %s", (glob) => {
    expect(validatePathGlob(glob)).toEqual({ ok: true });
  });

  it.each([
    ["health", 'must start with "/"'],
    ["", 'must start with "/"'],
    ["*/x", 'must start with "/"'],
    ["/v1/**x", '"**" must be a whole path segment'],
    ["/v1/a**", '"**" must be a whole path segment'],
    ["/v1/***", '"**" must be a whole path segment'],
    ["/search?q=*", "query strings and fragments"],
    ["/a#b", "query strings and fragments"],
    ["/a b", 'invalid character " "'],
    ["/a%20b", 'invalid character "%"'],
    ["/a/../b", '"." and ".." segments'],
    ["/./a", '"." and ".." segments'],
    ["/" + "a".repeat(1024), "longer than 1024"],
    ["/a/b c", 'invalid character " "'],
  ])("rejects %j (%s)", (glob, message) => {
    const result = validatePathGlob(glob);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.error).toContain(message);
  });
});

describe("length limits", () => {
  it("a glob may be 1024 characters long, not more", () => {
    expect(validatePathGlob("/" + "a".repeat(1023))).toEqual({ ok: true });
    expect(validatePathGlob("/" + "a".repeat(1024))).toEqual({ ok: false, error: `${JSON.stringify("/" + "a".repeat(1024))}: longer than 1024 characters` });
  });

  it("a request path may be 16384 characters long, not more (query excluded)", () => {
    expect(requestPathSegments("/" + "a".repeat(16383))).toEqual(["a".repeat(16383)]);
    expect(requestPathSegments("/" + "a".repeat(16383) + "?" + "q".repeat(100))).toEqual(["a".repeat(16383)]);
    expect(requestPathSegments("/" + "a".repeat(16384))).toBeNull();
  });
});

describe("requestPathSegments", () => {
  it.each([
    ["/", [""]],
    ["/a/b", ["a", "b"]],
    ["/a/b?x=/../y", ["a", "b"]],
    ["/a#frag", ["a"]],
    ["/heal%74h", ["health"]],
    ["/a%20b", ["a b"]],
    ["/a//b/", ["a", "", "b", ""]],
    ["/a*b/%2A", ["a*b", "*"]],
  ])("%s -> %j", (path, segments) => {
    expect(requestPathSegments(path)).toEqual(segments);
  });

  it.each(["", "v1/x", "http://host/v1", "*", "/v1/../admin", "/v1/./x", "/v1/%2e%2e/admin", "/v1/%2E/x", "/v1/a%2Fb", "/v1/a%5Cb", "/v1/a\\b", "/bad%zz", "/a%00b", "/" + "a".repeat(17000)])(
    "refuses %j",
    (path) => {
      expect(requestPathSegments(path)).toBeNull();
    },
  );
});

describe("pathMatches", () => {
  it.each([
    ["/health", "/health", true],
    ["/health", "/health?verbose=1", true],
    ["/health", "/health/", false],
    ["/health", "/healthz", false],
    ["/health", "/Health", false],
    ["/health", "/heal%74h", true],
    ["/v1/**", "/v1", true],
    ["/v1/**", "/v1/", true],
    ["/v1/**", "/v1/a", true],
    ["/v1/**", "/v1/a/b/c", true],
    ["/v1/**", "/v1abc", false],
    ["/v1/**", "/v2/a", false],
    ["/v1/**", "/v1/../admin", false],
    ["/v1/**", "/v1/%2e%2e/admin", false],
    ["/v1/**", "/v1/a%2F..%2F..%2Fadmin", false],
    ["/**", "/", true],
    ["/**", "/anything/at/all", true],
    ["/*", "/", true],
    ["/*", "/a", true],
    ["/*", "/a/b", false],
    ["/a/*/c", "/a/b/c", true],
    ["/a/*/c", "/a/b/x/c", false],
    ["/a/*/c", "/a//c", true],
    ["/a/*.json", "/a/x.json", true],
    ["/a/*.json", "/a/.json", true],
    ["/a/*.json", "/a/x.json/y", false],
    ["/a/*.json", "/a/x.jsonp", false],
    ["/a/**/b", "/a/b", true],
    ["/a/**/b", "/a/x/b", true],
    ["/a/**/b", "/a/x/y/b", true],
    ["/a/**/b", "/a/x/y/bb", false],
    ["/a/**/b/**", "/a/x/b/y/z", true],
    ["/*a*b*", "/xaybz", true],
    ["/*a*b*", "/xbya", false],
    // A "*" the client sends is a literal character in the path, never a wildcard.
    ["/*b", "/*xb", true],
    ["/a*", "/a%2A", true],
    ["/a*c", "/a*", false],
    // An invalid glob matches nothing rather than something unexpected, even a path that
    // its characters would match.
    ["v1/**", "/v1/x", false],
    ["/a b", "/a%20b", false],
    ["/a%20b", "/a%2520b", false],
    ["/v1/**x", "/v1/abcx", false],
    ["/v1/a**", "/v1/a/b", false],
  ])("%s vs %s -> %s", (glob, path, want) => {
    expect(pathMatches(glob, path)).toBe(want);
  });

  // A backtracking matcher would never finish this one (astronomically many ways to place
  // the 80 stars): the test's own timeout is the hang guard. How fast it is belongs in a benchmark.
  it("stays fast on a pathological glob and path", () => {
    const glob = "/" + "*a".repeat(40) + "/**/" + "*a".repeat(40);
    const path = "/" + "a".repeat(3000) + "/" + "a/".repeat(2000) + "b".repeat(3000);
    expect(pathMatches(glob, path)).toBe(false);
  }, 30_000);
});

// A slow, obviously-correct reference: translate the glob to a regex over the decoded path.
function referenceMatch(glob: string, path: string): boolean {
  const segs = glob.slice(1).split("/");
  let re = "";
  segs.forEach((seg) => {
    if (seg === "**") re += "(?:/.*)?";
    else re += "/" + seg.split("*").map((lit) => lit.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("[^/]*");
  });
  return new RegExp(`^${re}$`).test(path);
}

describe("path glob properties", () => {
  const segment = fc.stringMatching(/^[a-c.]{0,3}$/).filter((s) => s !== "." && s !== "..");
  const path = fc.array(segment, { minLength: 1, maxLength: 5 }).map((s) => "/" + s.join("/"));
  const globSeg = fc.oneof(segment, fc.constant("*"), fc.constant("**"), fc.stringMatching(/^[a-c]?\*[a-c]?$/));
  const glob = fc.array(globSeg, { minLength: 1, maxLength: 4 }).map((s) => "/" + s.join("/"));
  // Request paths may contain a literal "*" too.
  const textSegment = fc.stringMatching(/^[a-c.*]{0,3}$/).filter((s) => s !== "." && s !== "..");
  const textPath = fc.array(textSegment, { minLength: 1, maxLength: 5 }).map((s) => "/" + s.join("/"));

  it("agrees with a regex reference on small alphabets", () => {
    fc.assert(
      fc.property(glob, fc.oneof(path, textPath), (g, p) => {
        expect(pathMatches(g, p)).toBe(referenceMatch(g, p));
      }),
      { numRuns: 5000 },
    );
  });

  it('"/**" matches every path that is matchable at all', () => {
    fc.assert(
      fc.property(path, (p) => {
        expect(pathMatches("/**", p)).toBe(true);
      }),
    );
  });

  it("a glob without * matches only its own path", () => {
    fc.assert(
      fc.property(path, path, (a, b) => {
        expect(pathMatches(a, b)).toBe(a === b);
      }),
    );
  });

  it("no glob matches a path with a dot segment", () => {
    fc.assert(
      fc.property(glob, path, fc.constantFrom("..", ".", "%2e%2e", "%2E", ".%2e"), (g, p, dot) => {
        expect(pathMatches(g, `${p}/${dot}/x`)).toBe(false);
      }),
    );
  });
});

describe("path parameters (\";\" in a segment)", () => {
  it.each(["/v1/..;/admin", "/v1/..;x=1/admin", "/v1/.;/x", "/v1/%2e%2e;/admin", "/v1/..%3b/admin", "/v1/..%3B/admin", "/v1/.%3bjsessionid=1/x"])(
    "%s is refused outright: with its parameters dropped it has a dot segment",
    (p) => {
      expect(requestPathSegments(p)).toBeNull();
      expect(pathMatches("/**", p)).toBe(false);
      expect(pathMatches("/v1/**", p)).toBe(false);
    },
  );

  it.each([
    // [glob, path, matches]: a path with parameters must match as written AND without them.
    ["/v1/**", "/v1/a;v=1/b", true],
    ["/v1/*/b", "/v1/a;v=1/b", true],
    ["/v1/a/b", "/v1/a;v=1/b", false],
    ["/v1/a;v=1/b", "/v1/a;v=1/b", false],
    ["/v1/a*/b", "/v1/a;v=1/b", true],
    ["/a/**", "/a;x/b", false],
    ["/a*/**", "/a;x/b", true],
    ["/admin/**", "/admin;x/b", false],
    ["/v1/**", "/v1;/../admin", false],
    ["/public/*", "/public/..;", false],
    ["/x", "/x;", false],
    ["/x*", "/x;", true],
    ["/v1/**", "/v1/a%3Bb", true],
    ["/v1/a", "/v1/a%3Bb", false],
    ["/v1/**", "/v1/;/x", true],
  ])("%s against %s: %s", (glob, path, ok) => {
    expect(pathMatches(glob, path)).toBe(ok);
  });

  it("a path with parameters matches exactly when both readings do (property)", () => {
    const seg = fc.stringMatching(/^[ab]{1,2}(;[ab=]{0,2})?$/);
    const path = fc.array(seg, { minLength: 1, maxLength: 4 }).map((s) => "/" + s.join("/"));
    const globSeg = fc.oneof(fc.stringMatching(/^[ab]{1,2}$/), fc.constant("*"), fc.constant("**"), fc.stringMatching(/^[ab]\*$/));
    const glob = fc.array(globSeg, { minLength: 1, maxLength: 4 }).map((s) => "/" + s.join("/"));
    fc.assert(
      fc.property(glob, path, (g, p) => {
        const bare = p.replace(/;[^/]*/g, "");
        expect(pathMatches(g, p)).toBe(referenceMatch(g, p) && referenceMatch(g, bare));
      }),
      { numRuns: 3000 },
    );
  });
});
