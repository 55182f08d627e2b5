// What the gateway's state is, apart from how it is kept: the records the store reads
// and writes and the errors its compare-and-sets throw. It imports no implementation
// (no SQLite, nothing of src/store but other contracts), so another store (the fleet's
// PostgreSQL one) can be written against it alone.

import type { RuntimeRecord } from "../driver/contract.js";
import type { LifecycleState } from "../lifecycle/machine.js";
import type { Phase, SandboxReason } from "../lifecycle/phases.js";
import type { SandboxSpec } from "../lifecycle/spec.js";
import type { Policy } from "../policy/index.js";

export interface SandboxRecord {
  id: string;
  name: string;
  phase: Phase;
  reason: SandboxReason | null;
  generation: number;
  spec: SandboxSpec;
  runtime: RuntimeRecord | null;
  /** The generation whose containers (and any older ones) must still be removed, or null. */
  teardownOwed: number | null;
  /** The user's labels (src/lifecycle/labels.ts); kept here only, never on Docker objects. */
  labels: Record<string, string>;
  createdAt: string;
  updatedAt: string;
}

/** What a list row needs, read without parsing the spec or the runtime record. */
export interface SandboxSummary {
  id: string;
  name: string;
  phase: Phase;
  reason: SandboxReason | null;
  generation: number;
  /** The recorded runtime's generation and container ids, or null when there is none. */
  runtime: { generation: number; workloadId: string; supervisorId: string } | null;
  labels: Record<string, string>;
  createdAt: string;
  updatedAt: string;
}

/** A page of sandboxes in name order: the `limit` first after the name `after`, of one phase and carrying every label given. */
export interface ListQuery {
  after?: string;
  limit: number;
  phase?: Phase;
  /** key=value pairs a sandbox must all carry (AND). */
  labels?: readonly (readonly [string, string])[];
}

/** A new sandbox: generation 1, Provisioning, with its first policy revision. */
export interface NewSandbox {
  id: string;
  name: string;
  spec: SandboxSpec;
  policy: Policy;
  policySource?: string | null;
  labels?: Readonly<Record<string, string>>;
}

export interface TransitionWrite {
  expect: { phase: Phase; generation: number };
  next: LifecycleState;
  message?: string;
  /** undefined keeps the recorded runtime; null clears it. */
  runtime?: RuntimeRecord | null;
  /** A generation whose containers are now owed a teardown (kept at the highest owed). */
  oweTeardown?: number;
}

export type EventKind = "phase" | "deleted" | "info";

export interface EventRecord {
  seq: number;
  sandboxId: string;
  sandboxName: string;
  generation: number;
  kind: EventKind;
  oldPhase: Phase | null;
  newPhase: Phase | null;
  reason: SandboxReason | null;
  message: string | null;
  data: unknown;
  time: string;
}

/** One egress decision record of the audit trail (repeats aggregated into `count`). */
export interface AuditRecord {
  seq: number;
  sandboxId: string;
  generation: number;
  time: string;
  decision: string;
  count: number;
  event: Record<string, unknown>;
}

/** A window of a log: records after `afterSeq`, or before `beforeSeq`, or the last `tail` ones. */
export interface LogQuery {
  afterSeq?: number;
  beforeSeq?: number;
  /** The last N records (with afterSeq/beforeSeq: the last N inside that window). */
  tail?: number;
  limit?: number;
}

export interface Retention {
  /** Records kept per sandbox, newest first. */
  perSandbox: number;
  /** Records older than this (ms) go. */
  maxAgeMs: number;
}

export interface PolicyRevision {
  revision: number;
  policy: Policy;
  /** The text the user gave (YAML), when the revision came as text. */
  source: string | null;
  hash: string;
  createdAt: string;
}

/** Writes info events inside a Store.transact transaction. */
export interface InfoWriter {
  info(sandbox: { id: string; name: string; generation: number }, message: string, data?: unknown): void;
}

export class DuplicateNameError extends Error {
  override readonly name = "DuplicateNameError";
}

/** A compare-and-set on the active policy revision lost: it is no longer the one expected. */
export class StaleRevisionError extends Error {
  override readonly name = "StaleRevisionError";
  constructor(
    readonly expected: number,
    readonly active: number,
  ) {
    super(`the active policy revision is ${active}, not ${expected}`);
  }
}
