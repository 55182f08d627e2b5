// Every address of the gateway's host, for the supervisors' proxies to refuse (a public
// name resolving to one of them would reach host services). Read from all interfaces at
// start and re-read every few seconds; listeners hear only of changes.
import { networkInterfaces, type NetworkInterfaceInfo } from "node:os";
import { cidr, cidrContains } from "../../policy/cidr.js";
import { formatIp, parseIp, unmapIPv4 } from "../../policy/index.js";

// IPv6 link-local addresses are per interface (every veth of every container has one) and
// always refused by the fe80::/10 range anyway: leaving them out keeps the set from
// changing with every sandbox started.
const LINK_LOCAL_V6 = cidr("fe80::/10");
// The same range as text (fe80:: to febf::), tested before parsing: with hundreds of veths
// almost every address is link-local, and parsing each one made up most of a read.
const LINK_LOCAL_V6_TEXT = /^fe[89ab][0-9a-f]:/i;

/** Canonical, sorted, unique addresses of every interface (IPv6 link-local left out). */
export function collectHostAddresses(ifaces: NodeJS.Dict<NetworkInterfaceInfo[]> = networkInterfaces()): string[] {
  const out = new Set<string>();
  for (const list of Object.values(ifaces)) {
    for (const info of list ?? []) {
      if (LINK_LOCAL_V6_TEXT.test(info.address)) continue;
      const ip = parseIp(info.address);
      if (ip === null || cidrContains(LINK_LOCAL_V6, ip)) continue;
      out.add(formatIp(unmapIPv4(ip)));
    }
  }
  return [...out].sort();
}

export const DEFAULT_HOST_ADDRESS_INTERVAL_MS = 3000;

export interface HostAddressWatcherOptions {
  read?: () => string[];
  intervalMs?: number;
  onChange: (addresses: string[], previous: string[]) => void;
}

export class HostAddressWatcher {
  readonly #read: () => string[];
  readonly #onChange: HostAddressWatcherOptions["onChange"];
  #current: string[];
  #timer: NodeJS.Timeout | undefined;

  constructor(opts: HostAddressWatcherOptions) {
    this.#read = opts.read ?? (() => collectHostAddresses());
    this.#onChange = opts.onChange;
    this.#current = this.#read();
    this.#timer = setInterval(() => this.poll(), opts.intervalMs ?? DEFAULT_HOST_ADDRESS_INTERVAL_MS);
    this.#timer.unref();
  }

  current(): string[] {
    return this.#current;
  }

  /** Re-read now; tells the listener when the set differs from the last one. */
  poll(): void {
    let next: string[];
    try {
      next = [...new Set(this.#read())].sort();
    } catch {
      return; // keep the last known set
    }
    if (next.length === this.#current.length && next.every((a, i) => a === this.#current[i])) return;
    const previous = this.#current;
    this.#current = next;
    this.#onChange(next, previous);
  }

  close(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }
}
