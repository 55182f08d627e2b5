// exec's progress (src/mcp/progress.ts) without a process: the output tail keeps only the
// newest bytes whatever the chunks' sizes and starts at a whole character; progress goes
// only to a request with a progressToken, increases, stops when told, and never queues
// more than one notification behind a transport that has not taken the last.
import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js";
import type { ServerNotification, ServerRequest } from "@modelcontextprotocol/sdk/types.js";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { OutputTail, startProgress } from "../../../src/mcp/progress.js";

describe("OutputTail", () => {
  it("keeps the newest `limit` bytes: of one chunk larger than the limit, and across small ones", () => {
    const t = new OutputTail(8);
    expect(t.text()).toBe("");
    t.push(Buffer.from("0123456789abcdefghij"));
    expect(t.text()).toBe("cdefghij");
    t.push(Buffer.from("XY"));
    expect(t.text()).toBe("efghijXY");
    for (const c of "klmnopqrstu") t.push(Buffer.from(c));
    expect(t.text()).toBe("nopqrstu");
  });

  it("starts at a whole character: the bytes of one cut at the start are left out", () => {
    const t = new OutputTail(4);
    // x é € : 78 | c3 a9 | e2 82 ac; the last 4 bytes begin inside é.
    t.push(Buffer.from("xé€"));
    expect(t.text()).toBe("€");
  });
});

describe("startProgress", () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  const extraWith = (progressToken: string | number | undefined, send: (n: ServerNotification) => Promise<void>) =>
    ({ _meta: progressToken === undefined ? undefined : { progressToken }, sendNotification: send }) as unknown as RequestHandlerExtra<ServerRequest, ServerNotification>;

  it("every interval while running, increasing, the newest output as its message; nothing after stop", async () => {
    const sent: ServerNotification[] = [];
    const tail = new OutputTail(16);
    const stop = startProgress(extraWith("tok", async (n) => void sent.push(n)), 100, tail);
    await vi.advanceTimersByTimeAsync(100);
    tail.push(Buffer.from("hello\n"));
    await vi.advanceTimersByTimeAsync(200);
    stop();
    await vi.advanceTimersByTimeAsync(1000);
    expect(sent.map((n) => n.method)).toEqual(["notifications/progress", "notifications/progress", "notifications/progress"]);
    const params = sent.map((n) => n.params as { progressToken: string; progress: number; message?: string });
    expect(params.map((p) => p.progressToken)).toEqual(["tok", "tok", "tok"]);
    expect(params.map((p) => p.message)).toEqual([undefined, "hello\n", "hello\n"]);
    expect(params[0]!.progress).toBeLessThan(params[1]!.progress);
    expect(params[1]!.progress).toBeLessThan(params[2]!.progress);
  });

  it("nothing without a progressToken", async () => {
    const send = vi.fn(async () => {});
    const stop = startProgress(extraWith(undefined, send), 100, new OutputTail(16));
    await vi.advanceTimersByTimeAsync(1000);
    stop();
    expect(send).not.toHaveBeenCalled();
  });

  it("at most one notification the transport has not taken: the next ones wait for it", async () => {
    let release = (): void => {};
    const send = vi.fn(() => new Promise<void>((r) => (release = r)));
    const stop = startProgress(extraWith(1, send), 100, new OutputTail(16));
    await vi.advanceTimersByTimeAsync(1000);
    expect(send).toHaveBeenCalledTimes(1);
    release();
    await vi.advanceTimersByTimeAsync(100);
    expect(send).toHaveBeenCalledTimes(2);
    stop();
  });
});
