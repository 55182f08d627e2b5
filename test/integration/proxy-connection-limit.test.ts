// A workload that opens connections to its proxy without end (issue 29, item 3): on a real
// daemon, with --proxy-connections 16, a node program in the workload holds 16 CONNECT
// tunnels, then tries 24 more connections: each is refused at once (a reset), the sandbox's
// audit trail counts them (reason connection_limit, folded into records with a count), and
// a second sandbox's egress, through its own supervisor, is unaffected meanwhile. The same
// cap holds on the transparent path, for a client that knows nothing of the proxy: 16 raw
// connections held to an echo server allowed as `protocol: tcp`, the next ones reset at once
// and counted (recorded where they were headed, via transparent).

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deleteAllAndCheckMonitors, startDockerFixture, type DockerFixture } from "../support/docker-fixture.js";
import { eventually } from "../support/gateway-fixture.js";
import { ORIGIN_POLICY, PROXY_GET, createReady, execIn, startOrigin } from "../support/recovery-helpers.js";
import { NO_PROXY_ENV } from "../support/sandbox-helpers.js";

const CAP = 16;
const EXTRA = 24;

let fx: DockerFixture;
let origin: string;
const ECHO = "echo-pcap";

beforeAll(async () => {
  fx = await startDockerFixture({ name: "pcap", proxyConnections: CAP });
  origin = await startOrigin(fx, "origin-pcap");
  const echo = await fx.engine.createContainer(ECHO, {
    Image: fx.driver.imageRefs!.workload.id,
    Cmd: ["node", "-e", 'require("net").createServer((s) => { s.on("error", () => {}); s.pipe(s); }).listen(7000)'],
    HostConfig: { NetworkMode: `sandgate-egress-${fx.driver.gatewayId}`, RestartPolicy: { Name: "always" } },
  });
  if (echo.kind !== "ok") throw new Error(`echo: ${JSON.stringify(echo)}`);
  expect((await fx.engine.startContainer(echo.body.Id)).kind).toBe("ok");
});
afterAll(async () => {
  if (fx) await deleteAllAndCheckMonitors(fx);
  await fx?.close();
});

const TUNNEL_POLICY = (host: string): string => `version: 1
network:
  rules:
    - name: origin-tcp
      endpoints:
        - host: ${host}
          port: 8080
          protocol: tcp
          allowPrivate: ["10.0.0.0/8"]
`;

// In the workload: CAP tunnels held, then EXTRA more connections, each reported as "reset"
// (refused at once), "closed" or "answered"; the result goes to /sandbox/done.json, and the
// tunnels are held until /sandbox/release exists.
const HOG = `
const net = require("net"), fs = require("fs");
const u = new URL(process.env.HTTP_PROXY), target = process.argv[1], held = [];
const tunnel = () => new Promise((res) => {
  const s = net.connect(+u.port, u.hostname, () => s.write("CONNECT " + target + " HTTP/1.1\\r\\nHost: " + target + "\\r\\n\\r\\n"));
  held.push(s);
  let b = "";
  s.on("error", () => res("error"));
  s.on("data", function d(x) { b += x; if (b.includes("\\r\\n\\r\\n")) { s.off("data", d); res(b.split(" ")[1]); } });
});
const extra = () => new Promise((res) => {
  const s = net.connect(+u.port, u.hostname);
  let reset = false;
  s.on("error", (e) => { reset = reset || e.code === "ECONNRESET"; });
  s.on("close", () => res(reset ? "reset" : "closed"));
  s.on("connect", () => s.write("GET / HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n"));
  s.on("data", () => { res("answered"); s.destroy(); });
});
(async () => {
  const tunnels = [], extras = [];
  for (let i = 0; i < ${CAP}; i++) tunnels.push(await tunnel());
  for (let i = 0; i < ${EXTRA}; i++) extras.push(await extra());
  fs.writeFileSync("/sandbox/done.json", JSON.stringify({ tunnels, extras }));
  const w = setInterval(() => { if (fs.existsSync("/sandbox/release")) { clearInterval(w); held.forEach((s) => s.destroy()); } }, 100);
})();
`;

