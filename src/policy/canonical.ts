// One byte-exact text per policy, for storage and for comparing versions by hash.
import { createHash } from "node:crypto";
import type { Policy } from "./schema.js";

/** JSON with object keys sorted at every level, so equal values always give equal text. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => {
    if (v === null || typeof v !== "object" || Array.isArray(v)) return v;
    const o = v as Record<string, unknown>;
    // fromEntries defines own properties: a "__proto__" key stays a key instead of setting the prototype.
    return Object.fromEntries(Object.keys(o).sort().map((k) => [k, o[k]]));
  });
}

/** Storage form; `policyFromObject(JSON.parse(s))` gives the same policy back. */
export function serializePolicy(policy: Policy): string {
  return canonicalJson(policy);
}

/** "sha256:<hex>" of the canonical serialization. */
export function policyHash(policy: Policy): string {
  return `sha256:${createHash("sha256").update(serializePolicy(policy)).digest("hex")}`;
}

/** The sections fixed at creation that differ: a live update must leave this empty. */
export function changedFixedSections(previous: Policy, next: Policy): ("filesystem" | "process")[] {
  const changed: ("filesystem" | "process")[] = [];
  if (canonicalJson(previous.filesystem) !== canonicalJson(next.filesystem)) changed.push("filesystem");
  if (canonicalJson(previous.process) !== canonicalJson(next.process)) changed.push("process");
  return changed;
}
