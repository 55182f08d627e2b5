import type { Policy } from "../policy/core.js";
import type { LaunchPolicy } from "../protocol/launch.js";

export type LoadedPolicy = LaunchPolicy;

export type PolicyListener = (loaded: LoadedPolicy | undefined) => void;

/**
 * The supervisor's one mutable reference to the active policy. Undefined means
 * "no policy": callers must deny everything. A later control session replaces
 * the policy at runtime through replace(); listeners learn about each change.
 */
export class PolicyHolder {
  #loaded: LoadedPolicy | undefined;
  readonly #listeners = new Set<PolicyListener>();

  constructor(initial?: LoadedPolicy) {
    this.#loaded = initial;
  }

  current(): LoadedPolicy | undefined {
    return this.#loaded;
  }

  /**
   * Installs a policy. Revisions only move forward: a delayed or replayed update
   * (e.g. after a control-session reconnect) must not roll back a newer policy.
   * Returns false when the update was ignored for that reason.
   */
  replace(policy: Policy, revision: number): boolean {
    if (!Number.isSafeInteger(revision)) throw new TypeError(`policy revision must be an integer, got ${String(revision)}`);
    const prev = this.#loaded;
    if (prev !== undefined && revision <= prev.revision) return false;
    this.#loaded = { policy, revision };
    this.#notify();
    return true;
  }

  /** Drops the policy: from now on everything is denied. */
  clear(): void {
    if (this.#loaded === undefined) return;
    this.#loaded = undefined;
    this.#notify();
  }

  /** Subscribes to changes; returns the unsubscribe function. */
  onChange(listener: PolicyListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  #notify(): void {
    const loaded = this.#loaded;
    for (const listener of this.#listeners) listener(loaded);
  }
}
