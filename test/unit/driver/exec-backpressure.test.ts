// An exec's output is not buffered without bound: while its reader does not read,
// the hijacked socket is paused and the producer (a FAKE engine here, dockerd and
// the process in life) stops at the kernel's socket buffers. `sandbox cp` streams a
// tar out of the workload through this, at any size.
import { afterEach, beforeEach, expect, it } from "vitest";
import { EngineClient } from "../../../src/driver/docker/engine/client.js";
import { encodeFrame } from "../../../src/driver/docker/engine/demux.js";
import { startExec } from "../../../src/driver/docker/exec-session.js";
import { FakeEngine, UPGRADED, reply } from "../../support/fake-engine.js";
import { eventually } from "../../support/gateway-fixture.js";

const TOTAL = 64 * 1024 * 1024;
const FRAME = 64 * 1024;

let fake: FakeEngine;
let client: EngineClient;
beforeEach(async () => {
  fake = await FakeEngine.start();
  client = new EngineClient({ socketPath: fake.socketPath });
});
afterEach(async () => {
  await client.close();
  await fake.close();
});

for (const channel of [1, 2] as const) {
  it(`a reader that does not read ${channel === 1 ? "stdout" : "stderr"} holds the producer back; reading again gets every byte`, async () => {
    let written = 0;
    fake.on("POST", "/containers/c1/exec", reply.json(201, { Id: "e1" }));
    fake.on("GET", "/exec/e1/json", reply.json(200, { ID: "e1", Running: false, ExitCode: 0, Pid: 0 }));
    fake.onUpgrade("POST", "/exec/e1/start", (socket) => {
      socket.write(UPGRADED);
      const frame = encodeFrame(channel, Buffer.alloc(FRAME, 0x61));
      const pump = (): void => {
        while (written < TOTAL) {
          written += FRAME;
          if (!socket.write(frame)) return void socket.once("drain", pump);
        }
        socket.end();
      };
      pump();
    });
    const session = await startExec(client, "c1", { cmd: ["x"], tty: false });
    const [slow, other] = channel === 1 ? [session.stdout, session.stderr] : [session.stderr, session.stdout];
    other.resume();
    // Nobody reads `slow`: the producer gets as far as the socket buffers and the stream's own, then waits.
    await eventually(async () => {
      const before = written;
      await new Promise((r) => setTimeout(r, 200));
      return written === before ? true : undefined;
    }, 20_000, "the producer to stop");
    expect(written).toBeLessThan(16 * 1024 * 1024);
    let got = 0;
    for await (const c of slow) got += (c as Buffer).length;
    expect(got).toBe(TOTAL);
    expect(await session.exitCode).toBe(0);
  }, 60_000);
}
