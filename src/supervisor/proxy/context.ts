// What every path of the proxy shares (built once in index.ts): the policy in force, the
// lockdown and the host's addresses, the audit sink, the registry of open connections and
// the settings. Paths get this, never each other's internals.
import type { PolicyHolder } from "../policy-holder.js";
import type { Logger } from "../logger.js";
import type { SecretValues } from "../credentials.js";
import type { Auditor } from "./auditor.js";
import type { Authorizer } from "./authorize.js";
import type { ConnectionRegistry } from "./registry.js";

export interface ProxyContext {
  readonly policy: PolicyHolder;
  readonly logger: Logger;
  readonly audit: Auditor;
  readonly authorizer: Authorizer;
  readonly registry: ConnectionRegistry;
  /** Upstream TCP connect deadline. */
  readonly connectTimeoutMs: number;
  /** How long a blind https tunnel waits for its ClientHello. */
  readonly helloTimeoutMs: number;
  /** An extra CA the proxy trusts for origins (terminated https). */
  readonly upstreamCa: string | undefined;
  /** The secret values for the placeholders the policy binds. */
  readonly credentials: SecretValues | undefined;
  /** Set once close() began: answers then tell keep-alive clients to go. */
  closing(): boolean;
}
