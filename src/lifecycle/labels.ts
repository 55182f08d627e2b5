// A sandbox's labels: user-chosen key=value pairs to select sandboxes by
// (`sandbox list --label`, `sandbox prune --label`). Pure rules, shared by the CLI
// (a usage error before anything is sent) and the gateway (the same check again).
//
// Labels live in the gateway's store only: they are never put on Docker objects.
// The gateway's Docker labels (`sandgate.gateway`, `sandgate.sandbox`, ... in
// src/driver/docker/objects.ts) are the identity it re-verifies containers by, so
// no user input may reach them. The reserved prefixes are refused as well, so that
// a label reads the same wherever it is shown and copying labels to containers
// one day cannot let a user label pose as an identity label.

/** Labels per sandbox at most. */
export const LABELS_MAX = 64;
/** Characters in a key at most. */
export const LABEL_KEY_MAX = 128;
/** Characters in a value at most. */
export const LABEL_VALUE_MAX = 256;

/**
 * Key prefixes (case-insensitive) no user label may use: Sandgate's own (its
 * container and image labels) and the namespaces Docker reserves for itself.
 */
export const RESERVED_LABEL_PREFIXES = ["sandgate.", "sandgate/", "org.sandgate.", "com.docker.", "io.docker.", "org.dockerproject."] as const;

export const LABEL_KEY_RULE = `1-${LABEL_KEY_MAX} characters: letters, digits, '.', '_', '/' and '-', starting and ending with a letter or digit`;
export const LABEL_VALUE_RULE = `0-${LABEL_VALUE_MAX} printable ASCII characters`;

const KEY_RE = new RegExp(`^[A-Za-z0-9](?:[A-Za-z0-9._/-]{0,${LABEL_KEY_MAX - 2}}[A-Za-z0-9])?$`);
// Printable ASCII only: no control characters (a value is printed in tables and on
// terminals) and no look-alike or direction-changing Unicode.
const VALUE_RE = new RegExp(`^[\\x20-\\x7e]{0,${LABEL_VALUE_MAX}}$`);

/** A value as it is shown in a message: quoted, control characters escaped, a long one cut. */
function shown(s: string): string {
  return s.length > 70 ? `${JSON.stringify(s.slice(0, 40))}… (${s.length} characters)` : JSON.stringify(s);
}

/** Null when the key is allowed, else a one-line message naming it and the rule. */
export function checkLabelKey(key: string): string | null {
  if (!KEY_RE.test(key)) return `invalid label key ${shown(key)}: ${LABEL_KEY_RULE}`;
  const lower = key.toLowerCase();
  const reserved = lower === "sandgate" ? "sandgate" : RESERVED_LABEL_PREFIXES.find((p) => lower.startsWith(p));
  if (reserved !== undefined) return `label key ${shown(key)} is reserved: keys starting with ${RESERVED_LABEL_PREFIXES.join(", ")} belong to Sandgate and Docker`;
  return null;
}

/** Null when the value is allowed for the key, else a one-line message. */
export function checkLabelValue(key: string, value: string): string | null {
  if (VALUE_RE.test(value)) return null;
  return `invalid value ${shown(value)} of label ${JSON.stringify(key)}: ${LABEL_VALUE_RULE}`;
}

/** Null when the whole set is allowed (count, every key and value), else the first problem. */
export function checkLabels(labels: Readonly<Record<string, unknown>>): string | null {
  const entries = Object.entries(labels);
  if (entries.length > LABELS_MAX) return `${entries.length} labels; a sandbox has at most ${LABELS_MAX}`;
  for (const [k, v] of entries) {
    const bad = checkLabelKey(k) ?? (typeof v === "string" ? checkLabelValue(k, v) : `the value of label ${JSON.stringify(k)} must be a string`);
    if (bad) return bad;
  }
  return null;
}

export type LabelPair = readonly [key: string, value: string];

/**
 * `key=value` (the value may be empty and may itself hold '='), as given to
 * `--label` and `?label=`: the pair, or a one-line message naming the problem.
 */
export function parseLabelPair(raw: string): { ok: true; pair: LabelPair } | { ok: false; error: string } {
  const i = raw.indexOf("=");
  if (i < 0) return { ok: false, error: `expected KEY=VALUE, got ${shown(raw)}` };
  const key = raw.slice(0, i);
  const value = raw.slice(i + 1);
  const bad = checkLabelKey(key) ?? checkLabelValue(key, value);
  return bad ? { ok: false, error: bad } : { ok: true, pair: [key, value] };
}

/** Label pairs as one object, refusing a key given twice (which value was meant is unclear). */
export function labelsFromPairs(pairs: readonly LabelPair[]): { ok: true; labels: Record<string, string> } | { ok: false; error: string } {
  const labels: Record<string, string> = {};
  for (const [k, v] of pairs) {
    // Checked before it is used as a property name (a key like "__proto__" never becomes one).
    const bad = checkLabelKey(k);
    if (bad) return { ok: false, error: bad };
    if (Object.hasOwn(labels, k)) return { ok: false, error: `label ${JSON.stringify(k)} is given twice` };
    labels[k] = v;
  }
  const bad = checkLabels(labels);
  return bad ? { ok: false, error: bad } : { ok: true, labels };
}

/** Labels as one short text, in key order: `app=web,team=infra` ("-" for none). */
export function formatLabels(labels: Readonly<Record<string, string>>): string {
  const keys = Object.keys(labels).sort();
  return keys.length === 0 ? "-" : keys.map((k) => `${k}=${labels[k]}`).join(",");
}
