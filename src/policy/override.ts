// Method overrides: a request can ask the origin to treat it as another method, through a
// header (X-HTTP-Method-Override and its kin) or a `_method` query parameter (Rails,
// Laravel, Symfony, Express method-override). A policy that allows GET but not DELETE must
// not let `GET /x?_method=DELETE` through: every method a request names is checked.

/** Header names (lowercase) frameworks read an override from. */
export const OVERRIDE_HEADERS: readonly string[] = ["x-http-method-override", "x-http-method", "x-method-override"];
/** The query parameter frameworks read an override from (compared case-insensitively). */
export const OVERRIDE_PARAMETER = "_method";

function decodeQueryPart(text: string): string | null {
  try {
    return decodeURIComponent(text.replaceAll("+", " "));
  } catch {
    return null;
  }
}

/** The methods an override value names: comma-separated, trimmed, uppercased; empty pieces dropped. */
function methodsIn(value: string): string[] {
  return value
    .split(",")
    .map((m) => m.trim().toUpperCase())
    .filter((m) => m !== "");
}

/**
 * Every method the request asks to be treated as, besides its own: the values of the
 * override headers (raw name/value pairs, as node's rawHeaders) and of `_method` parameters
 * in the request target's query ("&" and ";" both separate parameters, as some frameworks
 * read them). Uppercased, unique, in order. A `_method` value that does not decode is kept
 * as written, so that it is checked (and refused) rather than skipped.
 */
export function overrideMethods(rawHeaders: readonly string[], target: string): string[] {
  const out: string[] = [];
  const add = (methods: string[]): void => {
    for (const m of methods) if (!out.includes(m)) out.push(m);
  };
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    if (OVERRIDE_HEADERS.includes(rawHeaders[i]!.toLowerCase())) add(methodsIn(rawHeaders[i + 1]!));
  }
  const hash = target.indexOf("#");
  const beforeHash = hash === -1 ? target : target.slice(0, hash);
  const q = beforeHash.indexOf("?");
  if (q !== -1) {
    const query = beforeHash.slice(q + 1);
    for (const pair of query.split(/[&;]/)) {
      const eq = pair.indexOf("=");
      const rawKey = eq === -1 ? pair : pair.slice(0, eq);
      const key = decodeQueryPart(rawKey) ?? rawKey;
      // "_method[]" and friends: frameworks differ; any key that is _method once brackets go counts.
      if (key.replace(/\[\]$/, "").trim().toLowerCase() !== OVERRIDE_PARAMETER) continue;
      const rawValue = eq === -1 ? "" : pair.slice(eq + 1);
      add(methodsIn(decodeQueryPart(rawValue) ?? rawValue));
    }
  }
  return out;
}
