// The MCP server's bounds (docs/mcp.md, *Bounds*): what a model may ask for, and what
// it gets back. A model's arguments are hostile input: every size it names is capped
// here, and every answer is capped before it is held.

const KiB = 1024;
const MiB = 1024 * KiB;

/** exec: seconds before the gateway ends the command (SIGTERM, SIGKILL, exit 124). */
export const EXEC_TIMEOUT_DEFAULT_S = 60;
export const EXEC_TIMEOUT_MAX_S = 30 * 60;
/** exec: bytes kept per stream (stdout, stderr); the rest is counted and dropped. */
export const EXEC_OUTPUT_DEFAULT_BYTES = 64 * KiB;
export const EXEC_OUTPUT_MAX_BYTES = 1 * MiB;
/** exec: the command's input, in characters (UTF-8 text). */
export const EXEC_STDIN_MAX_CHARS = 1 * MiB;
/** exec: its argv, in characters all told (the gateway's query is bounded too). */
export const EXEC_ARGV_MAX_CHARS = 64 * KiB;
/** exec: a progress notification's message holds at most this many of the newest bytes of output (stdout and stderr as they came). */
export const EXEC_PROGRESS_TAIL_BYTES = 2 * KiB;
/** exec: a progress notification every this many milliseconds while the command runs (`sandgate mcp --progress-interval`). */
export const EXEC_PROGRESS_INTERVAL_DEFAULT_MS = 1000;

/** files_read: bytes returned; a larger file is refused (too_large), not cut. */
export const FILES_READ_DEFAULT_BYTES = 256 * KiB;
export const FILES_READ_MAX_BYTES = 4 * MiB;
/** files_write: the content, in characters (text, or base64 of the bytes). */
export const FILES_WRITE_MAX_CHARS = 4 * MiB;
/** files_list: entries returned; more is refused (too_large). */
export const FILES_LIST_DEFAULT_ENTRIES = 1000;
export const FILES_LIST_MAX_ENTRIES = 10_000;

/** logs_read: the last N lines. */
export const LOGS_TAIL_DEFAULT = 200;
export const LOGS_TAIL_MAX = 10_000;
/** logs_read: characters of log text returned; older lines past it are dropped (counted). */
export const LOGS_MAX_CHARS = 1 * MiB;

/** policy_check: the URL, in characters. */
export const URL_MAX_CHARS = 8 * KiB;

/** policy_propose: the policy text and the reason, in characters (the gateway checks both again). */
export const POLICY_MAX_CHARS = 1 * MiB;
export const REASON_MAX_CHARS = 1000;

/** Names, paths and other short strings, in characters. */
export const NAME_MAX_CHARS = 256;
export const PATH_MAX_CHARS = 4096;
/** An environment variable's or a label's value, in characters. */
export const VALUE_MAX_CHARS = 32 * KiB;

/** Tool calls running at once; past it a call is refused (unavailable), not queued: each holds its output in memory. */
export const CALLS_MAX = 8;
