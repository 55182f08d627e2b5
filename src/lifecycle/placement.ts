// Where a new sandbox runs in a fleet (docs/fleet.md): on this gateway's host unless the
// request names another, which must be a host a gateway is driving now (it holds the
// host's lease): a sandbox placed on a host nobody drives would wait for a gateway that
// may never come. Pure: the hosts as the store reports them in, a host or a refusal out.

/** What a host may be called (`--host-name`, `sandbox create --host`). */
export const HOST_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;
export const HOST_NAME_ALLOWED = "1–63 letters, digits, '.', '_' or '-', starting with a letter or digit";

/** Null when `raw` is a host name; else the one-line error naming it. */
export const checkHostName = (raw: string): string | null => (HOST_NAME.test(raw) ? null : `"${raw}" is not a host name; allowed: ${HOST_NAME_ALLOWED}`);

/** A host of the fleet as its store reports it. */
export interface HostState {
  host: string;
  /** A gateway holds the host's lease now (its session is alive). */
  driven: boolean;
  /** Its sandboxes in a live phase (Provisioning, Ready, Recovering). */
  live: number;
}

export type Placement = { ok: true; host: string } | { ok: false; error: string };

/**
 * The host of a new sandbox. `requested`: the host the request names (undefined: none);
 * `self`: this gateway's host; `hosts`: the fleet's (null: the embedded store, one host).
 */
export function place(requested: string | undefined, self: string, hosts: readonly HostState[] | null): Placement {
  if (requested === undefined || requested === self) return { ok: true, host: self };
  const bad = checkHostName(requested);
  if (bad !== null) return { ok: false, error: `host: ${bad}` };
  if (hosts === null) return { ok: false, error: `host: "${requested}" is not this gateway's host "${self}", and its store is not a fleet's (--store postgres://…, docs/fleet.md): leave --host out` };
  if (hosts.some((h) => h.host === requested && h.driven)) return { ok: true, host: requested };
  const driven = hosts.filter((h) => h.driven).map((h) => h.host);
  const known = hosts.some((h) => h.host === requested);
  return {
    ok: false,
    error: `host: no gateway drives host "${requested}" now (${known ? "its gateway is not running" : "no gateway has ever driven it"}); hosts with a gateway: ${driven.length === 0 ? "none" : driven.join(", ")}`,
  };
}
