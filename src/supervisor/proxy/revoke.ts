// Revocation: after a new policy revision (or at a lockdown) every open connection in the
// registry is re-checked, synchronously, and each one no longer allowed is closed.
import { evaluate, checkResolvedAddress, tunnelStaysOpen, type HostAddresses, type Policy } from "../../policy/core.js";
import { closeIdle, closeTunnel, type ConnectionRegistry, type Grant, type GrantSet } from "./registry.js";
import type { Revocation } from "./types.js";

/** Closes every connection: lockdown, or no policy at all. */
export function revokeAll(registry: ConnectionRegistry): Revocation {
  const { agent } = registry;
  let tunnelCount = 0;
  let clientCount = 0;
  let upstreamCount = 0;
  for (const tn of [...registry.tunnels.values()]) {
    closeTunnel(tn);
    tunnelCount++;
  }
  for (const conn of [...registry.clients.values()]) {
    conn.socket.destroy();
    clientCount++;
  }
  for (const [set, counted] of [[agent.freeSockets, true], [agent.sockets, false]] as const) {
    for (const list of Object.values(set)) {
      for (const socket of [...(list ?? [])]) {
        socket.destroy();
        // In-use ones belong to a client connection counted above.
        if (counted) upstreamCount++;
      }
    }
  }
  return { closed: tunnelCount + clientCount + upstreamCount, tunnels: tunnelCount, clients: clientCount, upstream: upstreamCount };
}

/** Whether a grant still holds under `policy`, each grant judged once per revocation. */
function grantJudge(policy: Policy, hostSet: HostAddresses): (g: Grant) => boolean {
  const verdicts = new Map<Grant, boolean>();
  return (g) => {
    let v = verdicts.get(g);
    if (v === undefined) {
      const d = g.tunnel !== undefined
        ? tunnelStaysOpen(policy, g.tunnel, g.host, g.port)
        : evaluate(policy, {
            host: g.host,
            port: g.port,
            protocol: g.protocol,
            ...(g.method === undefined ? {} : { method: g.method }),
            ...(g.path === undefined ? {} : { path: g.path }),
          });
      // The address was checked against the old allowPrivate; check it against the new one.
      v = d.allow && checkResolvedAddress(g.address, d.allowPrivate, hostSet).ok;
      verdicts.set(g, v);
    }
    return v;
  };
}

/** Closes what `policy` no longer allows (see EgressProxy.revoke). */
export function revokeDenied(registry: ConnectionRegistry, policy: Policy, hostSet: HostAddresses): Revocation {
  const { agent } = registry;
  const allows = grantJudge(policy, hostSet);
  const allowsAll = (set: GrantSet): boolean => !set.overflow && [...set.grants.values()].every(allows);

  let tunnelCount = 0;
  let clientCount = 0;
  let upstreamCount = 0;
  // Tunnels still being authorized have no grant yet: authorize() decides under the new policy.
  for (const tn of [...registry.tunnels.values()]) {
    if (tn.grant === undefined || (allows(tn.grant) && (tn.upgrade === undefined || allows(tn.upgrade.grant)))) continue;
    closeTunnel(tn);
    tunnelCount++;
  }
  for (const conn of [...registry.clients.values()]) {
    let cut = false;
    for (const res of conn.active) {
      const g = registry.inflight.get(res);
      if (g !== undefined && !allows(g)) cut = true;
    }
    if (!cut && !allowsAll(conn.carried)) {
      // Idle after a request no longer allowed: closed now. Busy with allowed ones: once idle.
      if (conn.active.size === 0) {
        closeIdle(conn.socket);
        clientCount++;
      } else {
        conn.stale = true;
      }
    }
    if (cut) {
      conn.socket.destroy();
      clientCount++;
    }
  }
  // In-use upstream sockets go with their client connection (a cut response destroys its
  // upstream request); one still serving an allowed request is closed when it is freed.
  for (const list of Object.values(agent.freeSockets)) {
    for (const socket of [...(list ?? [])]) {
      const carried = registry.carriedBy(socket);
      if (carried !== undefined && allowsAll(carried)) continue;
      socket.destroy();
      upstreamCount++;
    }
  }
  for (const list of Object.values(agent.sockets)) {
    for (const socket of list ?? []) {
      const carried = registry.carriedBy(socket);
      if (carried === undefined || !allowsAll(carried)) registry.markStale(socket);
    }
  }
  return { closed: tunnelCount + clientCount + upstreamCount, tunnels: tunnelCount, clients: clientCount, upstream: upstreamCount };
}
