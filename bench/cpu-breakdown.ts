// Where the CPU of a proxied path goes, by process: the client (which reports its own CPU
// over its measured requests), the proxy and the origin (their containers' cgroups, read
// around each run). CPU is load-robust where rates are not, and it bounds them: with every
// core busy, a path cannot go faster than cores ÷ its total CPU per unit of work.
import { existsSync, readFileSync } from "node:fs";
import type { DockerFixture } from "../test/support/docker-fixture.js";
import { printTable, stats } from "./lib.js";

/**
 * CPU time (ms) a running container has used so far, from its cgroup (v1 cpuacct.usage or v2
 * cpu.stat): exact, one file read per call. `docker exec` processes run in the container's
 * cgroup, so a client exec'd into it counts too.
 */
export async function containerCpuReader(fx: DockerFixture, idOrName: string): Promise<() => number> {
  const r = await fx.engine.inspectContainer(idOrName);
  const pid = r.kind === "ok" ? r.body.State.Pid : 0;
  if (!pid) throw new Error(`${idOrName}: not running, no cgroup to read`);
  let file: string | undefined;
  for (const line of readFileSync(`/proc/${pid}/cgroup`, "utf8").split("\n")) {
    const [, controllers = "", path = ""] = line.split(":");
    if (controllers.split(",").includes("cpuacct")) {
      file = [`/sys/fs/cgroup/${controllers}${path}/cpuacct.usage`, `/sys/fs/cgroup/cpuacct${path}/cpuacct.usage`].find((f) => existsSync(f));
      break;
    }
    if (line.startsWith("0::") && existsSync(`/sys/fs/cgroup${path}/cpu.stat`)) file = `/sys/fs/cgroup${path}/cpu.stat`;
  }
  if (file === undefined) throw new Error(`${idOrName}: no cgroup CPU accounting found for pid ${pid}`);
  const f = file;
  return f.endsWith("cpuacct.usage") ? () => Number(readFileSync(f, "utf8")) / 1e6 : () => Number(/^usage_usec (\d+)$/m.exec(readFileSync(f, "utf8"))?.[1] ?? NaN) / 1e3;
}

/** CPU per unit of work (ms per MiB for 1 MiB bodies, µs per request for small ones), by process. */
export interface CpuShare {
  client: number;
  proxy: number | null;
  origin: number;
  total: number;
}

/** A proxy bench's scenario: path "/big" is 1 MiB bodies (units are MiB), any other small ones (units are requests). */
export interface CpuScenario {
  name: string;
  path: string;
  /** The origin's and proxy's deltas cover the warm-up requests too. */
  warmup: number;
  requests: number;
}

/** What a client run reports: its own CPU over its measured requests, their bytes and latencies. */
export interface CpuClientRun {
  cpuMs: number;
  bytes: number;
  lat: number[];
}

const isBig = (s: CpuScenario): boolean => s.path === "/big";

export class CpuBreakdown<M extends string> {
  readonly #runs = new Map<string, Omit<CpuShare, "total">[]>();

  constructor(
    private readonly origin: () => number,
    private readonly proxies: Partial<Record<M, () => number>>,
  ) {}

  /** Runs one client run and records each process's CPU per unit. */
  async measure<T extends CpuClientRun>(s: CpuScenario, mode: M, run: () => Promise<T>): Promise<T> {
    const o0 = this.origin();
    const p0 = this.proxies[mode]?.();
    const r = await run();
    const p1 = this.proxies[mode]?.();
    const big = isBig(s);
    const perUnit = (ms: number, units: number): number => (big ? ms / units : (ms * 1000) / units);
    const all = s.warmup + s.requests;
    const key = `${s.name}\0${mode}`;
    const runs = this.#runs.get(key) ?? [];
    runs.push({
      client: perUnit(r.cpuMs, big ? r.bytes / 2 ** 20 : r.lat.length),
      proxy: p0 === undefined || p1 === undefined ? null : perUnit(p1 - p0, all),
      origin: perUnit(this.origin() - o0, all),
    });
    this.#runs.set(key, runs);
    return r;
  }

  /** Medians over the runs of one scenario and path. */
  share(s: CpuScenario, mode: M): CpuShare {
    const xs = this.#runs.get(`${s.name}\0${mode}`) ?? [];
    const med = (v: number[]): number => stats(v).median;
    const proxy = xs.some((x) => x.proxy !== null) ? med(xs.map((x) => x.proxy ?? 0)) : null;
    const c = { client: med(xs.map((x) => x.client)), proxy, origin: med(xs.map((x) => x.origin)) };
    return Object.assign(c, { total: c.client + (c.proxy ?? 0) + c.origin });
  }

  /** Prints the table (each path against `baseline`, with the rate its CPU allows on `cores`); returns the medians. */
  print(cores: number, scenarios: CpuScenario[], modes: readonly M[], baseline: M): Record<string, Partial<Record<M, CpuShare>>> {
    const out: Record<string, Partial<Record<M, CpuShare>>> = {};
    const rows: (string | number)[][] = [];
    for (const s of scenarios) {
      const base = this.share(s, baseline).total;
      const row: Partial<Record<M, CpuShare>> = {};
      for (const mode of modes) {
        const c = (row[mode] = this.share(s, mode));
        rows.push([`${s.name}: ${mode}`, c.client, c.proxy ?? "", c.origin, c.total, c.total / base, (cores * (isBig(s) ? 1000 : 1e6)) / c.total]);
      }
      out[s.name] = row;
    }
    printTable(
      `where the CPU goes (ms per MiB for 1 MiB bodies, µs per request for small ones; from cgroups, robust to load): no path goes faster than ${cores} cores ÷ its total`,
      ["scenario: path", "client", "proxy", "origin", "total", `total ÷ ${baseline}`, `ceiling on ${cores} cores (MiB/s or req/s)`],
      rows,
    );
    return out;
  }
}
