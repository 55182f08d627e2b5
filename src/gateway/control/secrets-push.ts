// The secrets half of the control session, apart from policy revisions (boundary.ts):
// the values a sandbox's policy references, sent to its live session, and the supervisor's
// acks of them. Its own module because it is its own protocol: a version sequence of its
// own (not the policy revision), its own acks and waiters, and the one message that carries
// values. The registry decides when to push (a policy sent, a secret changed); this module
// builds and sends the message and keeps what was acked. Transport-free like the registry.
import { referencedSecrets, type Policy } from "../../policy/index.js";
import { ACCEPTS_SECRETS, type GatewayMessage } from "../../protocol/wire.js";

/**
 * The part of a control session (boundary.ts's SessionLink) secrets need; named here, not
 * imported, so the registry can import this module without a cycle.
 */
export interface SecretsLink {
  readonly sandboxId: string;
  readonly accepts?: ReadonlySet<string>;
  send(message: GatewayMessage): void;
}

export type SecretValuesSource = (names: readonly string[]) => Map<string, Buffer>;

/** A secrets message sent to one sandbox's live session. */
export interface SecretsPush {
  sandboxId: string;
  version: number;
}

export interface SecretsLog {
  info(obj: object, msg: string): void;
}

interface SecretsWaiter {
  version: number;
  resolve: (acked: boolean) => void;
  timer: NodeJS.Timeout;
}

export class SecretsPusher {
  readonly #values: SecretValuesSource | undefined;
  readonly #log: SecretsLog;
  /** One sequence for every secrets message: versions only grow, across sessions too. */
  #seq = 0;
  /**
   * Highest version each session acked. Per session (a link is one session): a reconnect
   * starts again from nothing, as the new supervisor process holds no values yet.
   */
  readonly #acked = new WeakMap<SecretsLink, number>();
  /** By sandbox, not session: an ack of a later session of the sandbox still answers a wait. */
  readonly #waiters = new Map<string, Set<SecretsWaiter>>();

  /** `values` absent: no secrets are sent. */
  constructor(values: SecretValuesSource | undefined, log: SecretsLog) {
    this.#values = values;
    this.#log = log;
  }

  /**
   * Sends the session the values its policy references (a missing secret is left out);
   * returns the message's version, or null when nothing was sent (no values source, or a
   * supervisor that does not accept secrets).
   */
  send(link: SecretsLink, policy: Policy): number | null {
    if (this.#values === undefined || link.accepts?.has(ACCEPTS_SECRETS) !== true) return null;
    const values = this.#values(referencedSecrets(policy));
    const version = ++this.#seq;
    link.send({ type: "secrets", version, secrets: Object.fromEntries([...values].map(([n, v]) => [n, v.toString("base64")])) });
    // Names only: the message itself is never logged.
    this.#log.info({ event: "supervisor_secrets_sent", sandboxId: link.sandboxId, version, names: [...values.keys()] }, "secrets sent to the supervisor");
    return version;
  }

  /** The (admitted, current) session acked `version`: waits for it or an older one resolve true. */
  acked(link: SecretsLink, version: number): void {
    const acked = Math.max(this.#acked.get(link) ?? 0, version);
    this.#acked.set(link, acked);
    const waiters = this.#waiters.get(link.sandboxId);
    for (const w of [...(waiters ?? [])]) {
      if (w.version > acked) continue;
      clearTimeout(w.timer);
      waiters!.delete(w);
      w.resolve(true);
    }
  }

  /**
   * Resolves true once the sandbox's supervisor acked `version` (or newer), false after
   * timeoutMs. `live` is the sandbox's live session now, if any (its acks so far count).
   */
  wait(sandboxId: string, live: SecretsLink | undefined, version: number, timeoutMs: number): Promise<boolean> {
    if ((live === undefined ? -1 : (this.#acked.get(live) ?? -1)) >= version) return Promise.resolve(true);
    return new Promise((resolve) => {
      const set = this.#waiters.get(sandboxId) ?? new Set();
      this.#waiters.set(sandboxId, set);
      const w: SecretsWaiter = {
        version,
        resolve,
        timer: setTimeout(() => {
          set.delete(w);
          resolve(false);
        }, timeoutMs),
      };
      set.add(w);
    });
  }

  /** The gateway closes: every wait resolves false. */
  close(): void {
    for (const set of this.#waiters.values()) {
      for (const w of set) {
        clearTimeout(w.timer);
        w.resolve(false);
      }
    }
    this.#waiters.clear();
  }
}
