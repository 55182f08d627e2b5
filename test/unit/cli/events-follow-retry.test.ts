// followEvents (sandbox events -f) against a FAKE client: a 503 (a gateway shutting down or
// starting, its streams or connections full) is waited out and the follow goes on to the
// sandbox's deletion; any other refusal ends it with that error.
import { describe, expect, it } from "vitest";
import type { GatewayClient } from "../../../src/cli/client.js";
import { CliError } from "../../../src/cli/errors.js";
import { followEvents } from "../../../src/cli/events-follow.js";
import type { EventView } from "../../../src/sdk/types.js";

const json = (status: number, body: unknown): Response => new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
const stream = (events: Partial<EventView>[]): Response =>
  new Response(events.map((e) => `event: sandbox\ndata: ${JSON.stringify({ event: e, sandbox: null })}\n\n`).join(""), { status: 200, headers: { "content-type": "text/event-stream" } });

/** A client whose watch answers are `answers`, in order; the calls are counted. */
function fakeClient(answers: Response[]): { client: () => GatewayClient; calls: () => number } {
  let n = 0;
  const c = { raw: async () => answers[n++] ?? json(500, { error: { message: "no more answers", code: "internal" } }) } as unknown as GatewayClient;
  return { client: () => c, calls: () => n };
}

describe("sandbox events -f, a gateway that answers 503", () => {
  it("is retried, with one note, until it streams again: the events after the last printed, to the deletion", async () => {
    const unavailable = json(503, { error: { message: "too many watch streams open (64)", code: "unavailable" } });
    const fake = fakeClient([unavailable, json(503, { error: { message: "the gateway is shutting down", code: "unavailable" } }), stream([{ seq: 8, kind: "phase" }, { seq: 9, kind: "deleted" }])]);
    const printed: number[] = [];
    const notes: string[] = [];
    const end = await followEvents({ client: fake.client, id: "sbx_1", after: 7, print: (e) => void printed.push(e.seq), note: (l) => notes.push(l), signal: new AbortController().signal });
    expect(end).toBe("deleted");
    expect(printed).toEqual([8, 9]);
    expect(fake.calls()).toBe(3);
    expect(notes).toEqual(["(the gateway cannot take the stream now: too many watch streams open (64); retrying, Ctrl-C stops)", "(the gateway answers again; resuming after event 7)"]);
  });

  it("another refusal ends the follow with the gateway's message", async () => {
    const fake = fakeClient([json(400, { error: { message: "after: expected a number", code: "invalid_request" } })]);
    const err = await followEvents({ client: fake.client, id: "sbx_1", after: 0, print: () => undefined, note: () => undefined, signal: new AbortController().signal }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CliError);
    expect((err as Error).message).toBe("after: expected a number");
  });
});
