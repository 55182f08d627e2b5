// Decoder for Docker's multiplexed raw stream (exec/attach without a TTY).
// Each frame: [stream, 0, 0, 0, len (uint32 big-endian)] then len payload bytes.
// Payload is delivered as it arrives (not buffered until the frame completes), so a
// long frame does not delay interactive output; chunk boundaries may fall anywhere.

export const StreamType = { stdin: 0, stdout: 1, stderr: 2, system: 3 } as const;

const HEADER_LEN = 8;

export interface Demuxer {
  push(chunk: Buffer): void;
  /** Call at end of input; reports a truncated frame through onError. */
  end(): void;
}

export interface DemuxerOptions {
  /** Stream 3: Docker's own error text for the stream (rare). Default: sent to onStderr. */
  onSystem?: (b: Buffer) => void;
  /** Malformed input (unknown stream type, truncated frame). After it the demuxer ignores input. */
  onError?: (message: string) => void;
}

export function createDemuxer(
  onStdout: (b: Buffer) => void,
  onStderr: (b: Buffer) => void,
  opts: DemuxerOptions = {},
): Demuxer {
  const header = Buffer.alloc(HEADER_LEN);
  let headerFill = 0;
  let remaining = 0; // payload bytes still expected for the current frame
  let sink: ((b: Buffer) => void) | undefined;
  let failed = false;
  const onSystem = opts.onSystem ?? onStderr;

  function fail(message: string): void {
    failed = true;
    opts.onError?.(message);
  }

  function startFrame(): void {
    const type = header[0];
    // stdin (0) is echoed to stdout, as Docker's stdcopy does.
    if (type === StreamType.stdin || type === StreamType.stdout) sink = onStdout;
    else if (type === StreamType.stderr) sink = onStderr;
    else if (type === StreamType.system) sink = onSystem;
    else {
      fail(`unknown stream type ${String(type)} in multiplexed stream header`);
      return;
    }
    remaining = header.readUInt32BE(4);
    headerFill = 0;
  }

  return {
    push(chunk: Buffer): void {
      let pos = 0;
      while (!failed && pos < chunk.length) {
        if (remaining === 0 && sink !== undefined) sink = undefined; // previous frame done
        if (sink === undefined) {
          const take = Math.min(HEADER_LEN - headerFill, chunk.length - pos);
          chunk.copy(header, headerFill, pos, pos + take);
          headerFill += take;
          pos += take;
          if (headerFill === HEADER_LEN) startFrame();
          continue;
        }
        const take = Math.min(remaining, chunk.length - pos);
        const part = chunk.subarray(pos, pos + take);
        pos += take;
        remaining -= take;
        sink(part);
      }
    },
    end(): void {
      if (failed) return;
      if (headerFill > 0) fail(`stream ended inside a frame header (${headerFill} of ${HEADER_LEN} bytes)`);
      else if (remaining > 0) fail(`stream ended inside a frame (${remaining} payload bytes missing)`);
    },
  };
}

/** Encodes one frame; used by tests and fakes. */
export function encodeFrame(stream: number, payload: Buffer): Buffer {
  const h = Buffer.alloc(HEADER_LEN);
  h[0] = stream;
  h.writeUInt32BE(payload.length, 4);
  return Buffer.concat([h, payload]);
}
