// The Docker networks of a gateway's sandboxes: the egress bridge, and each sandbox's
// internal network on a /28 of its own (sandbox-subnets.ts). A create that finds the network
// there already (a retried launch, a restarted gateway, a concurrent call) uses it.
import { formatCidr, type Cidr } from "../../policy/cidr.js";
import { ProvisionError } from "../contract.js";
import type { EngineClient } from "./engine/client.js";
import { must, type EngineResult } from "./engine/result.js";
import type { NetworkCreateConfig } from "./engine/types.js";
import { internalNetworkConfig, type SandboxObjectsInput } from "./objects.js";
import { SANDBOX_SUBNET_PREFIX, SUBNET_TRIES, firstSubnetIndex, isSubnetOverlap, nthSubnet, subnetCount } from "./sandbox-subnets.js";

const ipv4 = (configs: readonly { Subnet?: string }[] | null | undefined): string | null => configs?.find((c) => c.Subnet !== undefined && !c.Subnet.includes(":"))?.Subnet ?? null;

export class SandboxNetworks {
  /** `call`: the options of each Docker call (a launch's long deadline). */
  constructor(
    private readonly engine: EngineClient,
    private readonly range: Cidr,
    private readonly call: { timeoutMs: number },
  ) {}

  /** Create, or use the one of that name: a network is created in one call. */
  async ensure(config: NetworkCreateConfig): Promise<string> {
    return (await this.networkOf(config, await this.engine.createNetwork(config, this.call))).id;
  }

  /**
   * The sandbox's internal network on a /28 of its own: from the one its id points at, the
   * next while Docker says a subnet overlaps another network's, at most SUBNET_TRIES. Its
   * subnet: the supervisor's proxy listens on its address in it, and nowhere else.
   */
  async ensureSandbox(i: SandboxObjectsInput): Promise<string> {
    const first = firstSubnetIndex(i.sandboxId, this.range);
    const tries = Math.min(SUBNET_TRIES, subnetCount(this.range));
    for (let k = 0; k < tries; k++) {
      const config = internalNetworkConfig(i, nthSubnet(this.range, first + k));
      const created = await this.engine.createNetwork(config, this.call);
      if (created.kind === "docker" && created.status !== 409 && isSubnetOverlap(created.message)) continue;
      // An existing network (a retried launch) keeps the subnet it was given.
      const { subnet } = await this.networkOf(config, created);
      if (subnet === null) throw new ProvisionError(`the sandbox network ${config.Name} has no IPv4 subnet for the proxy to listen in`);
      return subnet;
    }
    throw new ProvisionError(`no free /${SANDBOX_SUBNET_PREFIX} for the sandbox network in ${formatCidr(this.range)} (${tries} tried): give the gateway a larger or unused range (gateway start --sandbox-subnets)`);
  }

  /** The network a create call answered for, and its IPv4 subnet; 409: it exists, use it with the subnet it was given. */
  private async networkOf(config: NetworkCreateConfig, created: EngineResult<{ Id: string }>): Promise<{ id: string; subnet: string | null }> {
    if (created.kind === "docker" && created.status === 409) {
      const existing = must(`inspect network ${config.Name}`, await this.engine.inspectNetwork(config.Name, this.call));
      return { id: existing.Id, subnet: ipv4(existing.IPAM.Config) };
    }
    return { id: must(`create network ${config.Name}`, created).Id, subnet: ipv4(config.IPAM?.Config) };
  }
}
