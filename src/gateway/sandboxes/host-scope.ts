// Which sandboxes this gateway drives. The embedded store has one host, so its gateway
// drives every sandbox in it. On PostgreSQL several hosts share the store: every gateway
// reads every sandbox (list, get, watch, events, audit), but only the gateway of a
// sandbox's host drives it (launch, stop, delete, exec, logs, files, stats, policy
// pushes, adoption, expiry), as only that host's Docker daemon has its containers.

import { ApiError } from "../errors.js";

export interface HostScope {
  /** This gateway's host (`--host-name`): what a sandbox it creates records. */
  readonly name: string;
  /** Several hosts share the store: a sandbox may be created for this host by another host's gateway. */
  readonly shared: boolean;
  /** Whether this gateway drives the sandbox. */
  drives(s: { host: string }): boolean;
}

/** The embedded store: one host, every sandbox this gateway's whatever its row says (a renamed machine keeps its sandboxes). */
export const everyHost = (name: string): HostScope => ({ name, shared: false, drives: () => true });

/** A fleet's store: this host's sandboxes only. */
export const oneHost = (name: string): HostScope => ({ name, shared: true, drives: (s) => s.host === name });

/** What a request that must be driven by another host's gateway is answered with. */
export const otherHost = (s: { name: string; host: string }, scope: HostScope): ApiError =>
  new ApiError(
    "not_allowed",
    `sandbox "${s.name}" runs on host "${s.host}" and this gateway drives host "${scope.name}": send this request to a gateway of host "${s.host}" (one gateway relaying to another is not built yet, docs/fleet.md)`,
  );
