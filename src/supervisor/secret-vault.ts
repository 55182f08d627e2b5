// The secret values a supervisor holds: in memory only, replaced whole by the gateway over
// the authenticated control session, dropped (and overwritten) on lockdown. Nothing here
// logs or returns a value except get(), which the proxy's credential swap calls.
import type { SecretValues } from "./credentials.js";

export class SecretVault implements SecretValues {
  #values = new Map<string, Buffer>();
  #version: number | null = null;

  /** Installs the whole set; versions only move forward. Returns false for a stale one. */
  replace(version: number, values: ReadonlyMap<string, Buffer>): boolean {
    if (this.#version !== null && version <= this.#version) return false;
    this.#wipe();
    this.#values = new Map(values);
    this.#version = version;
    return true;
  }

  get(name: string): Buffer | undefined {
    return this.#values.get(name);
  }

  /** Names held (safe to log). */
  names(): string[] {
    return [...this.#values.keys()].sort();
  }

  get version(): number | null {
    return this.#version;
  }

  /** Lockdown: every value goes; the next set comes with a later version. */
  clear(): void {
    this.#wipe();
  }

  #wipe(): void {
    for (const v of this.#values.values()) v.fill(0);
    this.#values = new Map();
  }
}
