// Rows as both stores read them (SQLite and PostgreSQL have the same columns), and the
// records they make: one mapping, so the two stores cannot drift apart in what they return.

import type { Phase, SandboxReason } from "../lifecycle/phases.js";
import type { EventKind, EventRecord, ProposalRecord, ProposalState } from "./contract.js";

export interface EventRow {
  seq: number;
  sandbox_id: string;
  sandbox_name: string;
  generation: number;
  kind: string;
  old_phase: string | null;
  new_phase: string | null;
  reason: string | null;
  message: string | null;
  data: string | null;
  time: string;
}

export function toEvent(row: EventRow): EventRecord {
  return {
    seq: row.seq,
    sandboxId: row.sandbox_id,
    sandboxName: row.sandbox_name,
    generation: row.generation,
    kind: row.kind as EventKind,
    oldPhase: row.old_phase as Phase | null,
    newPhase: row.new_phase as Phase | null,
    reason: row.reason === null ? null : (JSON.parse(row.reason) as SandboxReason),
    message: row.message,
    data: row.data === null ? null : (JSON.parse(row.data) as unknown),
    time: row.time,
  };
}

export interface ProposalRow {
  id: string;
  sandbox_id: string;
  input: string;
  hash: string;
  base_revision: number;
  proposed_by: string;
  reason: string | null;
  state: string;
  created_at: string;
  decided_at: string | null;
  decided_by: string | null;
  decision_note: string | null;
  revision: number | null;
}

export const toProposal = (r: ProposalRow): ProposalRecord => ({
  id: r.id,
  sandboxId: r.sandbox_id,
  input: JSON.parse(r.input) as string | Record<string, unknown>,
  hash: r.hash,
  baseRevision: r.base_revision,
  proposedBy: r.proposed_by,
  reason: r.reason,
  state: r.state as ProposalState,
  createdAt: r.created_at,
  decidedAt: r.decided_at,
  decidedBy: r.decided_by,
  decisionNote: r.decision_note,
  revision: r.revision,
});
