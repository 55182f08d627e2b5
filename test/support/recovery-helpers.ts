// Helpers for monitoring and recovery tests against a real daemon.

import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { expect } from "vitest";
import type { DockerFixture } from "./docker-fixture.js";
import { eventually } from "./gateway-fixture.js";

export const ORIGIN_POLICY = (origin: string): string => `version: 1
network:
  rules:
    - name: origin
      endpoints:
        - host: ${origin}
          port: 8080
          protocol: http
          allowPrivate: ["10.0.0.0/8"]
`;

export async function phase(fx: DockerFixture, name: string): Promise<string> {
  const r = await fx.t.api("GET", `/v1/sandboxes/${name}`);
  return r.status === 404 ? "gone" : (r.body.phase as string);
}

export async function waitPhase(fx: DockerFixture, name: string, want: string, ms = 30_000): Promise<any> {
  await eventually(async () => ((await phase(fx, name)) === want ? true : undefined), ms, `${name} → ${want}`);
  return (await fx.t.api("GET", `/v1/sandboxes/${name}`)).body;
}

export async function createReady(fx: DockerFixture, name: string, body: Record<string, unknown> = {}): Promise<any> {
  const r = await fx.t.api("POST", "/v1/sandboxes", { name, ...body });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return waitPhase(fx, name, "Ready");
}

/** Phase changes of a sandbox, as "Old→New" strings (reason code appended for Error). */
export async function phaseLog(fx: DockerFixture, name: string): Promise<string[]> {
  const r = await fx.t.api("GET", `/v1/sandboxes/${name}/events`);
  return (r.body.events as any[])
    .filter((e) => e.kind === "phase")
    .map((e) => `${e.oldPhase ?? "-"}→${e.newPhase}${e.reason ? `(${e.reason.code})` : ""}`);
}

/** Run a command in the sandbox through the gateway's exec path; returns stdout and the exit code. */
export async function execIn(fx: DockerFixture, name: string, cmd: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const s = fx.t.gw.service;
  const session = await s.exec(name, { cmd, tty: false });
  session.stdin.end();
  let stdout = "";
  let stderr = "";
  session.stdout.on("data", (b: Buffer) => (stdout += b.toString()));
  session.stderr.on("data", (b: Buffer) => (stderr += b.toString()));
  const code = await session.exitCode;
  return { code, stdout, stderr };
}

/** Start an HTTP origin container on the gateway's egress network; returns its name. */
export async function startOrigin(fx: DockerFixture, name: string): Promise<string> {
  const image = fx.driver.imageRefs!.workload.id;
  const created = await fx.engine.createContainer(name, {
    Image: image,
    Cmd: ["node", "-e", 'require("http").createServer((q,s)=>s.end("hello from origin "+q.url)).listen(8080)'],
    HostConfig: { NetworkMode: `sandgate-egress-${fx.driver.gatewayId}`, RestartPolicy: { Name: "always" } },
  });
  expect(created.kind).toBe("ok");
  if (created.kind !== "ok") throw new Error("origin create failed");
  expect((await fx.engine.startContainer(created.body.Id)).kind).toBe("ok");
  return name;
}

/** From inside the workload: GET url through the supervisor proxy; "<status> <body>". agent:false: an agent of its own, so that node 24's env proxy (NODE_USE_ENV_PROXY=1) does not proxy a request already addressed to the proxy. */
export const PROXY_GET = (url: string): string[] => [
  "node",
  "-e",
  `const u=new URL(process.env.HTTP_PROXY);const t=new URL(${JSON.stringify(url)});
   require("http").get({agent:false,host:u.hostname,port:u.port,path:t.href,headers:{host:t.host},timeout:3000},r=>{let b="";r.on("data",d=>b+=d);r.on("end",()=>console.log(r.statusCode+" "+b))})
   .on("error",e=>console.log("ERR "+e.code)).on("timeout",function(){this.destroy(new Error("timeout"))});`,
];

export async function monitorMetrics(fx: DockerFixture): Promise<any> {
  return (await fx.t.api("GET", "/v1/status")).body.monitor;
}

/** When the sandbox's last phase change to `newPhase` was recorded (ms since the epoch). */
export async function phaseChangedAt(fx: DockerFixture, name: string, newPhase: string): Promise<number> {
  const { events } = (await fx.t.api("GET", `/v1/sandboxes/${name}/events`)).body as { events: { kind: string; newPhase: string | null; time: string }[] };
  const e = events.filter((x) => x.kind === "phase" && x.newPhase === newPhase).at(-1);
  if (!e) throw new Error(`${name} never went ${newPhase}`);
  return Date.parse(e.time);
}

/** When Docker destroyed the container (ms since the epoch), from the daemon's own event history. */
export async function destroyedAt(fx: DockerFixture, containerId: string): Promise<number> {
  const seen: number[] = [];
  const end = await fx.engine.events(
    { filters: { type: ["container"], container: [containerId], event: ["destroy"] }, since: "0", until: (Date.now() / 1000).toFixed(3) },
    (e) => seen.push(Math.floor(e.timeNano / 1e6)),
  );
  if (seen.length === 0) throw new Error(`no destroy event for ${containerId.slice(0, 12)} (stream ended: ${JSON.stringify(end)})`);
  return seen[0]!;
}

/**
 * A workload command that asks `http://ORIGIN:8080/tick` through the supervisor proxy every
 * 200 ms and logs "<ms since epoch> <status> [<denial reason>]" to /sandbox/egress.log: what
 * its boundary decides, readable on the host (egressLog) even while Docker is down.
 */
export const EGRESS_LOOP = (origin: string): string[] => [
  "node",
  "-e",
  `const h=require("http"),fs=require("fs"),u=new URL(process.env.HTTP_PROXY);
      const log=(at,s)=>{fs.appendFileSync("/sandbox/egress.log",at+" "+s+"\\n");setTimeout(tick,200)};
      function tick(){const at=Date.now();const q=h.get({agent:false,host:u.hostname,port:u.port,path:"http://${origin}:8080/tick",timeout:2000},r=>{let b="";r.on("data",d=>b+=d);r.on("end",()=>log(at,r.statusCode+(r.statusCode===403?" "+JSON.parse(b).reason:"")))});
        q.on("error",()=>log(at,"ERR"));q.on("timeout",()=>q.destroy(new Error("timeout")))}
      tick();`,
];

/** The EGRESS_LOOP log of a sandbox, read from its workspace on the host (the log appears with the first answer). */
export function egressLog(fx: DockerFixture, sandboxId: string): { at: number; status: string; reason?: string }[] {
  const file = join(fx.driver.workspaces.dataPath(sandboxId), "egress.log");
  return (existsSync(file) ? readFileSync(file, "utf8") : "")
    .trim()
    .split("\n")
    .map((l) => l.split(" "))
    .filter((l) => l.length > 1)
    .map(([at, status, reason]) => ({ at: Number(at), status: status!, ...(reason === undefined ? {} : { reason }) }));
}
