// Secrets the supervisor injects into requests the workload makes, so the workload
// never holds them. Values are encrypted at rest with AES-256-GCM under a key that
// lives in its own file in the gateway's home (mode 0600), apart from state.db: a
// copy of the database alone reveals nothing. The name is the AEAD's associated
// data, so a ciphertext cannot be moved to another name. Values never appear in a
// return value meant for display, an error message or a log line.

import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { join } from "node:path";
import { writeSecretFileOnce } from "../../util/secret-file.js";
import type { SealedSecret, Store } from "../../store/contract.js";

import { checkSecretName } from "../../policy/index.js";
import { MAX_SECRET_BYTES } from "../../api/schemas.js";
import type { SecretInfo } from "../../api/responses.js";

/** The API's shapes (src/api/responses.ts), named here for the code that builds them. */
export type { SecretInfo };

export { checkSecretName, SECRET_NAME_RULE } from "../../policy/index.js";
export const SECRETS_KEY_FILE = "secrets.key";
/** Largest secret value accepted: the API's limit (src/api/schemas.ts). */
export { MAX_SECRET_BYTES };

/** The data key: 32 random bytes, created once, readable by the gateway's user only. */
export function ensureSecretsKey(homeDir: string): Buffer {
  const file = join(homeDir, SECRETS_KEY_FILE);
  const key = Buffer.from(writeSecretFileOnce(file, () => randomBytes(32).toString("base64") + "\n").toString("utf8").trim(), "base64");
  if (key.length !== 32) throw new Error(`${file} does not hold a 32-byte key (it holds ${key.length} bytes); restore it from a backup or remove it together with the secrets`);
  return key;
}

export class SecretStore {
  readonly #listeners = new Set<(name: string) => void>();
  /**
   * The sealed values, as the store holds them: a policy push reveals them synchronously,
   * between the secrets message and the policy message it must precede (boundary.ts).
   * Set and delete read their write back; on a fleet's store, another gateway's changes
   * reach it through the store's onSecretChange.
   */
  readonly #sealed = new Map<string, SealedSecret>();
  #unsubscribe: () => void = () => undefined;

  private constructor(
    private readonly store: Store,
    private readonly key: Buffer,
    private readonly onError: (err: Error) => void,
  ) {}

  /** The store's secrets (still sealed), kept current as the store reports changes. */
  static async open(store: Store, key: Buffer, onError: (err: Error) => void = () => undefined): Promise<SecretStore> {
    const s = new SecretStore(store, key, onError);
    s.#unsubscribe = store.onSecretChange((name) => void s.#changed(name));
    for (const { name } of await store.listSecrets()) await s.#reread(name);
    return s;
  }

  /** A change the store reports (null: any): read again; listeners hear of each that differs. */
  async #changed(name: string | null): Promise<void> {
    try {
      const names = name === null ? new Set([...(await this.store.listSecrets()).map((r) => r.name), ...this.#sealed.keys()]) : [name];
      for (const n of names) if (await this.#reread(n)) for (const l of this.#listeners) l(n);
    } catch (err) {
      this.onError(err as Error);
    }
  }

  /** Make the cached value the store's; true when it differed. Each write seals with a fresh nonce, so equal nonces are the same write. */
  async #reread(name: string): Promise<boolean> {
    const row = await this.store.getSecret(name);
    const had = this.#sealed.get(name);
    if (row === null) return this.#sealed.delete(name);
    if (had?.nonce.equals(row.nonce)) return false;
    this.#sealed.set(name, { nonce: row.nonce, ciphertext: row.ciphertext, tag: row.tag });
    return true;
  }

  /** Stop following the store's changes. */
  close(): void {
    this.#unsubscribe();
  }

  /** Create or replace; returns the new version. */
  async set(name: string, value: Buffer): Promise<number> {
    const bad = checkSecretName(name);
    if (bad) throw new Error(bad);
    if (value.length === 0 || value.length > MAX_SECRET_BYTES) throw new Error(`a secret value is 1 to ${MAX_SECRET_BYTES} bytes; this one is ${value.length}`);
    const nonce = randomBytes(12);
    const cipher = createCipheriv("aes-256-gcm", this.key, nonce);
    cipher.setAAD(Buffer.from(name));
    const ciphertext = Buffer.concat([cipher.update(value), cipher.final()]);
    const tag = cipher.getAuthTag();
    const sealed = { nonce, ciphertext, tag };
    const version = await this.store.putSecret(name, sealed, new Date().toISOString());
    // Read back, not assumed: another gateway may have written it again meanwhile (or, the
    // store gone since, what this one wrote).
    await this.#reread(name).catch(() => this.#sealed.set(name, sealed));
    return version;
  }

  /** The value, decrypted (for the supervisors that inject it); null when there is none. */
  reveal(name: string): Buffer | null {
    const row = this.#sealed.get(name);
    if (!row) return null;
    const d = createDecipheriv("aes-256-gcm", this.key, row.nonce);
    d.setAAD(Buffer.from(name));
    d.setAuthTag(row.tag);
    try {
      return Buffer.concat([d.update(row.ciphertext), d.final()]);
    } catch {
      throw new Error(`secret "${name}" cannot be decrypted with ${SECRETS_KEY_FILE} (the key file was replaced?)`);
    }
  }

  async list(): Promise<SecretInfo[]> {
    return await this.store.listSecrets();
  }

  async delete(name: string): Promise<boolean> {
    const removed = await this.store.deleteSecret(name);
    await this.#reread(name).catch(() => this.#sealed.delete(name));
    return removed;
  }

  /**
   * Called with the name after a change another gateway made (a fleet's store): this one's
   * own set and delete are delivered by their request (secrets-routes.ts). One of its own
   * whose notice beats its write's answer is told too: delivered twice, the same value.
   */
  onChange(listener: (name: string) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }
}
