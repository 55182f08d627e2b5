// What the gateway's state is, apart from how it is kept: the records the store reads
// and writes and the errors its compare-and-sets throw. It imports no implementation
// (no SQLite, nothing of src/store but other contracts), so another store (the fleet's
// PostgreSQL one) can be written against it alone.

import type { RuntimeRecord } from "../driver/contract.js";
import type { LifecycleState } from "../lifecycle/machine.js";
import type { Phase, SandboxReason } from "../lifecycle/phases.js";
import type { SandboxSpec } from "../lifecycle/spec.js";
import type { Policy } from "../policy/index.js";
import type { ProposalState } from "../policy/proposals.js";
import type { HostState } from "../lifecycle/placement.js";
import { SandgateError } from "../util/errors.js";

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
  /** The host whose Docker daemon runs it (`--host-name`); its gateway alone drives it. '' on a row of the embedded store from before hosts were recorded. */
  host: string;
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
  host: string;
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
  /** The host that runs it (SandboxRecord.host). */
  host: string;
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

/** A live sandbox that may expire: it has a TTL deadline or an --idle-stop. */
export interface ExpiringRow {
  id: string;
  name: string;
  phase: Phase;
  generation: number;
  ttlDeadline: string | null;
  ttlSeconds: number | null;
  idleStopSeconds: number | null;
  lastActive: string | null;
}

/**
 * What one generation's egress came to, over its audit records as retained (at most the
 * audit retention's records per sandbox, so the query is bounded and so is what it sums).
 * Requests count decisions (a record stands for `count` repeats); a tunnel's close record
 * carries its bytes but is not another decision. A policy proposal's record is not egress.
 */
export interface EgressTotals {
  bytesOut: number;
  bytesIn: number;
  /** Let through: allowed, and would_deny (audit mode). */
  allowed: number;
  denied: number;
  /** The part of `allowed` that enforcing would have denied. */
  wouldDeny: number;
  /** Decisions the gateway's audit rate limit dropped: not in the counts above. */
  dropped: number;
  /** The oldest record summed (null: none): retention may have removed older ones. */
  since: string | null;
}

export type { ProposalState };

export interface ProposalRecord {
  id: string;
  sandboxId: string;
  /** The policy as it was given: YAML text, or an object. */
  input: string | Record<string, unknown>;
  hash: string;
  /** The active revision it was proposed against: approving it needs that one still active. */
  baseRevision: number;
  proposedBy: string;
  reason: string | null;
  state: ProposalState;
  createdAt: string;
  decidedAt: string | null;
  decidedBy: string | null;
  /** Why it was rejected, or superseded. */
  decisionNote: string | null;
  /** The revision its approval made. */
  revision: number | null;
}

/** A secret's value as stored: the AEAD's nonce, ciphertext and tag. */
export interface SealedSecret {
  nonce: Buffer;
  ciphertext: Buffer;
  tag: Buffer;
}

export interface SecretRecord extends SealedSecret {
  name: string;
  version: number;
  createdAt: string;
  updatedAt: string;
}

/** What a listing shows: no sealed value, only its size. */
export interface SecretSummary {
  name: string;
  version: number;
  /** The ciphertext's length: the value's (GCM does not pad). */
  bytes: number;
  createdAt: string;
  updatedAt: string;
}

/** Writes info events inside a Store.transact transaction. */
export interface InfoWriter {
  info(sandbox: { id: string; name: string; generation: number }, message: string, data?: unknown): Promise<void>;
}

export class DuplicateNameError extends SandgateError {
  override readonly name = "DuplicateNameError";
  constructor(message: string, options?: ErrorOptions) {
    super(message, "already_exists", options);
  }
}

/** A compare-and-set on the active policy revision lost: it is no longer the one expected. */
export class StaleRevisionError extends SandgateError {
  override readonly name = "StaleRevisionError";
  constructor(
    readonly expected: number,
    readonly active: number,
  ) {
    super(`the active policy revision is ${active}, not ${expected}`, "stale_revision");
  }
}

/** A sandbox as another table's write names it (its event carries the name and generation). */
export interface SandboxRef {
  id: string;
  name: string;
  generation: number;
}

/** A decision on a pending proposal. */
export interface ProposalDecision {
  state: Exclude<ProposalState, "pending">;
  at: string;
  by: string;
  note: string | null;
  revision: number | null;
}

