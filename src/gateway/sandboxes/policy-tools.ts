// Reviewing a policy change before making it: what it changes (diff), what it would
// have decided for the traffic the audit trail recorded (replay), and which rules would
// allow what was denied for want of one (suggest). Reads only: nothing here changes a
// sandbox, its policy or its audit trail.

import { Document, parseDocument, stringify } from "yaml";
import { diffPolicies, type PolicyChange } from "../../policy/diff.js";
import { replay, type RecordedDecision, type ReplayResult } from "../../policy/replay.js";
import { suggestRules, type DeniedLookup } from "../../policy/suggest.js";
import { serializePolicy, type NetworkRule, type Policy, type Protocol } from "../../policy/index.js";
import type { AuditRecord } from "../../store/contract.js";
import { ApiError } from "../errors.js";
import { checkFilesystemPolicy, parsePolicyInput } from "./policy-input.js";
import type { SandboxReadModel } from "./read-model.js";
import type { AuditWindow } from "../../api/responses.js";

/** The API's shapes (src/api/responses.ts), named here for the code that builds them. */
export type { AuditWindow };

/** At most this many audit records are read for one replay or suggestion (newest first). */
export const MAX_REPLAY_RECORDS = 10_000;

const PROTOCOLS = new Set<string>(["http", "https", "tcp"]);
const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);

/** The egress decisions of an audit window; dropped-record markers, close records and malformed rows are skipped. */
export function recordedDecisions(records: readonly AuditRecord[]): RecordedDecision[] {
  const out: RecordedDecision[] = [];
  for (const r of records) {
    const e = r.event;
    const decision = e.decision;
    // A tunnel's close record repeats its opening's decision: only the decision counts.
    if (e.type !== "egress" || e.activity !== undefined || (decision !== "allow" && decision !== "deny" && decision !== "would_deny")) continue;
    const host = str(e.host);
    const protocol = str(e.protocol);
    if (host === undefined || protocol === undefined || !PROTOCOLS.has(protocol) || typeof e.port !== "number") continue;
    const method = str(e.method);
    const path = str(e.path);
    const reason = str(e.reason);
    const address = str(e.address);
    out.push({ host, port: e.port, protocol: protocol as Protocol, decision, count: r.count, time: r.time, ...(method ? { method } : {}), ...(path ? { path } : {}), ...(reason ? { reason } : {}), ...(address ? { address } : {}) });
  }
  return out;
}

/** The names the workload's resolver refused (dns_denied: refused, or answered only by audit mode), repeats counted. */
export function recordedLookups(records: readonly AuditRecord[]): DeniedLookup[] {
  const out: DeniedLookup[] = [];
  for (const r of records) {
    const e = r.event;
    const name = str(e.host);
    if (e.type !== "egress" || e.protocol !== "dns" || e.reason !== "dns_denied" || (e.decision !== "deny" && e.decision !== "would_deny") || name === undefined) continue;
    out.push({ name, count: r.count });
  }
  return out;
}

/** An RFC 3339 time from a user, as the ISO form records are stored in; a clear 400 otherwise. */
export function sinceTime(since: string | undefined): string | undefined {
  if (since === undefined) return undefined;
  const t = Date.parse(since);
  if (!Number.isFinite(t)) throw new ApiError("invalid_request", `since: ${JSON.stringify(since)} is not an RFC 3339 time (e.g. 2026-12-01T00:00:00Z)`);
  return new Date(t).toISOString();
}

export class PolicyTools {
  constructor(private readonly read: SandboxReadModel) {}

  private candidate(input: string | Record<string, unknown>) {
    const policy = parsePolicyInput(input);
    const fs = checkFilesystemPolicy(policy);
    if (fs) throw new ApiError("invalid_request", `invalid policy: ${fs}`);
    return policy;
  }

  private async window(sandboxId: string, since: string | undefined): Promise<{ decisions: RecordedDecision[]; lookups: DeniedLookup[]; window: AuditWindow }> {
    const cut = sinceTime(since);
    // Policy proposals' records (decision "policy") are not traffic.
    const rows = (await this.read.audit(sandboxId, { tail: MAX_REPLAY_RECORDS })).filter((r) => r.decision !== "policy" && (cut === undefined || r.time >= cut));
    const truncated = rows.length === MAX_REPLAY_RECORDS && (cut === undefined || (rows[0]?.time ?? "") > cut);
    const decisions = recordedDecisions(rows);
    return {
      decisions,
      lookups: recordedLookups(rows),
      window: { records: rows.length, requests: decisions.reduce((n, d) => n + d.count, 0), from: rows[0]?.time ?? null, to: rows.at(-1)?.time ?? null, truncated },
    };
  }

  async diff(nameOrId: string, input: string | Record<string, unknown>): Promise<{ revision: number; changes: PolicyChange[] }> {
    const active = await this.read.policyOf(nameOrId);
    return { revision: active.revision, changes: diffPolicies(active.policy, this.candidate(input)) };
  }

  async replay(nameOrId: string, input: string | Record<string, unknown>, since?: string): Promise<{ revision: number; window: AuditWindow } & ReplayResult> {
    const active = await this.read.policyOf(nameOrId);
    const candidate = this.candidate(input);
    const { decisions, window } = await this.window(active.sandbox.id, since);
    return { revision: active.revision, window, ...replay(decisions, candidate) };
  }

  /**
   * `yaml`: the sandbox's policy with the suggested rules added, a whole document that
   * `policy validate` and `policy set` take as it is (the user's own text kept, comments and
   * all, when the revision came as text); `rulesYaml`: the rules alone.
   */
  async suggest(nameOrId: string, since?: string): Promise<{ revision: number; window: AuditWindow; rules: NetworkRule[]; covers: number; fromLookups: string[]; privateHosts: string[]; yaml: string; rulesYaml: string }> {
    const active = await this.read.policyOf(nameOrId);
    const { decisions, lookups, window } = await this.window(active.sandbox.id, since);
    const s = suggestRules(decisions, active.policy, lookups);
    const none = s.rules.length === 0;
    return { revision: active.revision, window, ...s, yaml: none ? "" : suggestedPolicyYaml(active.policy, active.source, s.rules), rulesYaml: none ? "" : suggestionYaml(s.rules) };
  }
}

/** A rule as a user writes it (empty defaults left out). */
const plainRule = (r: NetworkRule): object => ({
  name: r.name,
  endpoints: r.endpoints.map((e) => ({ host: e.host, ports: e.ports, protocol: e.protocol, ...(e.rules ? { rules: e.rules } : {}), ...(e.allowPrivate.length > 0 ? { allowPrivate: e.allowPrivate } : {}) })),
});

/** The rules as the YAML a user pastes under network.rules. */
export function suggestionYaml(rules: readonly NetworkRule[]): string {
  return stringify({ network: { rules: rules.map(plainRule) } });
}

/** `current` (its source text when it has one, else its canonical form) with `rules` appended to network.rules. */
export function suggestedPolicyYaml(current: Policy, source: string | null, rules: readonly NetworkRule[]): string {
  const fromText = source === null ? null : parseDocument(source);
  const doc = fromText !== null && fromText.errors.length === 0 && fromText.contents !== null ? fromText : new Document(JSON.parse(serializePolicy(current)) as unknown);
  for (const r of rules) doc.addIn(["network", "rules"], doc.createNode(plainRule(r)));
  return doc.toString();
}
