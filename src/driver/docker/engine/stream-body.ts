// Reading a streamed answer (events, container logs) once it is open: chunk by chunk into
// the caller's callback, ending with why it ended. Apart from the transport (transport.ts),
// which opens the stream and owns its guard; these only consume the body, and returning
// from inside their loop destroys it (and its socket).
import type { CallGuard } from "./call.js";
import { createJsonLineSplitter } from "./lines.js";
import { TransportCode, transport } from "./result.js";
import type { DockerError, TransportFailure } from "./result.js";
import { errorMessage } from "../../../util/error-message.js";

export type StreamEnd = { kind: "eof" } | { kind: "aborted" } | TransportFailure | DockerError;

/** Newline-delimited JSON, one onValue per message; a non-JSON line or a throw of onValue ends it. */
export async function readJsonLines(body: AsyncIterable<Buffer>, ended: (err: unknown) => StreamEnd, onValue: (v: unknown) => void): Promise<StreamEnd> {
  const splitter = createJsonLineSplitter();
  const deliver = (lines: ReturnType<typeof splitter.push>): TransportFailure | undefined => {
    for (const line of lines) {
      if (!line.ok) return transport(TransportCode.BAD_BODY, `stream sent a non-JSON line: ${line.line.slice(0, 200)}`);
      try {
        onValue(line.value);
      } catch (err) {
        return transport(TransportCode.HANDLER_ERROR, `onEvent threw: ${errorMessage(err)}`);
      }
    }
    return undefined;
  };
  try {
    for await (const chunk of body) {
      const bad = deliver(splitter.push(chunk));
      if (bad) return bad;
    }
    return deliver(splitter.end()) ?? { kind: "eof" };
  } catch (err) {
    return ended(err);
  }
}

/** Bytes, each chunk awaited in onChunk (backpressure); a throw or rejection of onChunk ends it. */
export async function readByteChunks(body: AsyncIterable<Buffer>, ended: (err: unknown) => StreamEnd, guard: CallGuard, onChunk: (chunk: Buffer) => void | Promise<void>): Promise<StreamEnd> {
  try {
    for await (const chunk of body) {
      try {
        await onChunk(chunk);
      } catch (err) {
        return guard.cause === "caller" ? { kind: "aborted" } : transport(TransportCode.HANDLER_ERROR, `onChunk threw: ${errorMessage(err)}`);
      }
    }
    return { kind: "eof" };
  } catch (err) {
    return ended(err);
  }
}
