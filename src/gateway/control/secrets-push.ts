// The secrets half of the control session, apart from policy revisions (boundary.ts):
// the values a sandbox's policy references, sent to its live session, and the supervisor's
// acks of them. Its own module because it is its own protocol: a version sequence of its
// own (not the policy revision), its own acks and waiters, and the one message that carries
// values. The registry decides when to push (a policy sent, a secret changed); this module
// builds and sends the message and keeps what was acked. Transport-free like the registry.
import { referencedSecrets, type Policy } from "../../policy/index.js";
import { ACCEPTS_SECRETS, type GatewayMessage } from "../../protocol/wire.js";
import { VersionWaiters } from "../../util/version-waiters.js";

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
  readonly #waiters: VersionWaiters<boolean>;

  /** `values` absent: no secrets are sent. `liveOf`: the sandbox's live session now, if any (its acks so far count). */
  constructor(values: SecretValuesSource | undefined, log: SecretsLog, liveOf: (sandboxId: string) => SecretsLink | undefined) {
    this.#values = values;
    this.#log = log;
    this.#waiters = new VersionWaiters({
      reached: (sandboxId, version) => {
        const live = liveOf(sandboxId);
        return (live === undefined ? -1 : (this.#acked.get(live) ?? -1)) >= version;
      },
      answer: () => true,
      missed: () => false,
    });
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
    this.#acked.set(link, Math.max(this.#acked.get(link) ?? 0, version));
    this.#waiters.advance(link.sandboxId);
  }

  /** Resolves true once the sandbox's supervisor acked `version` (or newer), false after timeoutMs. */
  wait(sandboxId: string, version: number, timeoutMs: number): Promise<boolean> {
    return this.#waiters.wait(sandboxId, version, timeoutMs);
  }

  /** The gateway closes: every wait resolves false. */
  close(): void {
    this.#waiters.close();
  }
}
