// Secrets from the store to the supervisors that need them: the values a sandbox's policy
// references (decrypted at send time, for the control session only), where each secret is
// bound across the sandboxes (for `secret list`), and the push of a changed secret to the
// running sandboxes that reference it, waited for like a policy revision.
import type { Logger } from "pino";
import { referencedSecrets, secretBindings } from "../../policy/index.js";
import type { Store } from "../../store/contract.js";
import type { BoundaryRegistry } from "../control/boundary.js";
import type { SecretValuesSource } from "../control/secrets-push.js";
import type { SecretStore } from "./secret-store.js";
import type { BoundIn, Delivery } from "../../api/responses.js";

/** The API's shapes (src/api/responses.ts), named here for the code that builds them. */
export type { BoundIn, Delivery };

/** The values that exist of the named secrets; one that cannot be decrypted is left out (and logged by name). */
export function secretValuesFrom(secrets: SecretStore, log: Logger): SecretValuesSource {
  return (names) => {
    const out = new Map<string, Buffer>();
    for (const name of names) {
      try {
        const v = secrets.reveal(name);
        if (v !== null) out.set(name, v);
      } catch (err) {
        // The error names the secret and the key file only.
        log.warn({ event: "secret_unreadable", secret: name, err: (err as Error).message }, "a secret cannot be decrypted: not sent (its placeholders fail closed)");
      }
    }
    return out;
  };
}

export class SecretDelivery {
  constructor(
    private readonly store: Store,
    private readonly boundary: BoundaryRegistry | null,
  ) {}

  /** Where each sandbox's active policy binds the secret. */
  async bindings(name: string): Promise<BoundIn[]> {
    const out: BoundIn[] = [];
    for (const s of await this.store.list()) {
      const p = await this.store.policy(s.id);
      if (p === null) continue;
      for (const b of secretBindings(p.policy, name)) out.push({ sandbox: s.name, ...b, ports: [...b.ports], paths: b.paths && [...b.paths] });
    }
    return out;
  }

  async usedBy(name: string): Promise<string[]> {
    const out: string[] = [];
    for (const s of await this.store.list()) {
      const p = await this.store.policy(s.id);
      if (p !== null && referencedSecrets(p.policy).includes(name)) out.push(s.name);
    }
    return out;
  }

  /** After a set or delete: the new values to every running sandbox that references it; waits up to waitMs for the acks. */
  async deliver(name: string, waitMs: number | null): Promise<Delivery> {
    const pushes = this.boundary?.secretChanged(name) ?? [];
    const nameOf = async (id: string): Promise<string> => (await this.store.get(id))?.name ?? id;
    const pushed = await Promise.all(pushes.map((p) => nameOf(p.sandboxId)));
    if (waitMs === null) return { pushed, acknowledged: null, pending: null };
    const acked = await Promise.all(pushes.map((p) => this.boundary!.waitForSecrets(p.sandboxId, p.version, waitMs)));
    return { pushed, acknowledged: pushed.filter((_n, i) => acked[i]), pending: pushed.filter((_n, i) => !acked[i]) };
  }
}
