// What the API reads: sandboxes, their event log, their active policy and their
// boundary health. Reads only; every write goes through the SandboxService.

import type { ComputeDriver } from "../../driver/contract.js";
import type { AuditRecord, EventRecord, ListQuery, LogQuery, PolicyRevision, SandboxRecord, SandboxSummary, Store } from "../../store/contract.js";
import type { BoundaryHealth } from "../control/boundary.js";
import type { ControlPlane } from "../control/control-plane.js";
import { ID_RE, checkSandboxName } from "../../lifecycle/spec.js";
import { ApiError, notFound } from "../errors.js";
import type { ActivityTracker } from "./activity.js";
import { everyHost, otherHost, type HostScope } from "./host-scope.js";
import type { DiskView, ExpiryView } from "../../api/responses.js";

/** The API's shapes (src/api/responses.ts), named here for the code that builds them. */
export type { DiskView, ExpiryView };

export interface Page<T> {
  sandboxes: T[];
  /** The cursor of the following page (pass it as `after`), null at the end. */
  next: string | null;
}

/** One row past the page tells whether another page follows, so the last page says null (no empty page to fetch). */
function cut<T extends { name: string }>(rows: T[], limit: number): Page<T> {
  if (rows.length <= limit) return { sandboxes: rows, next: null };
  const sandboxes = rows.slice(0, limit);
  return { sandboxes, next: sandboxes.at(-1)!.name };
}

export class SandboxReadModel {
  constructor(
    private readonly store: Store,
    private readonly control: ControlPlane | null,
    private readonly driver: ComputeDriver | null = null,
    private readonly activity: ActivityTracker | null = null,
    /** Which sandboxes this gateway drives (host-scope.ts). */
    readonly scope: HostScope = everyHost(""),
  ) {}

  /** By name or id; throws 404, or 400 for what can be neither (naming the rule). */
  async get(nameOrId: string): Promise<SandboxRecord> {
    const s = await this.store.get(nameOrId);
    if (s) return s;
    const bad = ID_RE.test(nameOrId) ? null : checkSandboxName(nameOrId);
    throw bad ? new ApiError("invalid_request", bad) : notFound(nameOrId);
  }

  /** As get(), for a request this gateway must drive itself: not_allowed (409) for a sandbox of another host. */
  async driven(nameOrId: string): Promise<SandboxRecord> {
    const s = await this.get(nameOrId);
    if (!this.scope.drives(s)) throw otherHost(s, this.scope);
    return s;
  }

  /**
   * The id to watch: of a sandbox by name or id, or the id of a deleted one whose
   * events are still in the log (a stream resuming after its deletion reads its last
   * events). Throws as get() for anything else.
   */
  async watchable(nameOrId: string): Promise<string> {
    if (ID_RE.test(nameOrId) && !await this.store.get(nameOrId) && (await this.store.events(nameOrId, { tail: 1 })).length > 0) return nameOrId;
    return (await this.get(nameOrId)).id;
  }

  /** By name or id, or null. */
  async find(nameOrId: string): Promise<SandboxRecord | null> {
    return await this.store.get(nameOrId);
  }

  async list(): Promise<SandboxRecord[]> {
    return await this.store.list();
  }

  /** A page in name order; `next` (the page's last name) when more follow, else null. */
  async listPage(q: ListQuery): Promise<Page<SandboxRecord>> {
    return cut(await this.store.listPage({ ...q, limit: q.limit + 1 }), q.limit);
  }

  /** listPage with only what a list shows (no spec, runtime parse, boundary or disk). */
  async listSummaries(q: ListQuery): Promise<Page<SandboxSummary>> {
    return cut(await this.store.listSummaries({ ...q, limit: q.limit + 1 }), q.limit);
  }

  async countByPhase(): Promise<Record<string, number>> {
    const counts: Record<string, number> = {};
    for (const s of await this.store.list()) counts[s.phase] = (counts[s.phase] ?? 0) + 1;
    return counts;
  }

  async events(sandboxId: string, q: LogQuery = {}): Promise<EventRecord[]> {
    return await this.store.events(sandboxId, q);
  }

  /** Events of every sandbox after `afterSeq` (a watch stream resuming). */
  async eventsAfter(afterSeq: number, limit?: number): Promise<EventRecord[]> {
    return await this.store.eventsAfter(afterSeq, limit);
  }

  async audit(sandboxId: string, q: LogQuery & { decision?: string; since?: string } = {}): Promise<AuditRecord[]> {
    return await this.store.audit(sandboxId, q);
  }

  /** Called after every committed event (watch streams); returns the unsubscribe function. */
  onEvent(listener: (e: EventRecord) => void): () => void {
    return this.store.onEvent(listener);
  }

  /** The workspace's size limit, and what it holds now when it is mounted. */
  diskOf(s: SandboxRecord): DiskView | null {
    if (s.spec.diskBytes === undefined) return null;
    // Another host's workspace is on another host's disk: its usage is unknown here.
    const usage = this.scope.drives(s) ? (this.driver?.workspaceUsage?.(s.id) ?? null) : null;
    return { limitBytes: s.spec.diskBytes, usedBytes: usage?.usedBytes ?? null, capacityBytes: usage?.capacityBytes ?? null };
  }

  /** The TTL deadline and activity; the activity in memory is newer than the store's (written coalesced). */
  async expiryOf(s: SandboxRecord): Promise<ExpiryView> {
    const cols = await this.store.expiryColumns(s.id);
    const seen = this.activity?.lastActive(s.id);
    return {
      ttlDeadline: cols?.ttlDeadline ?? null,
      lastActivityAt: seen === undefined ? (cols?.lastActive ?? null) : new Date(seen).toISOString(),
      openSessions: this.activity?.openSessions(s.id) ?? 0,
    };
  }

  boundaryOf(sandboxId: string): BoundaryHealth | null {
    return this.control?.boundary.health(sandboxId) ?? null;
  }

  async policyOf(nameOrId: string): Promise<{ sandbox: SandboxRecord; boundary: BoundaryHealth | null } & PolicyRevision> {
    const s = await this.get(nameOrId);
    const p = await this.store.policy(s.id);
    if (!p) throw new Error(`sandbox ${s.id} has no policy revision`);
    return { sandbox: s, ...p, boundary: this.boundaryOf(s.id) };
  }
}
