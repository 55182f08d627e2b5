// The Docker objects of one sandbox, as pure builders: names, labels and the
// create configs of its network, volume and two containers. Every security
// property of a sandbox is decided here, so it can be read and tested in one place.

import type { Role } from "../contract.js";
import type { Resources } from "../../lifecycle/spec.js";
import type { ContainerCreateConfig, Labels, NetworkCreateConfig, VolumeCreateConfig } from "./engine/types.js";
import { IMAGE_NODE_PATH, IMAGE_SUPERVISOR_PATH } from "./rootfs.js";
import { LAUNCH_CONFIG_PATH, LAUNCH_DIR, RUN_DIR } from "../../protocol/launch.js";
import { runDirOf } from "./launch-paths.js";
import { DEFAULT_CONTAINER_LOG, logConfig, type ContainerLogBound } from "./log-config.js";

export const LABEL = {
  gateway: "sandgate.gateway",
  sandbox: "sandgate.sandbox",
  name: "sandgate.name",
  generation: "sandgate.generation",
  role: "sandgate.role",
  nonce: "sandgate.nonce",
} as const;


export interface SandboxObjectsInput {
  gatewayId: string;
  sandboxId: string;
  name: string;
  generation: number;
  nonce: string;
}

export const networkName = (sandboxId: string): string => `sandgate-${sandboxId}-net`;
export const volumeName = (sandboxId: string): string => `sandgate-${sandboxId}-workspace`;
export const containerName = (sandboxId: string, generation: number, role: Role): string =>
  `sandgate-${sandboxId}-g${generation}-${role}`;
export const egressNetworkName = (gatewayId: string): string => `sandgate-egress-${gatewayId}`;

export function sandboxLabels(i: Pick<SandboxObjectsInput, "gatewayId" | "sandboxId" | "name">): Labels {
  return { [LABEL.gateway]: i.gatewayId, [LABEL.sandbox]: i.sandboxId, [LABEL.name]: i.name };
}

export function containerLabels(i: SandboxObjectsInput, role: Role): Labels {
  return { ...sandboxLabels(i), [LABEL.generation]: String(i.generation), [LABEL.role]: role, [LABEL.nonce]: i.nonce };
}

export const labelFilter = (labels: Labels): { label: string[] } => ({
  label: Object.entries(labels).map(([k, v]) => `${k}=${v}`),
});

/**
 * The sandbox's private network: `internal` gives it no route out, and
 * inhibit_ipv4 leaves the host without an address on it, so the workload cannot
 * reach host services listening on all interfaces (measured: without it, it can).
 * `subnet`: a /28 of the gateway's sandbox range (sandbox-subnets.ts); absent, Docker's pools choose.
 */
export function internalNetworkConfig(i: SandboxObjectsInput, subnet?: string): NetworkCreateConfig {
  return {
    Name: networkName(i.sandboxId),
    Driver: "bridge",
    Internal: true,
    CheckDuplicate: true,
    Labels: sandboxLabels(i),
    Options: { "com.docker.network.bridge.inhibit_ipv4": "true" },
    ...(subnet === undefined ? {} : { IPAM: { Driver: "default", Config: [{ Subnet: subnet }] } }),
  };
}

/**
 * The network supervisors use to reach the outside and the gateway. Not internal: the host holds
 * an address on it, so a supervisor listens on nothing there (the proxy binds its sandbox-network
 * address, health is a Unix socket: supervisor.ts).
 */
export function egressNetworkConfig(gatewayId: string): NetworkCreateConfig {
  return {
    Name: egressNetworkName(gatewayId),
    Driver: "bridge",
    Internal: false,
    CheckDuplicate: true,
    Labels: { [LABEL.gateway]: gatewayId, [LABEL.role]: "egress" },
  };
}

export function volumeConfig(i: SandboxObjectsInput): VolumeCreateConfig {
  return { Name: volumeName(i.sandboxId), Labels: sandboxLabels(i) };
}

