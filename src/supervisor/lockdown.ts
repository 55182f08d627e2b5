// A PolicyHolder that can be locked down: while locked, current() reports "no policy",
// so the proxy (which only reads current()) denies everything (reason policy_missing).
// The held policy and its revision order are kept untouched underneath, so lifting the
// lockdown never rolls anything back and a re-push of the same revision is a no-op.
import { PolicyHolder } from "./policy-holder.js";
import type { LoadedPolicy } from "./policy-holder.js";

export const LOCKDOWN_SESSION_LOST = "control_session_lost";

export type LockdownListener = (reason: string | null) => void;

export class LockdownPolicyHolder extends PolicyHolder {
  #lockdown: string | null = null;
  /** Locked down by the gateway for good: nothing lifts it for the life of this supervisor. */
  #sealed = false;
  readonly #lockListeners = new Set<LockdownListener>();

  override current(): LoadedPolicy | undefined {
    return this.#lockdown === null ? super.current() : undefined;
  }

  /** The policy that applies once the lockdown is lifted. */
  held(): LoadedPolicy | undefined {
    return super.current();
  }

  /** Null when not locked down. */
  lockdownReason(): string | null {
    return this.#lockdown;
  }

  lock(reason: string): void {
    if (this.#lockdown !== null) return;
    this.#lockdown = reason;
    for (const l of this.#lockListeners) l(reason);
  }

  /** A lockdown the gateway ordered (the sandbox failed, stops or is deleted): final. */
  seal(reason: string): void {
    this.#sealed = true;
    this.lock(reason);
  }

  get sealed(): boolean {
    return this.#sealed;
  }

  unlock(): void {
    if (this.#lockdown === null || this.#sealed) return;
    this.#lockdown = null;
    for (const l of this.#lockListeners) l(null);
  }

  onLockdown(listener: LockdownListener): () => void {
    this.#lockListeners.add(listener);
    return () => this.#lockListeners.delete(listener);
  }
}
