// Server-Sent Events frames, as the gateway's watch stream sends them (src/gateway/api/watch.ts).

/** One SSE frame at most (an event and its sandbox's view, whose spec is bounded by the 2 MiB create body). */
export const FRAME_MAX_BYTES = 8 * 1024 * 1024;

export interface Frame {
  event: string;
  data: string;
}

/** The frames of an SSE body; a frame over FRAME_MAX_BYTES ends the stream with an error. */
export async function* sseFrames(body: AsyncIterable<Uint8Array>): AsyncGenerator<Frame> {
  const decoder = new TextDecoder();
  let buf = "";
  for await (const chunk of body) {
    buf += decoder.decode(chunk, { stream: true });
    let i: number;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      const lines = buf.slice(0, i).split("\n");
      buf = buf.slice(i + 2);
      const data = lines.find((l) => l.startsWith("data: "));
      if (data) yield { event: lines.find((l) => l.startsWith("event: "))?.slice(7) ?? "message", data: data.slice(6) };
    }
    if (buf.length > FRAME_MAX_BYTES) throw new Error(`a watch frame is over ${FRAME_MAX_BYTES} bytes`);
  }
}