// ---------------------------------------------------------------------------
// The operations, grouped by table. Every operation the gateway uses is here; the
// gateway holds a `Store` (this interface) and never the implementation, which it
// creates in one place (src/gateway/gateway.ts). The embedded implementation is SQLite
// (src/store/store.ts); the fleet's PostgreSQL store implements the same.
//
// What an implementation owes, whatever it runs on:
//  - A compare-and-set (transition, setRuntime, settleTeardown, deleteSandbox,
//    addPolicy's expectRevision, decideProposal, setTtlDeadline) writes only when the
//    row is still as expected, atomically with that check: of two writers expecting the
//    same state, exactly one wins.
//  - A change and the event recording it commit together or not at all
//    (createSandbox, transition, deleteSandbox, addPolicy, transact), and the event
//    reaches onEvent listeners only after the commit, in commit order.
//  - `transact`'s function and addPolicy's `within` run inside the transaction: what
//    they write through the store commits with it, and a throw rolls all of it back.
//
// Asynchronous, so that a store over the network (PostgreSQL) is the same to its callers.
// A transaction is one connection there: what `transact`'s function and addPolicy's
// `within` read and write goes through the Transaction handle they are given, never
// through the store itself (which an implementation may hold back until the transaction
// ends: SqliteStore does, as its one connection is inside it).
// ---------------------------------------------------------------------------

/** The sandboxes table, with what spans it: a sandbox's labels, first policy revision and phase events. */
export interface SandboxesTable {
  /** A new sandbox at generation 1, Provisioning, with its first policy revision and its "created" event; DuplicateNameError when the name is taken. */
  createSandbox(input: NewSandbox): Promise<SandboxRecord>;
  /** Look up by id or by name. */
  get(idOrName: string): Promise<SandboxRecord | null>;
  /** Every sandbox, oldest first. */
  list(): Promise<SandboxRecord[]>;
  /** A page by name (see ListQuery). */
  listPage(q: ListQuery): Promise<SandboxRecord[]>;
  /** listPage's rows with only the columns a list shows (no spec). */
  listSummaries(q: ListQuery): Promise<SandboxSummary[]>;
  /** Compare-and-set a phase change with its event: the updated record, or null when the sandbox is no longer at write.expect. */
  transition(id: string, write: TransitionWrite): Promise<SandboxRecord | null>;
  /** Record the runtime of a generation, only while it is still that generation and phase. */
  setRuntime(id: string, expect: { phase: Phase; generation: number }, runtime: RuntimeRecord | null): Promise<boolean>;
  /** The containers of `generation` and older are gone: settle the teardown owed for them, and clear a failed or completed generation's runtime. */
  settleTeardown(id: string, generation: number): Promise<boolean>;
  /** Remove a sandbox that is Deleting at that generation, and its audit trail, with its "deleted" event; its events stay. False when it is not. */
  deleteSandbox(id: string, expect: { generation: number }): Promise<boolean>;
  /** How many sandboxes are in each phase; every phase present. */
  countByPhase(): Promise<Record<Phase, number>>;
}

/** The expiry columns of the sandboxes table (--ttl, --idle-stop). */
export interface ExpiryColumns {
  /** Every live sandbox with a TTL deadline or an idle stop. */
  expiringSandboxes(): Promise<ExpiringRow[]>;
  /** The TTL deadline of `generation` (null: none); false when the sandbox is no longer at it. */
  setTtlDeadline(id: string, generation: number, deadline: string | null): Promise<boolean>;
  /** Last activity of several sandboxes, in one transaction; a time never moves back. */
  recordActivity(entries: Iterable<[id: string, time: string]>): Promise<void>;
  expiryColumns(id: string): Promise<{ ttlDeadline: string | null; lastActive: string | null } | null>;
}

/** Numbered policy revisions per sandbox; the active one is the highest. */
export interface PolicyRevisions {
  /** The active revision, or null. */
  policy(sandboxId: string): Promise<PolicyRevision | null>;
  /**
   * A new revision numbered after the highest, with its info event; returns its number.
   * `expectRevision`: a compare-and-set on the active revision (else StaleRevisionError,
   * nothing written). `within` runs in the same transaction once it is written.
   */
  addPolicy(
    sandbox: SandboxRef,
    policy: Policy,
    source?: string | null,
    opts?: { expectRevision?: number; within?: (revision: number, tx: Transaction) => Promise<void> },
  ): Promise<number>;
}