describe("a workload that opens connections to its proxy without end", () => {
  it("hits the cap: the rest are refused at once and counted in its audit trail; another sandbox's egress is unaffected", { timeout: 240_000 }, async () => {
    await createReady(fx, "hog", { policy: TUNNEL_POLICY(origin) });
    await createReady(fx, "neighbour", { policy: ORIGIN_POLICY(origin) });
    const hog = execIn(fx, "hog", ["node", "-e", HOG, `${origin}:8080`]);
    try {
      const done = await eventually(async () => {
        const r = await execIn(fx, "hog", ["cat", "/sandbox/done.json"]);
        return r.code === 0 ? (JSON.parse(r.stdout) as { tunnels: string[]; extras: string[] }) : undefined;
      }, 120_000, "the workload's attempts");
      expect(done.tunnels).toEqual(Array.from({ length: CAP }, () => "200"));
      expect(done.extras).toEqual(Array.from({ length: EXTRA }, () => "reset"));

      // While the hog holds every slot of its own proxy, its neighbour's egress works.
      expect((await execIn(fx, "neighbour", PROXY_GET(`http://${origin}:8080/n`))).stdout).toBe("200 hello from origin /n\n");

      // The refusals are in the hog's audit trail, folded into records with a count.
      const records = await eventually(async () => {
        const r = await fx.t.api("GET", "/v1/sandboxes/hog/audit?decision=deny&tail=1000");
        const limit = (r.body.audit as { count: number; event: { reason?: string; protocol: string; port: number } }[]).filter((a) => a.event.reason === "connection_limit");
        return limit.reduce((n, a) => n + a.count, 0) === EXTRA ? limit : undefined;
      }, 30_000, `${EXTRA} refusals in the audit trail`);
      expect(records.length).toBeLessThan(EXTRA);
      expect(records.some((a) => a.count > 1)).toBe(true);
      expect(records[0]!.event).toMatchObject({ protocol: "tcp", port: 3128 });
      // Nothing of the neighbour's is.
      const theirs = (await fx.t.api("GET", "/v1/sandboxes/neighbour/audit?tail=1000")).body.audit as { event: { reason?: string } }[];
      expect(theirs.filter((a) => a.event.reason === "connection_limit")).toEqual([]);
    } finally {
      await execIn(fx, "hog", ["touch", "/sandbox/release"]);
      await hog;
    }
  });

  it("the transparent path has the same cap: raw connections held by a client with no proxy, the rest reset at once and counted where they were headed", { timeout: 240_000 }, async () => {
    await createReady(fx, "thog", { policy: TUNNEL_POLICY(ECHO).replace("port: 8080", "port: 7000") });
    // Each held connection is echoed once (so it went through to the echo server); extras report how they ended.
    const THOG = `
const net = require("net"), fs = require("fs"), held = [];
const hold = () => new Promise((res) => {
  const s = net.connect(7000, "${ECHO}", () => s.write("ping\\n"));
  held.push(s);
  s.on("error", (e) => res("error " + e.code));
  s.once("data", (b) => res(b.toString().trim()));
});
const extra = () => new Promise((res) => {
  const s = net.connect(7000, "${ECHO}", () => s.write("ping\\n"));
  let reset = false;
  s.on("error", (e) => { reset = reset || e.code === "ECONNRESET"; });
  s.on("close", () => res(reset ? "reset" : "closed"));
  s.on("data", () => { res("answered"); s.destroy(); });
});
(async () => {
  const holds = [], extras = [];
  for (let i = 0; i < ${CAP}; i++) holds.push(await hold());
  for (let i = 0; i < ${EXTRA}; i++) extras.push(await extra());
  fs.writeFileSync("/sandbox/done.json", JSON.stringify({ holds, extras }));
  const w = setInterval(() => { if (fs.existsSync("/sandbox/release")) { clearInterval(w); held.forEach((s) => s.destroy()); } }, 100);
})();
`;
    const hog = execIn(fx, "thog", [...NO_PROXY_ENV, "node", "-e", THOG]);
    try {
      const done = await eventually(async () => {
        const r = await execIn(fx, "thog", ["cat", "/sandbox/done.json"]);
        return r.code === 0 ? (JSON.parse(r.stdout) as { holds: string[]; extras: string[] }) : undefined;
      }, 120_000, "the workload's attempts");
      expect(done.holds).toEqual(Array.from({ length: CAP }, () => "ping"));
      expect(done.extras).toEqual(Array.from({ length: EXTRA }, () => "reset"));
      const records = await eventually(async () => {
        const r = await fx.t.api("GET", "/v1/sandboxes/thog/audit?decision=deny&tail=1000");
        const limit = (r.body.audit as { count: number; event: { reason?: string; port: number; via?: string } }[]).filter((a) => a.event.reason === "connection_limit");
        return limit.reduce((n, a) => n + a.count, 0) === EXTRA ? limit : undefined;
      }, 30_000, `${EXTRA} refusals in the audit trail`);
      expect(records[0]!.event).toMatchObject({ protocol: "tcp", port: 7000, via: "transparent" });
      await execIn(fx, "thog", ["touch", "/sandbox/release"]);
      await hog;
      // The held ones were allowed, on the transparent path: their decisions, not the close
      // records their release writes (activity "close"), which may or may not be in yet.
      await eventually(async () => {
        const allowed = (await fx.t.api("GET", "/v1/sandboxes/thog/audit?decision=allow&tail=1000")).body.audit as { count: number; event: { port: number; via?: string; activity?: string } }[];
        return allowed.filter((a) => a.event.port === 7000 && a.event.via === "transparent" && a.event.activity === undefined).reduce((n, a) => n + a.count, 0) === CAP ? true : undefined;
      }, 30_000, `${CAP} allowed transparent connections in the audit trail`);
    } finally {
      await execIn(fx, "thog", ["touch", "/sandbox/release"]);
      await hog;
    }
  });
});
