// Setup file of every test file: a MaxListenersExceededWarning in the test process (a
// listener added per event and never removed, e.g. one per backpressure wait) fails
// the file instead of scrolling past in the log.
import { afterAll, expect } from "vitest";

const leaks: string[] = [];
const onWarning = (w: Error): void => {
  if (w.name === "MaxListenersExceededWarning") leaks.push(w.message);
};
process.on("warning", onWarning);

afterAll(() => {
  process.off("warning", onWarning);
  expect(leaks, "listener leak warnings in this file").toEqual([]);
});
