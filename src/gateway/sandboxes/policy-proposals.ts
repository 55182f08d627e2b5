// Policy proposals: a policy change an agent proposes (through the API: the MCP server, a
// script) that only a person decides. A proposal is checked as `policy set` checks a
// policy and stored against the revision active then. Approving it applies it through
// the same path as `policy set` (SandboxService.setPolicy: a new revision, pushed to the
// supervisor) only while that revision is still the active one: a compare-and-set in the
// transaction that records the revision, so a change made meanwhile is never overwritten;
// the proposal is superseded instead. Each proposal and decision is an event in the
// sandbox's log and a record in its audit trail. Who may decide is the API's business
// (the approver token: src/gateway/api/proposals-routes.ts); this module only records it.

import { randomBytes } from "node:crypto";
import type { Logger } from "pino";
import type { PolicyChange } from "../../policy/diff.js";
import type { ReplayResult } from "../../policy/replay.js";
import type { ProposalRecord, ProposalState } from "../../store/contract.js";
import { StaleRevisionError, type Transaction, type SandboxRecord, type Store } from "../../store/contract.js";
import { policyHash } from "../../policy/index.js";
import { ApiError } from "../errors.js";
import type { ProposalView } from "../../api/responses.js";
import type { AuditWindow, PolicyTools } from "./policy-tools.js";
import type { SandboxReadModel } from "./read-model.js";
import type { SandboxService } from "./service.js";

export const PROPOSAL_ID_RE = /^pp_[0-9a-f]{16}$/;

export interface ProposalLimits {
  /** Pending proposals per sandbox; past it a new one is refused (409). */
  pending: number;
  /** Decided proposals kept per sandbox, the most recently decided; older ones are removed. */
  kept: number;
}

export const DEFAULT_PROPOSAL_LIMITS: ProposalLimits = { pending: DEFAULT_SETTINGS.proposalsPending, kept: DEFAULT_SETTINGS.proposalsKept };

import { BY_MAX, HIDDEN_CHARS, REASON_MAX } from "../../policy/proposals.js";
import { DEFAULT_SETTINGS } from "../settings.js";

export { BY_MAX, REASON_MAX };

/**
 * Characters a person's terminal would act on instead of showing: C0 controls but tab and
 * line ends, DEL, C1 controls, and the bidirectional and line-separator marks that can make
 * text read otherwise than it is (Trojan Source). A proposal is read by a person deciding
 * on it; what an agent wrote must show as written.
 */
const UNSHOWABLE = new RegExp(`[\\u0000-\\u0008\\u000b\\u000c\\u000e-\\u001f${HIDDEN_CHARS}]|\\r(?!\\n)`, "u");
/** The same in one-line fields (who, a reason): no line ends either. */
const UNSHOWABLE_LINE = new RegExp(`[\\u0000-\\u001f${HIDDEN_CHARS}]`, "u");

const where = (text: string, re: RegExp): string => {
  const i = text.search(re);
  return `U+${text.codePointAt(i)!.toString(16).toUpperCase().padStart(4, "0")} at character ${i + 1}`;
};

/** A `by` as given (trimmed), or the default; a 400 naming what is wrong. */
export function checkBy(raw: string | undefined, fallback: string): string {
  const by = (raw ?? fallback).trim();
  if (by.length === 0 || by.length > BY_MAX) throw new ApiError("invalid_request", `by: must be 1-${BY_MAX} characters; got ${by.length}`);
  if (UNSHOWABLE_LINE.test(by)) throw new ApiError("invalid_request", `by: must be printable text on one line; found ${where(by, UNSHOWABLE_LINE)}`);
  return by;
}

/** A reason as given (trimmed; empty is none); a 400 naming what is wrong. */
export function checkReason(raw: string | undefined, field = "reason"): string | null {
  const reason = raw?.trim() ?? "";
  if (reason.length > REASON_MAX) throw new ApiError("invalid_request", `${field}: must be at most ${REASON_MAX} characters; got ${reason.length}`);
  if (UNSHOWABLE_LINE.test(reason)) throw new ApiError("invalid_request", `${field}: must be printable text on one line; found ${where(reason, UNSHOWABLE_LINE)}`);
  return reason === "" ? null : reason;
}

function checkShowable(input: string | Record<string, unknown>): void {
  const text = typeof input === "string" ? input : JSON.stringify(input);
  if (UNSHOWABLE.test(text)) throw new ApiError("invalid_request", `invalid policy: a proposal is read by a person, so its text may hold no control or bidirectional characters; found ${where(text, UNSHOWABLE)}`);
}

export type { ProposalView };

/** One proposal with what it would change now: its text, the diff against the active policy, and the recorded traffic replayed under it. */
export interface ProposalDetail extends ProposalView {
  policy: string | Record<string, unknown>;
  activeRevision: number;
  diff: { revision: number; changes: PolicyChange[] };
  replay: { revision: number; window: AuditWindow } & ReplayResult;
}

export interface ProposalDeps {
  store: Store;
  read: SandboxReadModel;
  service: SandboxService;
  tools: PolicyTools;
  log: Logger;
  limits?: Partial<ProposalLimits>;
  now?: () => Date;
}

