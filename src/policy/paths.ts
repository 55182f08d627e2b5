// HTTP path globs for L7 rules. "*" matches within one segment, a "**" segment matches zero
// or more whole segments. Matching is segment-wise dynamic programming, not a regex, so a
// hostile path cannot make matching slow.

export type PathCheck = { ok: true } | { ok: false; error: string };

// Anything but RFC 3986 pchar without "%" (patterns are written decoded), "/" and the glob "*".
const NOT_PATTERN_CHAR = /[^A-Za-z0-9\-._~!$&'()+,;=:@/*]/u;
const MAX_PATTERN = 1024;
const MAX_REQUEST_PATH = 16 * 1024;

export function validatePathGlob(glob: string): PathCheck {
  const shown = JSON.stringify(glob);
  if (!glob.startsWith("/")) return { ok: false, error: `${shown}: a path glob must start with "/"` };
  if (glob.length > MAX_PATTERN) return { ok: false, error: `${shown}: longer than ${MAX_PATTERN} characters` };
  if (glob.includes("?") || glob.includes("#")) {
    return { ok: false, error: `${shown}: query strings and fragments are not matched; give the path only` };
  }
  const bad = NOT_PATTERN_CHAR.exec(glob);
  if (bad !== null) {
    return { ok: false, error: `${shown}: invalid character ${JSON.stringify(bad[0])} (percent-encoding is not needed: paths are matched decoded)` };
  }
  // Stryker disable next-line MethodExpression: the empty piece before the leading "/" passes both checks
  for (const segment of glob.slice(1).split("/")) {
    if (segment.includes("**") && segment !== "**") {
      return { ok: false, error: `${shown}: "**" must be a whole path segment, as in "/v1/**"` };
    }
    if (segment === "." || segment === "..") {
      return { ok: false, error: `${shown}: "." and ".." segments are not allowed` };
    }
  }
  return { ok: true };
}

/**
 * The decoded segments of a request path (without its leading "/"), or null when the path
 * must not be matched at all: not origin-form, bad percent-encoding, an encoded "/" or "\",
 * a control character, or a "." / ".." segment (the server would resolve it to a path the
 * glob never saw, e.g. "/v1/../admin").
 */
export function requestPathSegments(rawPath: string): string[] | null {
  const end = rawPath.search(/[?#]/);
  const path = end === -1 ? rawPath : rawPath.slice(0, end);
  if (!path.startsWith("/") || path.length > MAX_REQUEST_PATH) return null;
  const segments: string[] = [];
  for (const raw of path.slice(1).split("/")) {
    let segment: string;
    try {
      segment = decodeURIComponent(raw);
    } catch {
      return null;
    }
    // Control characters are refused outright.
    if (/[/\\\u0000-\u001f\u007f]/.test(segment)) return null;
    if (segment === "." || segment === "..") return null;
    // Path parameters ("/a;v=1/b"): servers such as Tomcat drop them before resolving
    // segments, so "..;" is ".." there and "/a/..;/admin" is "/admin".
    const bare = withoutParameters(segment);
    if (bare === "." || bare === "..") return null;
    segments.push(segment);
  }
  return segments;
}

/** A segment without its path parameters (everything from the first ";"). */
function withoutParameters(segment: string): string {
  const semi = segment.indexOf(";");
  return semi === -1 ? segment : segment.slice(0, semi);
}

/** "*" within one segment: classic two-pointer wildcard match, linear-ish and backtrack-free. */
function segmentMatches(pattern: string, text: string): boolean {
  let p = 0;
  let t = 0;
  let starP = -1;
  let starT = 0;
  while (t < text.length) {
    const c = pattern[p]; // undefined past the end, which equals no character
    if (c === "*") {
      starP = p++;
      starT = t;
    } else if (c === text[t]) {
      p++;
      t++;
    } else if (starP !== -1) {
      p = starP + 1;
      t = ++starT;
    } else {
      return false;
    }
  }
  while (pattern[p] === "*") p++;
  return p === pattern.length;
}

/**
 * Matches a validated glob against a raw request path (query and fragment ignored). A path
 * with parameters (";" in a segment, also encoded) must match both as written and with the
 * parameters dropped: servers read it either way, and neither reading may escape the glob.
 */
export function pathMatches(glob: string, rawPath: string): boolean {
  if (!validatePathGlob(glob).ok) return false;
  const text = requestPathSegments(rawPath);
  if (text === null) return false;
  const pat = glob.slice(1).split("/");
  if (!segmentsMatch(pat, text)) return false;
  return !text.some((s) => s.includes(";")) || segmentsMatch(pat, text.map(withoutParameters));
}

function segmentsMatch(pat: readonly string[], text: readonly string[]): boolean {
  // can[i][j]: pattern segments from i on match text segments from j on.
  const rows = pat.length + 1;
  const cols = text.length + 1;
  const can = new Uint8Array(rows * cols);
  can[pat.length * cols + text.length] = 1;
  for (let i = pat.length - 1; i >= 0; i--) {
    const seg = pat[i]!;
    for (let j = text.length; j >= 0; j--) {
      let ok = false;
      if (seg === "**") {
        // Zero segments, or swallow text[j] and stay on "**".
        ok = can[(i + 1) * cols + j] === 1 || (j < text.length && can[i * cols + j + 1] === 1);
      } else if (j < text.length) {
        ok = can[(i + 1) * cols + j + 1] === 1 && segmentMatches(seg, text[j]!);
      }
      can[i * cols + j] = ok ? 1 : 0;
    }
  }
  return can[0] === 1;
}