/** The lifecycle event log, numbered across sandboxes. */
export interface EventLog {
  /** Called after every committed event (watch streams); returns the unsubscribe. */
  onEvent(listener: (e: EventRecord) => void): () => void;
  /** Run `fn` in one transaction; the info events it writes through `tx` are emitted once it commits, none when it throws (and nothing it wrote stays). */
  transact<T>(fn: (tx: Transaction) => Promise<T>): Promise<T>;
  /** Append an info event for a sandbox (its own transaction). */
  appendEvent(sandbox: SandboxRef, kind: "info", message: string, data?: unknown): Promise<EventRecord>;
  /** When the sandbox last entered `phase` from another phase (ISO time), or null. */
  enteredPhaseAt(sandboxId: string, phase: Phase): Promise<string | null>;
  /** A window of a sandbox's events, oldest first. */
  events(sandboxId: string, q?: LogQuery): Promise<EventRecord[]>;
  /** Events of every sandbox after a sequence number, oldest first (a watch stream resuming). */
  eventsAfter(afterSeq: number, limit?: number): Promise<EventRecord[]>;
}

/** The egress audit trail, with the retention of both logs. */
export interface AuditTrail {
  /** A window of a sandbox's audit trail, oldest first; `decision` and `since` (ISO, inclusive) narrow it. */
  audit(sandboxId: string, q?: LogQuery & { decision?: string; since?: string }): Promise<AuditRecord[]>;
  /** Append records, all or none. */
  appendAudit(records: Omit<AuditRecord, "seq">[]): Promise<void>;
  /** One generation's egress totals over its retained records. */
  egressTotals(sandboxId: string, generation: number): Promise<EgressTotals>;
  /** Retention of the audit trail and the event log (a live sandbox's events are kept whatever their age); the rows removed. */
  prune(audit: Retention, events: Retention): Promise<{ audit: number; events: number }>;
}

/** Policy proposals: decided once, by a compare-and-set from pending. */
export interface ProposalsTable {
  /** A new pending proposal; false when its sandbox is gone. */
  insertProposal(p: Pick<ProposalRecord, "id" | "sandboxId" | "input" | "hash" | "baseRevision" | "proposedBy" | "reason" | "createdAt">): Promise<boolean>;
  getProposal(sandboxId: string, id: string): Promise<ProposalRecord | null>;
  /** A sandbox's proposals, oldest first; only those in `state` when given. */
  listProposals(sandboxId: string, state?: ProposalState): Promise<ProposalRecord[]>;
  countPendingProposals(sandboxId: string): Promise<number>;
  /** True when it was pending and now is decided; false when someone decided it first. */
  decideProposal(sandboxId: string, id: string, d: ProposalDecision): Promise<boolean>;
  /** Keep only the `keep` most recently decided; returns how many went. */
  pruneDecidedProposals(sandboxId: string, keep: number): Promise<number>;
}

/** Secrets, sealed by the gateway before they reach the store. */
export interface SecretsTable {
  /** Create or replace; the new version (the version read and the write are one transaction). */
  putSecret(name: string, sealed: SealedSecret, time: string): Promise<number>;
  getSecret(name: string): Promise<SecretRecord | null>;
  /** Every secret, by name, without its value. */
  listSecrets(): Promise<SecretSummary[]>;
  /** True when there was one. */
  deleteSecret(name: string): Promise<boolean>;
  /**
   * Called with a secret's name after a gateway sharing the store (a fleet's; this one too)
   * set or deleted it, or with null when any may have changed (read them all again). A store
   * only its own gateway writes never calls it. Returns the unsubscribe.
   */
  onSecretChange(listener: (name: string | null) => void): () => void;
}

/** What a transaction's function writes and reads through (see above): its info events, the proposals, the audit trail. */
export interface Transaction extends InfoWriter, ProposalsTable, Pick<AuditTrail, "appendAudit"> {}

/** A host of a fleet (placement.ts's HostState), with its lease as last taken and all its sandboxes. */
export interface HostRecord extends HostState {
  /** Who took the host's lease last (null: nobody ever did); `driven` says whether it still holds it. */
  lease: { gatewayId: string; pid: number; epoch: number; since: string } | null;
  total: number;
}

/** The hosts of a store several hosts share (PostgreSQL). */
export interface FleetHosts {
  /** Every host with a lease or a sandbox, by name. */
  hosts(): Promise<HostRecord[]>;
}

/** All of the gateway's persistence. */
export interface Store extends SandboxesTable, ExpiryColumns, PolicyRevisions, EventLog, AuditTrail, ProposalsTable, SecretsTable {
  /** The fleet's hosts; null on a store of one host (the embedded SQLite). */
  readonly fleet: FleetHosts | null;
  /** False once closed: a last write at shutdown asks first. */
  readonly isOpen: boolean;
  /** Release the store (a network store waits for its connections to end). */
  close(): void | Promise<void>;
}