type Action = "proposed" | "approved" | "rejected" | "superseded";

export class PolicyProposals {
  readonly limits: ProposalLimits;
  readonly #now: () => Date;

  constructor(private readonly d: ProposalDeps) {
    this.limits = { ...DEFAULT_PROPOSAL_LIMITS, ...d.limits };
    this.#now = d.now ?? (() => new Date());
  }

  /** Store a proposal: checked as `policy set` checks a policy; an invalid one stores nothing (400). */
  async propose(nameOrId: string, input: string | Record<string, unknown>, meta: { by?: string; reason?: string } = {}): Promise<ProposalView> {
    const by = checkBy(meta.by, "api");
    const reason = checkReason(meta.reason);
    checkShowable(input);
    const { sandbox: s, policy, activeRevision } = await this.d.service.checkPolicyChange(nameOrId, input);
    const id = `pp_${randomBytes(8).toString("hex")}`;
    const at = this.#now().toISOString();
    await this.d.store.transact(async (tx) => {
      // Pending ones against an older revision can never be approved: they make room.
      for (const p of await tx.listProposals(s.id, "pending")) {
        if (p.baseRevision !== activeRevision) await this.#supersede(s, p, activeRevision, tx);
      }
      const pending = await tx.countPendingProposals(s.id);
      if (pending >= this.limits.pending) {
        throw new ApiError(
          "not_allowed",
          `sandbox "${s.name}" has ${pending} pending policy proposals, the limit (gateway start --proposals-pending); a person approves or rejects one first (sandgate policy proposals ${s.name})`,
        );
      }
      const record = { id, sandboxId: s.id, input, hash: policyHash(policy), baseRevision: activeRevision, proposedBy: by, reason, createdAt: at };
      if (!(await tx.insertProposal(record))) throw new ApiError("not_found", `no sandbox named "${s.name}"`);
      await this.#record(s, tx, "proposed", { ...record, state: "pending", decidedAt: null, decidedBy: null, decisionNote: null, revision: null }, `policy proposal ${id} by ${by} against revision ${activeRevision}${reason ? `: ${reason}` : ""}`);
      await tx.pruneDecidedProposals(s.id, this.limits.kept);
    });
    this.d.log.info({ sandboxId: s.id, proposal: id, by, baseRevision: activeRevision }, "policy proposal stored");
    return this.#view(s, await this.#get(s, id), activeRevision);
  }

