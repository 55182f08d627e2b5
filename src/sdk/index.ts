// The Sandgate SDK: the public entry (docs/sdk.md). Everything a program needs to drive
// sandboxes through a local gateway; the CLI uses the same client.

import "./polyfill.js";

export { Sandgate, Sandboxes, LIST_PAGE_SIZE, type CreateOptions, type GatewayStatus, type ListOptions } from "./sandgate.js";
export { Sandbox, type DisposeAction, type IntentOptions } from "./sandbox.js";
export { SandgateError, EXIT, ERRORS, type ApiErrorCode, type ClientErrorCode, type SandgateErrorCode } from "./errors.js";
export { EXEC_SIGNALS, STDIN_FRAME_BYTES, STDIN_HIGH_WATER, type ExecOptions, type ExecSignal } from "./exec.js";
export { SandboxFiles, READ_MAX_BYTES, LIST_MAX_ENTRIES, type ReadOptions, type ListOptions as FileListOptions } from "./files.js";
export { RESUME_WINDOW_MS, type LogsOptions } from "./logs.js";
export { SandboxPolicy, POLICY_WAIT_DEFAULT_S, POLICY_WAIT_MAX_S, type PolicyCheck, type ProposalView, type ProposeOptions } from "./policy.js";
export type { WatchOptions } from "./watch.js";
export type { ConnectOptions } from "./transport.js";
export type { TransferCounts } from "../files/api.js";
export type {
  BoundaryView,
  ContainerIdentityView,
  CreateSandboxInput,
  EventView,
  FileEntry,
  FileStat,
  LogRecord,
  Phase,
  PolicySetResult,
  PolicyView,
  SandboxSummaryView,
  SandboxView,
  WatchEvent,
} from "./types.js";
