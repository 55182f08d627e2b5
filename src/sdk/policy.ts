// A sandbox's network policy: the active revision, a new one (pushed to the running
// supervisor, no restart), and a dry run of what it decides.

import type { z } from "zod";
import type { ProposalView as ProposalSchema } from "../api/responses.js";
import { SandgateError } from "./errors.js";
import type { Transport } from "./transport.js";
import type { BoundaryView, PolicySetResult, PolicyView } from "./types.js";

/** How long `set(..., { wait: true })` waits for the supervisor, in seconds. */
export const POLICY_WAIT_DEFAULT_S = 30;
/** The longest wait the gateway allows, in seconds. */
export const POLICY_WAIT_MAX_S = 600;

/** The boundary's state in one line (the CLI's `get` and `policy get` show it). */
export function boundaryLine(b: BoundaryView | null): string {
  if (!b) return "-";
  const beat = b.lastHeartbeatAt ? `last heartbeat ${b.lastHeartbeatAt}` : "no heartbeat";
  const rev = `enforced revision ${b.enforcedRevision ?? "-"} of desired ${b.desiredRevision ?? "-"}`;
  return `${b.healthy ? "healthy" : `UNHEALTHY (${b.problem ?? "?"})`}; session ${b.session}; ${beat}; ${rev}`;
}

export interface PolicyCheck {
  revision: number;
  decision: { allow: boolean; rule?: string; reason?: string };
}

/** A policy proposal (POST/GET /v1/sandboxes/:name/policy/proposals): a change only a person can approve. */
export type ProposalView = z.output<typeof ProposalSchema>;

export interface ProposeOptions {
  /** Why, for the person who decides (one line, at most 1000 characters). */
  reason?: string;
  /** Who proposes, as the event log records it (default "sdk"). */
  by?: string;
}

export class SandboxPolicy {
  constructor(
    private readonly t: Transport,
    private readonly sandbox: string,
  ) {}

  get #base(): string {
    return `/v1/sandboxes/${encodeURIComponent(this.sandbox)}/policy`;
  }

  /** The active revision, with the text it was given in. */
  get(): Promise<PolicyView> {
    return this.t.request<PolicyView>("GET", this.#base);
  }

  /**
   * A new revision: YAML text (docs/policy.md) or the parsed object. An invalid policy
   * changes nothing (`invalid_request`). With `wait` (true: POLICY_WAIT_DEFAULT_S, or
   * seconds up to POLICY_WAIT_MAX_S) it resolves once the supervisor enforces it and has
   * closed the open connections it no longer allows (`connectionsClosed`), or throws
   * `timeout` (the revision stays stored and is enforced when the supervisor takes it).
   */
  async set(policy: string | Record<string, unknown>, o: { wait?: boolean | number } = {}): Promise<PolicySetResult> {
    const wait = o.wait === true ? POLICY_WAIT_DEFAULT_S : o.wait === false || o.wait === undefined ? undefined : o.wait;
    if (wait !== undefined && (typeof wait !== "number" || !Number.isFinite(wait) || wait <= 0 || wait > POLICY_WAIT_MAX_S)) {
      throw new SandgateError(`wait: expected true or seconds from 1 to ${POLICY_WAIT_MAX_S}, got ${JSON.stringify(o.wait)}`, "invalid_request");
    }
    const body: Record<string, unknown> = { policy };
    if (wait !== undefined) body.wait = wait;
    // The gateway answers after the wait: the request's own deadline is past it.
    const signal = wait === undefined ? undefined : this.t.deadline(wait);
    const r = await this.t.request<PolicySetResult>("PUT", this.#base, body, signal);
    if (wait !== undefined && !r.enforced) {
      throw new SandgateError(`revision ${r.revision} is stored but the supervisor did not acknowledge it within ${wait} s (${boundaryLine(r.boundary)})`, "timeout");
    }
    return r;
  }

  /**
   * Proposes a new revision for a person to approve (`sandgate policy approve`): nothing
   * changes until then. Checked now as `set` checks it (`invalid_request`). The SDK
   * cannot approve: that needs the approver token, which it never reads.
   */
  propose(policy: string | Record<string, unknown>, o: ProposeOptions = {}): Promise<ProposalView> {
    const body: Record<string, unknown> = { policy, by: o.by ?? "sdk" };
    if (o.reason !== undefined) body.reason = o.reason;
    return this.t.request<ProposalView>("POST", `${this.#base}/proposals`, body);
  }

  /** The sandbox's proposals, in the order the gateway lists them; `state` filters. */
  async proposals(o: { state?: ProposalView["state"] } = {}): Promise<ProposalView[]> {
    const q = o.state === undefined ? "" : `?state=${encodeURIComponent(o.state)}`;
    return (await this.t.request<{ proposals: ProposalView[] }>("GET", `${this.#base}/proposals${q}`)).proposals;
  }

  /** What the active revision decides for a request to `url` (a dry run; nothing is sent). */
  check(url: string, o: { method?: string } = {}): Promise<PolicyCheck> {
    return this.t.request<PolicyCheck>("POST", `${this.#base}/check`, { url, method: o.method ?? "GET" });
  }
}
