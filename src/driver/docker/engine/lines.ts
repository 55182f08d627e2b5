// Incremental splitter for newline-delimited JSON (GET /events, image import progress).
// Handles lines and multi-byte UTF-8 characters split across chunks.
import { StringDecoder } from "node:string_decoder";

export type LineResult = { ok: true; value: unknown } | { ok: false; line: string };

export interface JsonLineSplitter {
  /** Returns the complete lines of this chunk, each parsed or marked bad. */
  push(chunk: Buffer): LineResult[];
  /** At EOF: the unterminated rest, if any (Docker always ends lines with \n). */
  end(): LineResult[];
}

export function createJsonLineSplitter(): JsonLineSplitter {
  const decoder = new StringDecoder("utf8");
  let pending = "";

  function parse(line: string): LineResult | undefined {
    const trimmed = line.trim(); // also drops the \r of \r\n
    if (trimmed === "") return undefined;
    try {
      return { ok: true, value: JSON.parse(trimmed) as unknown };
    } catch {
      return { ok: false, line: trimmed };
    }
  }

  function drain(text: string): LineResult[] {
    const parts = (pending + text).split("\n");
    pending = parts.pop() ?? "";
    const out: LineResult[] = [];
    for (const line of parts) {
      const r = parse(line);
      if (r) out.push(r);
    }
    return out;
  }

  return {
    push: (chunk) => drain(decoder.write(chunk)),
    end: () => {
      const out = drain(decoder.end());
      const r = parse(pending);
      pending = "";
      if (r) out.push(r);
      return out;
    },
  };
}