/** Settings both containers share: nothing is restarted behind the gateway's back. */
function hardened(resources: Resources) {
  return {
    // An exit is terminal: Docker must never restart a container on its own.
    RestartPolicy: { Name: "no" as const },
    CapDrop: ["ALL"],
    SecurityOpt: ["no-new-privileges:true"],
    ReadonlyRootfs: true,
    Tmpfs: { "/tmp": "rw,nosuid,nodev,size=64m" },
    Memory: resources.memoryMb * 1024 * 1024,
    MemorySwap: resources.memoryMb * 1024 * 1024,
    NanoCpus: Math.round(resources.cpus * 1e9),
    PidsLimit: resources.pids,
  };
}

/**
 * The supervisor's limits by default (`gateway start --supervisor-cpus/--supervisor-memory`).
 * A CPU limit is a cap, not a reservation: an idle supervisor costs nothing under it, and
 * one core lets a terminated HTTPS stream (two TLS legs) keep pace with a direct one
 * (docs/performance.md, section 7). pids stays fixed: the supervisor is one node process.
 */
export const SUPERVISOR_RESOURCES: Resources = { memoryMb: 128, cpus: 1, pids: 128 };

/**
 * glibc malloc for the supervisor's node: keep up to 8 MiB free at the top of the heap and grow
 * it 4 MiB at a time. By default a proxy relaying bodies frees its 64 KiB read buffers, glibc
 * gives the top of the heap back to the kernel and takes it again a moment later, and every
 * page comes back zeroed through a fault: measured (bench proxy, 1 MiB bodies), 5.2–5.9 ms of
 * supervisor CPU per MiB with the defaults, 2.65 ms with these, and 0.34× → 0.60× direct.
 * (1 MiB pad and 4 MiB threshold did not help.) The cost: up to 8 MiB more RSS after traffic.
 */
export const SUPERVISOR_MALLOC_ENV = ["MALLOC_TOP_PAD_=4194304", "MALLOC_TRIM_THRESHOLD_=8388608"] as const;

export function supervisorConfig(i: SandboxObjectsInput, imageId: string, launchDirOnHost: string, uid: number, resources: Resources = SUPERVISOR_RESOURCES, log: ContainerLogBound = DEFAULT_CONTAINER_LOG, ipv6 = true): ContainerCreateConfig {
  return {
    Image: imageId,
    Cmd: [IMAGE_NODE_PATH, IMAGE_SUPERVISOR_PATH],
    User: `${uid}:${uid}`,
    Env: [`SANDGATE_LAUNCH_CONFIG=${LAUNCH_CONFIG_PATH}`, ...SUPERVISOR_MALLOC_ENV],
    Labels: containerLabels(i, "supervisor"),
    StopSignal: "SIGTERM",
    StopTimeout: 5,
    HostConfig: {
      ...hardened(resources),
      LogConfig: logConfig(log),
      NetworkMode: networkName(i.sandboxId),
      // The workload's gateway must route nothing: a packet the transparent path's redirects
      // miss goes nowhere (Docker turns forwarding on in a container's namespace). No IPv6.
      Sysctls: { "net.ipv4.ip_forward": "0", ...(ipv6 ? NO_IPV6 : {}) },
      Mounts: [
        { Type: "bind", Source: launchDirOnHost, Target: LAUNCH_DIR, ReadOnly: true },
        // Its one writable host directory (the health socket), inside the launch directory: 0700, its uid's.
        { Type: "bind", Source: runDirOf(launchDirOnHost), Target: RUN_DIR },
      ],
    },
    NetworkingConfig: { EndpointsConfig: { [networkName(i.sandboxId)]: { Aliases: ["sandgate-proxy"] } } },
  };
}

/**
 * IPv6 off in a sandbox's containers: the transparent path governs IPv4, and the workload has
 * nothing else. Only where the host's kernel has IPv6 (else these sysctls do not exist).
 */
export const NO_IPV6 = { "net.ipv6.conf.all.disable_ipv6": "1", "net.ipv6.conf.default.disable_ipv6": "1" } as const;

/** The workload's resolv.conf on the transparent path: its supervisor, which answers what the policy allows. */
export const resolverOf = (supervisorIp: string): string => `# sandgate: names are answered by the supervisor, as the policy allows
nameserver ${supervisorIp}
options timeout:2 attempts:2
`;

/**
 * The workload's resolv.conf: a nameserver on its own loopback, where nothing
 * listens. Resolving names is the proxy's job; without this, Docker's embedded
 * DNS would forward the workload's lookups to the host's resolvers, a channel
 * out of the sandbox that no policy sees.
 */
