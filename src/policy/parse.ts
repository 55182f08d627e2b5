// Untrusted YAML text to a validated Policy. Pure: the caller reads files.
import { LineCounter, isNode, parseDocument, type Document } from "yaml";
import { formatIssuePath, validatePolicyValue } from "./schema.js";
import type { PolicyParse } from "./from-object.js";
import { errorMessage } from "../util/error-message.js";

export { policyFromObject, defaultPolicy, type PolicyParse } from "./from-object.js";

const MAX_YAML_CHARS = 1024 * 1024;
// Anchors and aliases are legitimate, but a few hundred can expand to gigabytes ("billion laughs").
const MAX_ALIAS_COUNT = 100;

/** Line and column (1-based) of the deepest existing node on `path`. */
function positionOf(doc: Document, lines: LineCounter, path: readonly PropertyKey[]): string | null {
  for (let k = path.length; k >= 0; k--) {
    // getIn([]) is the document's root node.
    const node = doc.getIn(path.slice(0, k), true);
    if (isNode(node) && node.range) {
      const pos = lines.linePos(node.range[0]);
      return `line ${String(pos.line)}, col ${String(pos.col)}`;
    }
  }
  return null;
}

/**
 * Parses and validates a policy file. Syntax errors carry "line L, col C"; schema errors
 * are "path: problem (line L, col C)" with the position of the offending value.
 */
export function parsePolicyYaml(text: string): PolicyParse {
  if (text.length > MAX_YAML_CHARS) return { ok: false, errors: [`policy: file larger than ${String(MAX_YAML_CHARS)} characters`] };
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: false, uniqueKeys: true });
  if (doc.errors.length > 0) {
    return {
      ok: false,
      errors: doc.errors.map((e) => {
        const pos = lines.linePos(e.pos[0]);
        return `line ${String(pos.line)}, col ${String(pos.col)}: ${e.message}`;
      }),
    };
  }
  let value: unknown;
  try {
    // Stryker disable next-line ObjectLiteral: 100 is also yaml's default today; the option pins it
    value = doc.toJS({ maxAliasCount: MAX_ALIAS_COUNT });
  } catch (err) {
    return { ok: false, errors: [`policy: ${errorMessage(err)}`] };
  }
  if (value == null) {
    return { ok: false, errors: ["policy: the document is empty (expected a mapping that starts with version: 1)"] };
  }
  const result = validatePolicyValue(value);
  if (result.ok) return result;
  return {
    ok: false,
    errors: result.issues.map((i) => {
      const where = positionOf(doc, lines, i.path);
      return `${formatIssuePath(i.path)}: ${i.message}${where === null ? "" : ` (${where})`}`;
    }),
  };
}
