// The route template of an Engine API call, for metrics labels: `GET /containers/{id}/json`,
// never a container id, a sandbox's container name or an image reference. The set of
// templates is bounded: anything not in the table below is `OTHER` or `{method} other`,
// so a label can never carry a value that came from a sandbox or its user. Pure.

const METHODS = new Set(["GET", "POST", "PUT", "DELETE", "HEAD"]);

/** Top-level paths answered as they are. */
const FIXED = new Set(["_ping", "events", "info", "version", "build", "system/df"]);

/**
 * Collections whose second segment is either one of these collection-level actions
 * (with nothing after it) or an object's id or name, followed by at most one action.
 */
const COLLECTIONS: Record<string, { param: string; collection: Set<string>; actions: Set<string> }> = {
  containers: {
    param: "{id}",
    collection: new Set(["create", "json", "prune"]),
    actions: new Set(["json", "start", "stop", "kill", "restart", "pause", "unpause", "wait", "logs", "exec", "stats", "top", "changes", "archive", "resize", "attach", "update", "rename", "export"]),
  },
  exec: { param: "{id}", collection: new Set(), actions: new Set(["json", "start", "resize"]) },
  networks: { param: "{id}", collection: new Set(["create", "prune"]), actions: new Set(["connect", "disconnect"]) },
  volumes: { param: "{name}", collection: new Set(["create", "prune"]), actions: new Set() },
  images: { param: "{name}", collection: new Set(["create", "json", "load", "prune", "search", "get"]), actions: new Set(["json", "history", "push", "tag", "get"]) },
};

/** `METHOD /template` for a path without the version prefix or query (encoded as the client sends it). */
export function engineRoute(method: string, path: string): string {
  const m = METHODS.has(method) ? method : "OTHER";
  return `${m} ${template(path)}`;
}

function template(path: string): string {
  if (!path.startsWith("/")) return "other";
  const p = path.slice(1).replace(/\/+$/, "");
  if (FIXED.has(p)) return `/${p}`;
  const segs = p.split("/");
  const kind = COLLECTIONS[segs[0]!];
  if (!kind) return "other";
  const [root] = segs;
  if (segs.length === 1) return `/${root}`;
  if (segs.length === 2 && kind.collection.has(segs[1]!)) return `/${root}/${segs[1]}`;
  if (segs.some((s) => s === "")) return "other";
  // Image references keep their slashes (registry/repo/name): every segment but a known
  // trailing action is the reference.
  const last = segs.at(-1)!;
  const ownSegs = root === "images" ? segs.length - 1 - (segs.length > 2 && kind.actions.has(last) ? 1 : 0) : 1;
  const rest = segs.slice(1 + ownSegs);
  if (rest.length === 0) return `/${root}/${kind.param}`;
  if (rest.length === 1 && kind.actions.has(rest[0]!)) return `/${root}/${kind.param}/${rest[0]}`;
  return "other";
}