export const NO_RESOLVER = "# sandgate: names are resolved by the egress proxy, not in the workload\nnameserver 127.0.0.1\noptions timeout:1 attempts:1\n";

export const IDLE_COMMAND = ["sleep", "2147483647"];

export function workloadConfig(
  i: SandboxObjectsInput,
  opts: {
    imageId: string;
    command: string[] | undefined;
    env: Record<string, string>;
    resources: Resources;
    proxyUrl: string;
    defaultImage: boolean;
    /** Host file mounted as the workload's /etc/resolv.conf (see NO_RESOLVER). */
    resolvConf: string;
    /** The policy's fixed sections: readWrite paths become tmpfs mounts; user overrides the default uid. */
    filesystem?: { readWrite: readonly string[] };
    user?: string;
    /** The working directory (absolute); default /sandbox, the workspace. */
    workdir?: string;
    /** The workload's uid and gid unless the policy names a user (host-ids.ts). */
    uid: number;
    /** Host directory bind-mounted as /sandbox (a size-limited workspace); null: the sandbox's named volume. */
    workspace: string | null;
    /** The sandbox CA's public trust files and the environment that points clients at them. */
    trust?: { dir: string; target: string; env: Readonly<Record<string, string>> };
    /** The host's kernel has IPv6 (then it is turned off in the workload). Default true. */
    ipv6?: boolean;
    /** What Docker keeps of its output (log-config.ts). */
    log?: ContainerLogBound;
  },
): ContainerCreateConfig {
  // Loopback is the workload's own (its servers, port-forward's target), never egress: node 24
  // (NODE_USE_ENV_PROXY), curl and python would otherwise send it to the proxy.
  const NO_PROXY = "localhost,127.0.0.1,::1";
  const proxyEnv = { HTTP_PROXY: opts.proxyUrl, HTTPS_PROXY: opts.proxyUrl, http_proxy: opts.proxyUrl, https_proxy: opts.proxyUrl, NO_PROXY, no_proxy: NO_PROXY };
  const env = { ...opts.env, ...(opts.trust?.env ?? {}), ...proxyEnv };
  const config: ContainerCreateConfig = {
    Image: opts.imageId,
    Env: Object.entries(env).map(([k, v]) => `${k}=${v}`),
    // A non-root user always: the image's USER is not trusted to be one.
    User: opts.user ?? `${opts.uid}:${opts.uid}`,
    WorkingDir: opts.workdir ?? "/sandbox",
    Labels: containerLabels(i, "workload"),
    StopTimeout: 5,
    HostConfig: {
      ...hardened(opts.resources),
      LogConfig: logConfig(opts.log ?? DEFAULT_CONTAINER_LOG),
      Tmpfs: {
        "/tmp": "rw,nosuid,nodev,size=64m",
        ...Object.fromEntries((opts.filesystem?.readWrite ?? []).filter((p) => p !== "/sandbox" && p !== "/tmp").map((p) => [p, "rw,nosuid,nodev,size=64m"])),
      },
      ...(opts.ipv6 === false ? {} : { Sysctls: { ...NO_IPV6 } }),
      NetworkMode: networkName(i.sandboxId),
      // Docker's embedded DNS (127.0.0.11) still answers on this network; with a
      // loopback server configured for the container it forwards names to the
      // container's own loopback, never to the host's resolvers (CVE-2024-29018:
      // with the host's loopback resolver it would, from the host's namespace).
      Dns: ["127.0.0.1"],
      Init: true,
      Mounts: [
        opts.workspace === null
          ? { Type: "volume", Source: volumeName(i.sandboxId), Target: "/sandbox" }
          : { Type: "bind", Source: opts.workspace, Target: "/sandbox" },
        { Type: "bind", Source: opts.resolvConf, Target: "/etc/resolv.conf", ReadOnly: true },
        ...(opts.trust ? [{ Type: "bind" as const, Source: opts.trust.dir, Target: opts.trust.target, ReadOnly: true }] : []),
      ],
    },
  };
  // Imported images have no Cmd: our default image idles unless told otherwise.
  const command = opts.command ?? (opts.defaultImage ? IDLE_COMMAND : undefined);
  if (command) config.Cmd = command;
  return config;
}
