// The bound on one log line the gateway sends: a longer line is split into parts of at
// most `maxBytes` UTF-8 bytes, never inside a character; every part but the last is
// marked partial, so a reader that joins partial parts gets the line back whole. Pure.

/** Parts of `text`, each at most maxBytes bytes (UTF-8); one part when it fits. */
export function splitLine(text: string, maxBytes: number): string[] {
  if (maxBytes < 4) throw new RangeError(`maxBytes must be at least 4 (one character); got ${maxBytes}`);
  // Each UTF-16 unit is at most 3 bytes: short strings need no count.
  if (text.length * 3 <= maxBytes || Buffer.byteLength(text) <= maxBytes) return [text];
  const parts: string[] = [];
  let start = 0;
  let bytes = 0;
  let i = 0;
  for (const ch of text) {
    const cp = ch.codePointAt(0)!;
    const n = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    if (bytes + n > maxBytes) {
      parts.push(text.slice(start, i));
      start = i;
      bytes = 0;
    }
    bytes += n;
    i += ch.length;
  }
  parts.push(text.slice(start));
  return parts;
}
