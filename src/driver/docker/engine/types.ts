// Minimal shapes of the Engine API (v1.41) JSON that Sandgate reads or sends.
// Only the fields we use are listed; responses are NOT validated at runtime, so treat
// every field as possibly absent when a daemon is odd (the classifier does so).

export type Labels = Record<string, string>;

/** Filters for list/events calls, e.g. { label: ["sandgate.sandbox=abc"] }. */
export type Filters = Record<string, string[]>;

export interface ContainerState {
  Status: "created" | "running" | "paused" | "restarting" | "removing" | "exited" | "dead";
  Running: boolean;
  Paused?: boolean;
  Restarting?: boolean;
  Pid: number;
  ExitCode: number;
  /** RFC 3339 with nanoseconds; "0001-01-01T00:00:00Z" when never started. Compare for equality only. */
  StartedAt: string;
  FinishedAt: string;
  Error: string;
  OOMKilled: boolean;
}

export interface EndpointSettings {
  NetworkID: string;
  EndpointID?: string;
  IPAddress: string;
  Gateway?: string;
  MacAddress?: string;
  Aliases?: string[] | null;
}

export interface ContainerInspect {
  Id: string;
  /** With a leading slash, e.g. "/sg-abc-workload". */
  Name: string;
  Created: string;
  /** Image ID (sha256:...). */
  Image: string;
  Config: {
    Image: string;
    Labels: Labels | null;
    Cmd?: string[] | null;
    Env?: string[] | null;
    Hostname?: string;
  };
  State: ContainerState;
  HostConfig?: { NetworkMode?: string; AutoRemove?: boolean };
  NetworkSettings: { Networks: Record<string, EndpointSettings> | null };
}

export interface ContainerSummary {
  Id: string;
  Names: string[];
  Image: string;
  ImageID: string;
  Labels: Labels | null;
  State: string;
  Status: string;
  /** Unix seconds. */
  Created: number;
}

export interface Mount {
  Type: "bind" | "volume" | "tmpfs";
  Source?: string;
  Target: string;
  ReadOnly?: boolean;
  [key: string]: unknown;
}

export interface HostConfig {
  NetworkMode?: string;
  Binds?: string[];
  Mounts?: Mount[];
  AutoRemove?: boolean;
  RestartPolicy?: { Name: "" | "no" | "always" | "unless-stopped" | "on-failure"; MaximumRetryCount?: number };
  CapAdd?: string[];
  CapDrop?: string[];
  SecurityOpt?: string[];
  ReadonlyRootfs?: boolean;
  Memory?: number;
  NanoCpus?: number;
  PidsLimit?: number;
  Init?: boolean;
  Tmpfs?: Record<string, string>;
  /** Namespaced sysctls (net.*) set in the container's namespaces before it starts. */
  Sysctls?: Record<string, string>;
  ExtraHosts?: string[];
  Dns?: string[];
  LogConfig?: { Type: string; Config?: Record<string, string> };
  [key: string]: unknown;
}

/** Body of POST /containers/create. Extra fields are passed through to Docker. */
export interface ContainerCreateConfig {
  Image: string;
  Cmd?: string[];
  Entrypoint?: string[];
  Env?: string[];
  Labels?: Labels;
  User?: string;
  WorkingDir?: string;
  Hostname?: string;
  Tty?: boolean;
  OpenStdin?: boolean;
  StopSignal?: string;
  StopTimeout?: number;
  HostConfig?: HostConfig;
  NetworkingConfig?: { EndpointsConfig: Record<string, { Aliases?: string[]; IPAMConfig?: { IPv4Address?: string } }> };
  [key: string]: unknown;
}

export interface ContainerCreateResponse {
  Id: string;
  Warnings: string[] | null;
}

export interface NetworkCreateConfig {
  Name: string;
  Driver?: string;
  Internal?: boolean;
  Attachable?: boolean;
  CheckDuplicate?: boolean;
  EnableIPv6?: boolean;
  Labels?: Labels;
  Options?: Record<string, string>;
  IPAM?: { Driver?: string; Config?: { Subnet?: string; Gateway?: string; IPRange?: string }[] };
  [key: string]: unknown;
}

export interface NetworkCreateResponse {
  Id: string;
  Warning?: string;
}

export interface NetworkInspect {
  Name: string;
  Id: string;
  Created: string;
  Driver: string;
  Internal: boolean;
  Labels: Labels | null;
  Options: Record<string, string> | null;
  IPAM: { Config: { Subnet?: string; Gateway?: string }[] | null };
  Containers?: Record<string, { Name: string; EndpointID: string; IPv4Address: string }> | null;
}

export interface VolumeCreateConfig {
  Name?: string;
  Driver?: string;
  DriverOpts?: Record<string, string>;
  Labels?: Labels;
}

export interface Volume {
  Name: string;
  Driver: string;
  Mountpoint: string;
  Labels: Labels | null;
  CreatedAt?: string;
  Scope?: string;
}

export interface VolumeList {
  Volumes: Volume[] | null;
  Warnings: string[] | null;
}

export interface ImageInspect {
  Id: string;
  RepoTags: string[] | null;
  Created: string;
  Size: number;
  Config: {
    Cmd?: string[] | null;
    Entrypoint?: string[] | null;
    Env?: string[] | null;
    Labels?: Labels | null;
    WorkingDir?: string;
    User?: string;
  } | null;
}

export type ImageDeleteResponse = { Untagged?: string; Deleted?: string }[];

export interface ExecCreateConfig {
  Cmd: string[];
  Tty: boolean;
  AttachStdin: boolean;
  AttachStdout: boolean;
  AttachStderr: boolean;
  Env?: string[];
  WorkingDir?: string;
  User?: string;
  Privileged?: boolean;
}

export interface ExecCreateResponse {
  Id: string;
}

export interface ExecInspect {
  ID: string;
  ContainerID: string;
  Running: boolean;
  /** null while the process has not finished. */
  ExitCode: number | null;
  Pid: number;
}

/** One message of GET /events. */
export interface DockerEvent {
  Type: string;
  Action: string;
  Actor: { ID: string; Attributes: Record<string, string> };
  scope?: string;
  time: number;
  timeNano: number;
  /** Legacy fields (container events only). */
  status?: string;
  id?: string;
  from?: string;
}

/** GET /containers/{id}/stats?stream=false, the fields Sandgate reads (cgroup v1 and v2). */
export interface ContainerStats {
  read?: string;
  cpu_stats?: CpuStats;
  /** The sample before (empty when Docker had none). */
  precpu_stats?: CpuStats;
  memory_stats?: {
    usage?: number;
    limit?: number;
    /** cgroup v2: inactive_file; v1: total_inactive_file (page cache the kernel can drop). */
    stats?: Record<string, number>;
  };
  pids_stats?: { current?: number; limit?: number };
}

export interface CpuStats {
  cpu_usage?: { total_usage?: number; percpu_usage?: number[] | null };
  system_cpu_usage?: number;
  online_cpus?: number;
}
