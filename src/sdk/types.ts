// Types of what the gateway API returns (the SDK's and the CLI's), and what the SDK
// takes: inferred from the API's own zod schemas (src/api), the ones the gateway checks
// requests with and the API tests validate its answers against, so the SDK's types are
// the gateway's by construction and cannot drift from them. The names are the SDK's own
// (public: docs/sdk.md), stable whatever the schemas are called. Types only: the SDK
// imports no schema at run time.
//
// Not inferred, because no JSON answer of the route table carries them: WatchEvent (a
// frame of the SSE stream, made of two inferred views), LogRecord (a line of the NDJSON
// log stream, described in words by the getLogs route) and FileEntry (the SDK's own
// reading of a tar stream's member).

import type { z } from "zod";
import type { FileStatView } from "../files/api.js";
import type { Phase } from "../lifecycle/phases.js";
import type {
  BoundaryHealth,
  ContainerIdentityView as ContainerIdentitySchema,
  EventView as EventSchema,
  FleetView as FleetSchema,
  PolicyRevisionView,
  SandboxDetailView,
  SandboxSummaryView as SandboxSummarySchema,
  SandboxView as SandboxSchema,
  SetPolicyResult,
} from "../api/responses.js";
import type { CreateSandboxBody } from "../api/schemas.js";

export type { Phase };
/** What a sandbox's path is (`GET /v1/sandboxes/:name/files/stat`). */
export type FileStat = FileStatView;

/** A container of a sandbox's generation: its id, name, image and when it started. */
export type ContainerIdentityView = z.output<typeof ContainerIdentitySchema>;

/** The fleet's hosts (`GET /v1/fleet`, docs/fleet.md). */
export type FleetView = z.output<typeof FleetSchema>;

/** The supervisor's control session and what it enforces (null where the runtime has no supervisors). */
export type BoundaryView = z.output<typeof BoundaryHealth>;

/**
 * A sandbox: its phase and why, what it was created with, its containers, boundary and
 * workspace. `expiry` (what --ttl and --idle-stop look at) only in `sandbox get`'s answer.
 */
export type SandboxView = z.output<typeof SandboxSchema> & Partial<Pick<z.output<typeof SandboxDetailView>, "expiry">>;

/** A row of GET /v1/sandboxes?view=lean: container ids only of the live generation, else null. */
export type SandboxSummaryView = z.output<typeof SandboxSummarySchema>;

/** One entry of a sandbox's event log. */
export type EventView = z.output<typeof EventSchema>;

/** One frame of `GET /v1/watch`: a committed event and the sandbox as it is after it (null once deleted). */
export interface WatchEvent {
  event: EventView;
  sandbox: SandboxView | null;
}

/** What `POST /v1/sandboxes` takes (the CLI's `sandbox create` flags): the request schema's input side. */
export type CreateSandboxInput = z.input<typeof CreateSandboxBody>;

/** One record of `GET /v1/sandboxes/:name/logs`: a line (or a part of one: `p`) of stdout (`out`) or stderr (`err`). */
export interface LogRecord {
  /** When Docker read it: RFC 3339, UTC, nanoseconds. */
  t: string;
  s: "out" | "err";
  /** The text, without its newline. */
  l: string;
  /** Set when no newline ended it (a long line split at the gateway's bound, or output without a final newline). */
  p?: true;
}

/**
 * The answer of `PUT /v1/sandboxes/:name/policy`. `phase` `Recovering` (Docker lost): the
 * supervisor enforces it once it acks it (its control session needs no Docker), and the
 * sandbox is Ready again only after that. With `wait`, `enforced` and `connectionsClosed`
 * say whether the supervisor acknowledged it in time and what it closed; without, null.
 */
export type PolicySetResult = z.output<typeof SetPolicyResult>;

/** The answer of `GET /v1/sandboxes/:name/policy`: the active revision, its parsed policy and the text it was given as (null when given as an object). */
export type PolicyView = z.output<typeof PolicyRevisionView>;

/** One entry of `files.list`: a path relative to the listed directory. */
export interface FileEntry {
  path: string;
  type: "file" | "directory" | "symlink" | "hardlink" | "fifo" | "char" | "block";
  /** Permission bits. */
  mode: number;
  /** Bytes (files; 0 for every other type). */
  size: number;
  /** Modification time, seconds since the epoch. */
  mtime: number;
  /** A symlink's target or a hard link's source; "" otherwise. */
  linkname: string;
}
