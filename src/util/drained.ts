// Waiting out a writable stream's backpressure. A wait that listens for "drain" and
// "close" with two once() calls leaves the one that did not fire behind: one listener
// per wait, so a long upload piles up thousands on its request. This one removes both.

import type { EventEmitter } from "node:events";

/** Resolves when `stream` drains or closes, with no listener left on it either way. */
export function drained(stream: EventEmitter): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      stream.off("drain", done);
      stream.off("close", done);
      resolve();
    };
    stream.on("drain", done);
    stream.on("close", done);
  });
}
