// A decoded value (a JSON request body, a stored policy, a launch file) to a validated Policy.
// Apart from the YAML parser (parse.ts) so that the supervisor's bundle carries no YAML code.
import { formatIssuePath, validatePolicyValue, type Policy } from "./schema.js";

export type PolicyParse = { ok: true; policy: Policy } | { ok: false; errors: string[] };

/** Validates an already-decoded value (a JSON request body, a stored policy). */
export function policyFromObject(value: unknown): PolicyParse {
  const result = validatePolicyValue(value);
  if (result.ok) return result;
  return { ok: false, errors: result.issues.map((i) => `${formatIssuePath(i.path)}: ${i.message}`) };
}

/** No network access at all, no extra mounts, gateway-default process settings. */
export function defaultPolicy(): Policy {
  const result = validatePolicyValue({ version: 1 });
  if (!result.ok) throw new Error("the default policy failed validation: a bug in src/policy");
  return result.policy;
}
