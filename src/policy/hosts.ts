// Host patterns: an exact DNS name, an IP literal, or "*.<suffix>" where "*" stands for one
// or more whole labels and never for the apex itself. Everything is compared in one normal
// form (lowercase, no trailing dot, canonical IP text) so that spelling cannot slip past a deny.
import { formatIp, parseIPv4, parseIPv6, unmapIPv4 } from "./cidr.js";

export type Checked = { ok: true; value: string } | { ok: false; error: string };

const MAX_NAME = 253;
const MAX_LABEL = 63;

const fail = (error: string): Checked => ({ ok: false, error });

function stripTrailingDot(name: string): string {
  return name.endsWith(".") ? name.slice(0, -1) : name;
}

/**
 * Validates a lowercase DNS name without trailing dot. A numeric last label is refused:
 * resolvers read "127.1" or "0x7f.1" as IPv4 addresses, so such names are IP spellings
 * in disguise. Underscores are accepted because Docker container names may contain them.
 */
function checkDnsName(name: string, shown: string): Checked {
  if (name.length === 0) return fail(`${shown}: empty host name`);
  if (name.length > MAX_NAME) return fail(`${shown}: host name longer than ${MAX_NAME} characters`);
  const labels = name.split(".");
  for (const label of labels) {
    if (label.length === 0) return fail(`${shown}: empty label (consecutive, leading or extra trailing dot)`);
    if (label.length > MAX_LABEL) return fail(`${shown}: label "${label.slice(0, 20)}..." is longer than ${MAX_LABEL} characters`);
    const bad = /[^a-z0-9_-]/u.exec(label);
    if (bad !== null) return fail(`${shown}: invalid character ${JSON.stringify(bad[0])} (allowed: letters, digits, "-", "_")`);
    if (label.startsWith("-") || label.endsWith("-")) return fail(`${shown}: label "${label}" starts or ends with "-"`);
  }
  const last = labels.at(-1)!; // split() gives at least one label
  if (/^[0-9]+$/.test(last) || /^0x[0-9a-f]*$/.test(last)) {
    return fail(`${shown}: looks like a numeric IP address but is not a dotted-quad IPv4 address`);
  }
  return { ok: true, value: name };
}

/** IPv6 literal (bracket-less) or IPv4 dotted quad, canonicalised; null when not an IP literal. */
function normalizeIpLiteral(text: string): Checked | null {
  if (text.includes(":")) {
    if (text.includes("%")) return fail(`${JSON.stringify(text)}: IPv6 zone ids are not supported`);
    const bytes = parseIPv6(text);
    if (bytes === null) return fail(`${JSON.stringify(text)}: not a valid IPv6 address`);
    return { ok: true, value: formatIp(unmapIPv4({ family: 6, bytes })) };
  }
  const v4 = parseIPv4(text);
  return v4 === null ? null : { ok: true, value: formatIp({ family: 4, bytes: v4 }) };
}

/** Validates a pattern from a policy file and returns its normal form. */
export function validateHostPattern(text: string): Checked {
  const shown = JSON.stringify(text);
  if (text.startsWith("[")) return fail(`${shown}: write IPv6 addresses without brackets`);
  const name = stripTrailingDot(text.toLowerCase());
  if (name.includes("*")) {
    if (name === "*") return fail(`${shown}: "*" alone would match every host; list the hosts you need`);
    if (!name.startsWith("*.") || name.indexOf("*", 1) !== -1) {
      return fail(`${shown}: "*" must be a whole label at the start, as in "*.example.com"`);
    }
    const suffix = name.slice(2);
    const checked = checkDnsName(suffix, shown);
    if (!checked.ok) return checked;
    if (!suffix.includes(".")) {
      return fail(`${shown}: a wildcard needs at least two labels after "*." (e.g. "*.example.com"), not a whole top-level domain`);
    }
    if (name.length > MAX_NAME) return fail(`${shown}: host name longer than ${MAX_NAME} characters`);
    return { ok: true, value: name };
  }
  return normalizeIpLiteral(name) ?? checkDnsName(name, shown);
}

/**
 * Normal form of a host as a client asked for it (CONNECT authority or Host header, port
 * already removed). Brackets around IPv6 are accepted here. Null when it is not a valid host,
 * which callers must treat as "matches nothing".
 */
export function normalizeRequestHost(text: string): string | null {
  let host = text.toLowerCase();
  if (host.startsWith("[") && host.endsWith("]")) host = host.slice(1, -1);
  if (host.includes("*")) return null;
  host = stripTrailingDot(host);
  // Stryker disable next-line StringLiteral: the label only words the error, which is dropped here
  const checked = normalizeIpLiteral(host) ?? checkDnsName(host, "host");
  return checked.ok ? checked.value : null;
}

export function isWildcardPattern(pattern: string): boolean {
  return pattern.startsWith("*.");
}

/**
 * Does `pattern` (any spelling a policy accepts) cover `host` (any spelling a client may send)?
 * "*.example.com" matches "a.example.com" and "a.b.example.com", never "example.com".
 * Invalid input on either side matches nothing.
 */
export function hostMatches(pattern: string, host: string): boolean {
  const p = validateHostPattern(pattern);
  const h = normalizeRequestHost(host);
  if (!p.ok || h === null) return false;
  if (!isWildcardPattern(p.value)) return p.value === h;
  const suffix = p.value.slice(1); // ".example.com"
  // A valid IP literal never ends in a DNS suffix whose last label is non-numeric, so
  // wildcards cannot match IPs. The apex itself lacks the leading ".", and a normal host
  // never starts with one, so at least one whole label stands in front of the suffix.
  return h.endsWith(suffix);
}