  /** A sandbox's proposals, oldest first (at most the pending and kept limits). */
  async list(nameOrId: string, state?: ProposalState): Promise<ProposalView[]> {
    const s = await this.d.read.get(nameOrId);
    const active = (await this.d.read.policyOf(s.id)).revision;
    return (await this.d.store.listProposals(s.id, state)).map((p) => this.#view(s, p, active));
  }

  /** One proposal, with its diff against the active policy and the recorded traffic replayed under it (`since`: from then). */
  async show(nameOrId: string, id: string, since?: string): Promise<ProposalDetail> {
    const s = await this.d.read.get(nameOrId);
    const p = await this.#get(s, id);
    const diff = await this.d.tools.diff(s.id, p.input);
    const replay = await this.d.tools.replay(s.id, p.input, since);
    return { ...this.#view(s, p, diff.revision), policy: p.input, activeRevision: diff.revision, diff, replay };
  }

  /**
   * Apply a pending proposal as a new revision, through the same path as `policy set`,
   * only while its base revision is still active. When the policy changed since, the
   * proposal is superseded and this is a 409 (stale_revision).
   */
  async approve(nameOrId: string, id: string, byRaw: string | undefined): Promise<{ proposal: ProposalView } & Awaited<ReturnType<SandboxService["setPolicy"]>>> {
    const by = checkBy(byRaw, "approver");
    // Approving pushes the policy to the sandbox's supervisor: its host's gateway does it.
    const s = await this.d.read.driven(nameOrId);
    const p = this.#pending(s, await this.#get(s, id), "approve");
    let result: Awaited<ReturnType<SandboxService["setPolicy"]>>;
    // The answer is built from the record as decided, not read back: with --proposals-kept 0
    // the pruning in the same transaction has already removed it.
    let decided: ProposalRecord = p;
    try {
      result = await this.d.service.setPolicy(s.id, p.input, {
        expectRevision: p.baseRevision,
        within: async (revision, tx) => {
          const at = this.#now().toISOString();
          if (!(await tx.decideProposal(s.id, id, { state: "approved", at, by, note: null, revision }))) throw this.#decidedMeanwhile(s, id);
          decided = { ...p, state: "approved", decidedAt: at, decidedBy: by, revision };
          await this.#record(s, tx, "approved", decided, `policy proposal ${id} approved by ${by}: revision ${revision}`);
          await tx.pruneDecidedProposals(s.id, this.limits.kept);
        },
      });
    } catch (err) {
      if (!(err instanceof StaleRevisionError)) throw err;
      await this.d.store.transact(async (tx) => {
        await this.#supersede(s, p, err.active, tx);
        await tx.pruneDecidedProposals(s.id, this.limits.kept);
      });
      throw new ApiError(
        "stale_revision",
        `the policy changed since; the proposal is stale: ${id} was proposed against revision ${p.baseRevision}, the active revision is ${err.active}; it is now superseded (propose the change again against the active policy)`,
      );
    }
    this.d.log.info({ sandboxId: s.id, proposal: id, by, revision: result.revision }, "policy proposal approved");
    return { proposal: this.#view(s, decided, result.revision), ...result };
  }

  async reject(nameOrId: string, id: string, byRaw: string | undefined, reasonRaw?: string): Promise<ProposalView> {
    const by = checkBy(byRaw, "approver");
    const note = checkReason(reasonRaw);
    const s = await this.d.read.get(nameOrId);
    const p = this.#pending(s, await this.#get(s, id), "reject");
    const decided = await this.d.store.transact(async (tx) => {
      const at = this.#now().toISOString();
      if (!(await tx.decideProposal(s.id, id, { state: "rejected", at, by, note, revision: null }))) throw this.#decidedMeanwhile(s, id);
      const r: ProposalRecord = { ...p, state: "rejected", decidedAt: at, decidedBy: by, decisionNote: note };
      await this.#record(s, tx, "rejected", r, `policy proposal ${id} rejected by ${by}${note ? `: ${note}` : ""}`);
      await tx.pruneDecidedProposals(s.id, this.limits.kept);
      return r;
    });
    this.d.log.info({ sandboxId: s.id, proposal: id, by }, "policy proposal rejected");
    return this.#view(s, decided, (await this.d.read.policyOf(s.id)).revision);
  }

  async #get(s: SandboxRecord, id: string): Promise<ProposalRecord> {
    if (!PROPOSAL_ID_RE.test(id)) throw new ApiError("invalid_request", `invalid proposal id ${JSON.stringify(id.slice(0, 80))}: expected pp_ and 16 hex digits, as policy propose printed`);
    const p = await this.d.store.getProposal(s.id, id);
    if (!p) throw new ApiError("not_found", `no policy proposal ${id} for sandbox "${s.name}" (decided ones are kept up to gateway start --proposals-kept)`);
    return p;
  }

  #pending(s: SandboxRecord, p: ProposalRecord, verb: "approve" | "reject"): ProposalRecord {
    if (p.state === "pending") return p;
    const how = p.state === "approved" ? `approved by ${p.decidedBy ?? "?"} as revision ${p.revision ?? "?"}` : p.state === "rejected" ? `rejected by ${p.decidedBy ?? "?"}` : `superseded (${p.decisionNote ?? "the policy changed"})`;
    throw new ApiError("not_allowed", `cannot ${verb} policy proposal ${p.id} of sandbox "${s.name}": it was already ${how}; only a pending proposal can be decided`);
  }

  #decidedMeanwhile(s: SandboxRecord, id: string): ApiError {
    return new ApiError("not_allowed", `policy proposal ${id} of sandbox "${s.name}" was decided by another request meanwhile; nothing was changed by this one`);
  }

  async #supersede(s: SandboxRecord, p: ProposalRecord, active: number, tx: Transaction): Promise<void> {
    const at = this.#now().toISOString();
    const note = `the policy changed since: proposed against revision ${p.baseRevision}, the active revision is ${active}`;
    if (!(await tx.decideProposal(s.id, p.id, { state: "superseded", at, by: "gateway", note, revision: null }))) return;
    await this.#record(s, tx, "superseded", { ...p, state: "superseded", decidedAt: at, decidedBy: "gateway", decisionNote: note }, `policy proposal ${p.id} superseded: ${note}`);
  }

  /** The event in the sandbox's log and the record in its audit trail, in the caller's transaction. */
  async #record(s: SandboxRecord, tx: Transaction, action: Action, p: ProposalRecord, message: string): Promise<void> {
    const data = {
      type: "policy_proposal",
      action,
      proposal: p.id,
      by: action === "proposed" ? p.proposedBy : p.decidedBy,
      baseRevision: p.baseRevision,
      hash: p.hash,
      ...(p.reason === null ? {} : { reason: p.reason }),
      ...(p.revision === null ? {} : { revision: p.revision }),
      ...(p.decisionNote === null ? {} : { note: p.decisionNote }),
    };
    await tx.info(s, message, data);
    const time = action === "proposed" ? p.createdAt : (p.decidedAt ?? p.createdAt);
    await tx.appendAudit([{ sandboxId: s.id, generation: s.generation, time, decision: "policy", count: 1, event: { ...data, time } }]);
  }

  #view(s: SandboxRecord, p: ProposalRecord, activeRevision: number): ProposalView {
    return {
      id: p.id,
      sandbox: s.name,
      state: p.state,
      stale: p.state === "pending" && p.baseRevision !== activeRevision,
      baseRevision: p.baseRevision,
      revision: p.revision,
      proposedBy: p.proposedBy,
      reason: p.reason,
      createdAt: p.createdAt,
      decidedAt: p.decidedAt,
      decidedBy: p.decidedBy,
      decisionNote: p.decisionNote,
      hash: p.hash,
    };
  }
}
