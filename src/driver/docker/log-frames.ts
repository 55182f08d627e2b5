// Docker's container log stream (no TTY), read as whole messages. Each message is one
// multiplexed frame, [stream, 0, 0, 0, length (uint32 BE)] + payload, and with
// timestamps=1 the payload is "<RFC 3339 time> <text>", the text ending in "\n" unless
// Docker cut a long line there (it cuts at 16 KiB) or the process never ended it.
// Unlike exec output (engine/demux.ts, delivered as it arrives), a log line is only
// used whole: a frame cut by a broken stream is dropped and read again on resume. Pure.

import type { LogLine } from "../contract.js";
import { canonicalTime } from "../../util/log-time.js";
import { SandgateError } from "../../util/errors.js";

const HEADER_LEN = 8;
/** Docker's frames are ≤ 16 KiB of text plus the time; a larger one is not a log frame. */
export const LOG_FRAME_MAX = 1 << 20;

export class LogFrameError extends SandgateError {
  override readonly name = "LogFrameError";
  constructor(message: string, options?: ErrorOptions) {
    super(message, "bad_log_frame", options);
  }
}

export interface RawFrame {
  stream: "out" | "err";
  payload: Buffer;
}

/** Assembles whole frames from chunks cut anywhere; holds at most one frame. */
export class FrameReader {
  #buf: Buffer = Buffer.alloc(0);

  /** Bytes of an unfinished frame held (dropped when the stream breaks). */
  get pending(): number {
    return this.#buf.length;
  }

  /** The frames this chunk completes; throws LogFrameError on bytes that are not log frames. */
  push(chunk: Buffer): RawFrame[] {
    this.#buf = this.#buf.length === 0 ? chunk : Buffer.concat([this.#buf, chunk]);
    const out: RawFrame[] = [];
    let pos = 0;
    while (this.#buf.length - pos >= HEADER_LEN) {
      const type = this.#buf[pos]!;
      if (type !== 1 && type !== 2) throw new LogFrameError(`unknown stream type ${type} in a log frame header`);
      const len = this.#buf.readUInt32BE(pos + 4);
      if (len > LOG_FRAME_MAX) throw new LogFrameError(`a log frame of ${len} bytes is over the bound of ${LOG_FRAME_MAX}`);
      if (this.#buf.length - pos - HEADER_LEN < len) break;
      out.push({ stream: type === 1 ? "out" : "err", payload: this.#buf.subarray(pos + HEADER_LEN, pos + HEADER_LEN + len) });
      pos += HEADER_LEN + len;
    }
    // Keep only the unfinished rest (a copy, so the frames handed out are not overwritten).
    this.#buf = pos === 0 ? this.#buf : Buffer.from(this.#buf.subarray(pos));
    return out;
  }
}

/** One frame's payload as a line: "<time> <text>"; throws LogFrameError when it carries no time. */
export function logLineOf(f: RawFrame): LogLine {
  const space = f.payload.indexOf(0x20);
  const stamp = space > 0 && space <= 40 ? f.payload.toString("latin1", 0, space) : "";
  const t = canonicalTime(stamp);
  if (t === null) throw new LogFrameError(`a log frame without a time: ${JSON.stringify(f.payload.toString("latin1", 0, 40))}`);
  const ended = f.payload.length > space + 1 && f.payload[f.payload.length - 1] === 0x0a;
  const l = f.payload.toString("utf8", space + 1, ended ? f.payload.length - 1 : f.payload.length);
  return ended ? { t, s: f.stream, l } : { t, s: f.stream, l, p: true };
}

/** Encodes a log frame as Docker sends it (tests and fakes). */
export function encodeLogFrame(stream: "out" | "err", time: string, text: string): Buffer {
  const payload = Buffer.from(`${time} ${text}`);
  const h = Buffer.alloc(HEADER_LEN);
  h[0] = stream === "out" ? 1 : 2;
  h.writeUInt32BE(payload.length, 4);
  return Buffer.concat([h, payload]);
}
