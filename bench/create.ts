// create: `sandbox create` → Ready through the gateway (waited for as the SDK and the CLI
// wait: woken by the sandbox's watch stream), against the plain Docker
// API creating and starting the same network, volume and two containers (same
// configs, from the same builders) with no readiness check; then `exec -- true`
// through the gateway's exec WebSocket against a Docker exec of the same command
// through the Docker API; then `sandbox delete` → gone (404) against removing
// the same objects with plain Docker calls (`docker rm -f` of both containers,
// the network, the volume). Runs alternate between the paths so drift on a busy
// machine hits both alike.

import { chownSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import WebSocket from "ws";
import { startExec } from "../src/driver/docker/exec-session.js";
import type { EngineClient } from "../src/driver/docker/engine/client.js";
import { describe, type EngineResult } from "../src/driver/docker/engine/result.js";
import { HEALTH_SOCKET_PATH, PROXY_PORT } from "../src/protocol/launch.js";
import { runDirOf } from "../src/driver/docker/launch-paths.js";
import {
  NO_RESOLVER,
  egressNetworkName,
  internalNetworkConfig,
  supervisorConfig,
  volumeConfig,
  workloadConfig,
  type SandboxObjectsInput,
} from "../src/driver/docker/objects.js";
import { DEFAULT_IDS } from "../src/driver/docker/rootfs.js";
import { Transport } from "../src/sdk/transport.js";
import { waitForPhase } from "../src/sdk/wait.js";

const SUPERVISOR_UID = DEFAULT_IDS.supervisor;
import { DEFAULT_RESOURCES } from "../src/lifecycle/spec.js";
import { defaultPolicy, serializePolicy } from "../src/policy/index.js";
import { startDockerFixture, type DockerFixture } from "../test/support/docker-fixture.js";
import { CallTrace } from "./call-trace.js";
import { Cleanup, machine, parseNumber, printTable, progress, stats, writeResult, type BenchOptions } from "./lib.js";

function must<T>(step: string, r: EngineResult<T>): T {
  if (r.kind === "ok") return r.body;
  throw new Error(`${step}: ${describe(r)}`);
}

/**
 * POST, then the SDK's wait (what `sandgate sandbox create` does: woken by the sandbox's
 * watch stream, so no poll loads the gateway or adds a poll period) until Ready; ms since the POST.
 */
async function sandgateCreate(fx: DockerFixture, t: Transport, name: string): Promise<{ ms: number; id: string }> {
  const t0 = performance.now();
  const r = await fx.t.api("POST", "/v1/sandboxes", { name });
  if (r.status !== 201) throw new Error(`create ${name}: ${r.status} ${JSON.stringify(r.body)}`);
  const s = await waitForPhase(t, name, { until: ["Ready"], timeoutMs: 60_000 });
  return { ms: performance.now() - t0, id: s!.id };
}

/** Where the gateway's own time goes, from its event log: Docker calls vs readiness verification. */
async function breakdown(fx: DockerFixture, id: string): Promise<{ dockerMs: number; verifyMs: number }> {
  const events = await fx.t.gw.store.events(id, { limit: 1000 });
  const at = (pred: (e: (typeof events)[number]) => boolean): number => Date.parse(events.find(pred)?.time ?? "");
  const created = Date.parse(events[0]?.time ?? "");
  const verifying = at((e) => e.message === "verifying readiness");
  const ready = at((e) => e.newPhase === "Ready");
  return { dockerMs: verifying - created, verifyMs: ready - verifying };
}

/** DELETE, then the SDK's wait (as for create) until the sandbox is gone; ms since the DELETE. */
async function sandgateDelete(fx: DockerFixture, t: Transport, name: string): Promise<number> {
  const t0 = performance.now();
  const r = await fx.t.api("DELETE", `/v1/sandboxes/${name}`);
  if (r.status !== 202) throw new Error(`delete ${name}: ${r.status} ${JSON.stringify(r.body)}`);
  await waitForPhase(t, name, { until: ["Deleted"], timeoutMs: 60_000 });
  return performance.now() - t0;
}

/** `sandgate sandbox exec NAME -- true` as the CLI does it: the exec WebSocket, eof, the exit message; ms to the close. */
function sandgateExec(fx: DockerFixture, name: string): Promise<number> {
  const t0 = performance.now();
  const ws = new WebSocket(fx.t.wsUrl(`/v1/sandboxes/${name}/exec?cmd=true&tty=0`), { headers: { authorization: `Bearer ${fx.t.token}` }, perMessageDeflate: false });
  return new Promise((resolve, reject) => {
    let exit: number | undefined;
    ws.on("open", () => ws.send(JSON.stringify({ type: "eof" })));
    ws.on("message", (data: Buffer, binary: boolean) => {
      if (!binary) exit = (JSON.parse(data.toString()) as { code?: number }).code ?? exit;
    });
    ws.on("error", reject);
    ws.on("close", () => (exit === 0 ? resolve(performance.now() - t0) : reject(new Error(`exec in ${name} ended with ${String(exit)}`))));
  });
}

/** The same command through the Docker API: exec create, start (attached), exit code. */
async function dockerExec(engine: EngineClient, containerId: string): Promise<number> {
  const t0 = performance.now();
  const session = await startExec(engine, containerId, { cmd: ["true"], tty: false });
  session.stdin.end();
  session.stdout.resume();
  session.stderr.resume();
  const code = await session.exitCode;
  session.close();
  if (code !== 0) throw new Error(`docker exec ended with ${code}`);
  return performance.now() - t0;
}

interface Baseline {
  engine: EngineClient;
  egressNetwork: string;
  supervisorImage: string;
  workloadImage: string;
  launchRoot: string;
  resolvConf: string;
}

/** The same objects the driver makes, with plain Docker calls and no readiness check. */
async function plainDockerCreate(b: Baseline, i: SandboxObjectsInput, trace: CallTrace, keep: boolean): Promise<number> {
  // The launch file is written (untimed) like the driver does, so the supervisor has its config.
  const launchDir = join(b.launchRoot, i.sandboxId);
  mkdirSync(runDirOf(launchDir), { recursive: true, mode: 0o700 });
  const policy = JSON.parse(serializePolicy(defaultPolicy())) as unknown;
  const launch = { sandboxId: i.sandboxId, generation: 1, nonce: i.nonce, proxyPort: PROXY_PORT, healthSocket: HEALTH_SOCKET_PATH, policy, policyRevision: 1 };
  writeFileSync(join(launchDir, "launch.json"), JSON.stringify(launch));
  for (const p of [launchDir, runDirOf(launchDir), join(launchDir, "launch.json")]) chownSync(p, SUPERVISOR_UID, SUPERVISOR_UID);

  const t0 = performance.now();
  trace.begin();
  must("create network", await b.engine.createNetwork(internalNetworkConfig(i)));
  must("create volume", await b.engine.createVolume(volumeConfig(i)));
  const sup = must("create supervisor", await b.engine.createContainer(`${i.sandboxId}-supervisor`, supervisorConfig(i, b.supervisorImage, launchDir, SUPERVISOR_UID)));
  must("connect supervisor", await b.engine.request("POST", `/networks/${b.egressNetwork}/connect`, { body: { Container: sup.Id } }));
  must("start supervisor", await b.engine.startContainer(sup.Id));
  const wl = must(
    "create workload",
    await b.engine.createContainer(
      `${i.sandboxId}-workload`,
      workloadConfig(i, { imageId: b.workloadImage, command: undefined, env: {}, resources: DEFAULT_RESOURCES, proxyUrl: "http://sandgate-proxy:3128", defaultImage: true, resolvConf: b.resolvConf, uid: DEFAULT_IDS.workload, workspace: null }),
    ),
  );
  must("start workload", await b.engine.startContainer(wl.Id));
  trace.end(keep);
  return performance.now() - t0;
}

/** `docker rm -f` of both containers, then the network and the volume; ms. */
async function plainDockerRemove(b: Baseline, i: SandboxObjectsInput): Promise<number> {
  const t0 = performance.now();
  for (const role of ["workload", "supervisor"]) must(`remove ${role}`, await b.engine.removeContainer(`${i.sandboxId}-${role}`, { force: true }));
  must("remove network", await b.engine.removeNetwork(internalNetworkConfig(i).Name));
  must("remove volume", await b.engine.removeVolume(volumeConfig(i).Name!, true));
  const ms = performance.now() - t0;
  rmSync(join(b.launchRoot, i.sandboxId), { recursive: true, force: true });
  return ms;
}

export async function run(o: BenchOptions): Promise<void> {
  const reps = parseNumber(o.flags.reps, o.quick ? 2 : 20);
  const execsPerRep = parseNumber(o.flags.execs, o.quick ? 1 : 5);
  const m = machine();
  const cleanup = new Cleanup();
  try {
    progress("create: starting a private dockerd and a gateway");
    const fx = await startDockerFixture({ liveRestore: true, name: "bcreate" });
    cleanup.add("fixture", () => fx.close());
    const launchRoot = mkdtempSync(join(tmpdir(), "sg-bench-launch-"));
    cleanup.add("launch dir", () => rmSync(launchRoot, { recursive: true, force: true }));
    const refs = fx.driver.imageRefs!;
    const b: Baseline = {
      engine: fx.engine,
      egressNetwork: egressNetworkName(fx.driver.gatewayId),
      supervisorImage: refs.supervisor.id,
      workloadImage: refs.workload.id,
      launchRoot,
      resolvConf: join(launchRoot, "resolv.conf"),
    };
    writeFileSync(b.resolvConf, NO_RESOLVER, { mode: 0o644 });
    const sdk = new Transport({ home: fx.t.home.dir, env: {} });
    // Every Docker call of each path, for the per-step timeline. The driver's observer is
    // the gateway's metrics hook; the bench takes it over (no metric is read here).
    const sgTrace = new CallTrace();
    const plainTrace = new CallTrace();
    fx.driver.instrument(sgTrace.observe);
    fx.engine.observe(plainTrace.observe);

    const sg: number[] = [];
    const plain: number[] = [];
    const sgDelete: number[] = [];
    const plainDelete: number[] = [];
    const sgExec: number[] = [];
    const plainExec: number[] = [];
    const dockerMs: number[] = [];
    const verifyMs: number[] = [];
    // Rep 0 is a warm-up (first container start on a fresh daemon, JIT): discarded.
    for (let rep = 0; rep <= reps; rep++) {
      const input: SandboxObjectsInput = { gatewayId: "bench-baseline", sandboxId: `plain${rep}`, name: `plain${rep}`, generation: 1, nonce: `n${rep}` };
      const doSandgate = async (): Promise<void> => {
        const name = `bench-${rep}`;
        sgTrace.begin();
        const r = await sandgateCreate(fx, sdk, name);
        sgTrace.end(rep > 0);
        const bd = await breakdown(fx, r.id);
        // The exec pairs run here, on this Ready sandbox, alternating with Docker's own exec.
        const workloadId = (await fx.t.api("GET", `/v1/sandboxes/${name}`)).body.runtime.workload.id as string;
        for (let e = 0; e < execsPerRep; e++) {
          const pair = e % 2 === 0 ? [() => sandgateExec(fx, name), () => dockerExec(fx.engine, workloadId)] : [() => dockerExec(fx.engine, workloadId), () => sandgateExec(fx, name)];
          const first = await pair[0]!();
          const second = await pair[1]!();
          if (rep === 0) continue;
          sgExec.push(e % 2 === 0 ? first : second);
          plainExec.push(e % 2 === 0 ? second : first);
        }
        const del = await sandgateDelete(fx, sdk, name);
        if (rep === 0) return;
        sg.push(r.ms);
        sgDelete.push(del);
        dockerMs.push(bd.dockerMs);
        verifyMs.push(bd.verifyMs);
      };
      const doPlain = async (): Promise<void> => {
        const ms = await plainDockerCreate(b, input, plainTrace, rep > 0);
        const del = await plainDockerRemove(b, input);
        if (rep === 0) return;
        plain.push(ms);
        plainDelete.push(del);
      };
      progress(`create: rep ${rep}/${reps}${rep === 0 ? " (warm-up)" : ""}, sandgate median so far ${stats(sg).median.toFixed(0)} ms`);
      if (rep % 2 === 0) {
        await doSandgate();
        await doPlain();
      } else {
        await doPlain();
        await doSandgate();
      }
    }

    const s = stats(sg);
    const p = stats(plain);
    const row = (label: string, x: ReturnType<typeof stats>): (string | number)[] => [label, x.median, x.p95, x.min, x.max];
    printTable(`create, exec, delete (${reps} reps, ${execsPerRep} execs each, ${m.cores} cores, load ${m.loadavg.join("/")})`, ["path", "median ms", "p95 ms", "min ms", "max ms"], [
      row("sandgate create → Ready", s),
      row("  of which Docker calls", stats(dockerMs)),
      row("  of which readiness verify", stats(verifyMs)),
      row("plain Docker API create+start", p),
      row("sandgate exec -- true", stats(sgExec)),
      row("Docker API exec true", stats(plainExec)),
      row("sandgate delete → gone", stats(sgDelete)),
      row("plain docker rm -f + network + volume", stats(plainDelete)),
    ]);
    const sgSteps = sgTrace.print("sandgate create → Ready: its Docker calls (the monitor's included)");
    const plainSteps = plainTrace.print("plain Docker API create + start: its calls");
    const ratios = {
      create: { ratio: s.median / p.median, target: 1.1 },
      exec: { ratio: stats(sgExec).median / stats(plainExec).median, target: 1.2 },
      delete: { ratio: stats(sgDelete).median / stats(plainDelete).median, target: 1.2 },
    };
    printTable(
      "ratios (median / median)",
      ["figure", "ratio", "target", ""],
      Object.entries(ratios).map(([k, r]) => [k, r.ratio, `≤ ${r.target}`, r.ratio <= r.target ? "met" : "MISSED"]),
    );
    const file = writeResult("create", m, {
      reps,
      execsPerRep,
      sandgateMs: s,
      sandgateDockerCallsMs: stats(dockerMs),
      sandgateVerifyMs: stats(verifyMs),
      plainDockerMs: p,
      sandgateExecMs: stats(sgExec),
      dockerExecMs: stats(plainExec),
      sandgateDeleteMs: stats(sgDelete),
      plainDeleteMs: stats(plainDelete),
      ratios,
      steps: { sandgate: sgSteps, plain: plainSteps },
      samples: { sandgate: sg, plain, sandgateExec: sgExec, dockerExec: plainExec, sandgateDelete: sgDelete, plainDelete },
    });
    progress(`create: wrote ${file}`);
  } finally {
    await cleanup.run();
  }
}
