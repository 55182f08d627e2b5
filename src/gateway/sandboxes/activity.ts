// What --idle-stop watches: the last exec, connect or egress of each sandbox, and the
// exec and connect sessions open now. In memory and O(1) per observation (an egress
// record, a session's start and end); the expiry sweeper writes it to the store in
// batches and decides. One record per sandbox, and the ids not yet written in a set of
// their own, so a sweep costs O(dirty), not O(sandboxes).

export type ActivityKind = "touch" | "sessionEnd";

/** What is known of one sandbox's activity. */
interface Activity {
  /** The last exec, connect or egress (ms since the epoch), if any. */
  last?: number;
  /** Exec and connect sessions open now. */
  open: number;
}

export class ActivityTracker {
  readonly #by = new Map<string, Activity>();
  /** The sandboxes whose `last` changed since the sweeper last wrote it. */
  readonly #dirty = new Set<string>();
  #listener: ((sandboxId: string, kind: ActivityKind) => void) | undefined;

  constructor(private readonly now: () => number = Date.now) {}

  /** Called after each observation (the sweeper's hook; one listener). */
  onActivity(listener: (sandboxId: string, kind: ActivityKind) => void): void {
    this.#listener = listener;
  }

  /** Something happened in the sandbox now (or at `atMs`, never earlier than what is known). */
  touch(sandboxId: string, atMs = this.now()): void {
    const a = this.#of(sandboxId);
    if ((a.last ?? -Infinity) >= atMs) return;
    a.last = atMs;
    this.#dirty.add(sandboxId);
    this.#listener?.(sandboxId, "touch");
  }

  #of(sandboxId: string): Activity {
    let a = this.#by.get(sandboxId);
    if (!a) this.#by.set(sandboxId, (a = { open: 0 }));
    return a;
  }

  /** An exec or connect session opens; the returned function (idempotent) closes it. */
  begin(sandboxId: string): () => void {
    this.#of(sandboxId).open++;
    this.touch(sandboxId);
    let open = true;
    return () => {
      if (!open) return;
      open = false;
      // Forgotten meanwhile (deleted): nothing of it comes back but this session's end.
      const a = this.#by.get(sandboxId);
      if (a && a.open > 0) a.open--;
      this.touch(sandboxId);
      this.#listener?.(sandboxId, "sessionEnd");
    };
  }

  openSessions(sandboxId: string): number {
    return this.#by.get(sandboxId)?.open ?? 0;
  }

  lastActive(sandboxId: string): number | undefined {
    return this.#by.get(sandboxId)?.last;
  }

  get dirty(): number {
    return this.#dirty.size;
  }

  /** The observations not yet written, cleared (the sweeper writes them in one transaction). */
  takeDirty(): [string, number][] {
    const out: [string, number][] = [];
    for (const id of this.#dirty) out.push([id, this.#by.get(id)!.last!]);
    this.#dirty.clear();
    return out;
  }

  /** The sandbox is gone: nothing of it is kept, nor written. */
  forget(sandboxId: string): void {
    this.#by.delete(sandboxId);
    this.#dirty.delete(sandboxId);
  }
}
