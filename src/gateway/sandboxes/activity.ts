// What --idle-stop watches: the last exec, connect or egress of each sandbox, and the
// exec and connect sessions open now. In memory and O(1) per observation (an egress
// record, a session's start and end); the expiry sweeper writes it to the store in
// batches and decides.

export type ActivityKind = "touch" | "sessionEnd";

export class ActivityTracker {
  readonly #last = new Map<string, number>();
  readonly #open = new Map<string, number>();
  readonly #dirty = new Set<string>();
  #listener: ((sandboxId: string, kind: ActivityKind) => void) | undefined;

  constructor(private readonly now: () => number = Date.now) {}

  /** Called after each observation (the sweeper's hook; one listener). */
  onActivity(listener: (sandboxId: string, kind: ActivityKind) => void): void {
    this.#listener = listener;
  }

  /** Something happened in the sandbox now (or at `atMs`, never earlier than what is known). */
  touch(sandboxId: string, atMs = this.now()): void {
    if ((this.#last.get(sandboxId) ?? -Infinity) >= atMs) return;
    this.#last.set(sandboxId, atMs);
    this.#dirty.add(sandboxId);
    this.#listener?.(sandboxId, "touch");
  }

  /** An exec or connect session opens; the returned function (idempotent) closes it. */
  begin(sandboxId: string): () => void {
    this.#open.set(sandboxId, (this.#open.get(sandboxId) ?? 0) + 1);
    this.touch(sandboxId);
    let open = true;
    return () => {
      if (!open) return;
      open = false;
      const n = (this.#open.get(sandboxId) ?? 1) - 1;
      if (n > 0) this.#open.set(sandboxId, n);
      else this.#open.delete(sandboxId);
      this.touch(sandboxId);
      this.#listener?.(sandboxId, "sessionEnd");
    };
  }

  openSessions(sandboxId: string): number {
    return this.#open.get(sandboxId) ?? 0;
  }

  lastActive(sandboxId: string): number | undefined {
    return this.#last.get(sandboxId);
  }

  get dirty(): number {
    return this.#dirty.size;
  }

  /** The observations not yet written, cleared (the sweeper writes them in one transaction). */
  takeDirty(): [string, number][] {
    const out = [...this.#dirty].map((id): [string, number] => [id, this.#last.get(id)!]);
    this.#dirty.clear();
    return out;
  }

  /** The sandbox is gone: nothing of it is kept. */
  forget(sandboxId: string): void {
    this.#last.delete(sandboxId);
    this.#open.delete(sandboxId);
    this.#dirty.delete(sandboxId);
  }
}
