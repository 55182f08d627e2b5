// Where the gateway keeps its state (`--store`, SANDGATE_STORE): the embedded SQLite
// file in its home (the default), or a PostgreSQL database shared by a fleet of
// gateways. The URL may carry a password: it is shown, logged and put in errors only
// with the password replaced, and a detached gateway gets it through its environment,
// never its command line (which every local user can read in /proc).

export type StoreLocation = { kind: "sqlite" } | { kind: "postgres"; url: string };

export const STORE_ALLOWED = "sqlite, or postgres://[user[:password]@]host[:port]/database";

/** The URL with its password (if any) replaced by ***; text that is no URL is shown only by its scheme. */
export function redactStoreUrl(raw: string): string {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(raw)?.[1];
    return scheme === undefined ? "(not a URL)" : `${scheme}:…`;
  }
  if (u.password !== "") u.password = "***";
  return u.toString();
}

export function parseStoreLocation(raw: string): { ok: true; value: StoreLocation } | { ok: false; error: string } {
  const text = raw.trim();
  if (text === "sqlite") return { ok: true, value: { kind: "sqlite" } };
  let u: URL;
  try {
    u = new URL(text);
  } catch {
    return { ok: false, error: `"${redactStoreUrl(text)}" is not a store; allowed: ${STORE_ALLOWED}` };
  }
  if (u.protocol !== "postgres:" && u.protocol !== "postgresql:") return { ok: false, error: `"${redactStoreUrl(text)}" is not a store (scheme ${u.protocol.slice(0, -1)}); allowed: ${STORE_ALLOWED}` };
  if (u.hostname === "" && !u.searchParams.has("host")) return { ok: false, error: `"${redactStoreUrl(text)}" names no host; allowed: ${STORE_ALLOWED}` };
  return { ok: true, value: { kind: "postgres", url: text } };
}

/** The location as a person reads it (status, logs): no password. */
export function showStoreLocation(loc: StoreLocation): string {
  return loc.kind === "sqlite" ? "sqlite" : redactStoreUrl(loc.url);
}
