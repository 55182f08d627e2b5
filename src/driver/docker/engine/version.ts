// Engine API version negotiation, as the docker CLI does it: use the lower of the
// server's version and ours, so an older daemon is not sent fields it does not know.

/** The newest API version this client is written against (dockerd 20.10). */
export const MAX_API_VERSION = "1.41";

/** What docker's client assumes when a daemon sends no API-Version header. */
const FALLBACK_API_VERSION = "1.24";

function parse(v: string): [number, number] | undefined {
  const m = /^(\d+)\.(\d+)$/.exec(v.trim());
  return m ? [Number(m[1]), Number(m[2])] : undefined;
}

export function compareApiVersions(a: string, b: string): number {
  const pa = parse(a);
  const pb = parse(b);
  if (!pa || !pb) throw new Error(`not an API version: ${pa ? b : a}`);
  return pa[0] - pb[0] || pa[1] - pb[1];
}

/** The version to use with a server that announced `server` (header value, maybe absent or junk). */
export function negotiateApiVersion(server: string | undefined): string {
  if (server === undefined || parse(server) === undefined) return FALLBACK_API_VERSION;
  return compareApiVersions(server, MAX_API_VERSION) < 0 ? server.trim() : MAX_API_VERSION;
}
