// Every address of the gateway's host, for the supervisors' proxies to refuse (a public
// name resolving to one of them would reach host services). Read from all interfaces at
// start and again whenever the kernel reports an address change (or every few seconds where
// no change feed runs); listeners hear only of changes.
import { spawn } from "node:child_process";
import type { Socket } from "node:net";
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
/** With a change feed running, a re-read this often anyway (a change the feed missed). */
export const DEFAULT_HOST_ADDRESS_BACKSTOP_MS = 60_000;
/** A burst of feed lines (an interface coming up adds several addresses) is one re-read. */
const FEED_COALESCE_MS = 50;

/**
 * Tells `changed` of every address change on the host; returns a stop function, or null when
 * no feed can run here. `failed` reports a feed that ended on its own (the watcher polls then).
 */
export type AddressFeed = (changed: () => void, failed: (why: string) => void) => (() => void) | null;

/**
 * `ip -o monitor address`: the kernel's address notifications (netlink), one line each. Reading
 * every interface costs ~16 ms at 600 veths (`getifaddrs` dumps them all), so a poll every 3 s
 * was a fifth of an idle gateway's CPU at 200 sandboxes; the feed costs nothing while nothing
 * changes, and sees a change at once rather than within 3 s.
 */
export const ipMonitorFeed: AddressFeed = (changed, failed) => {
  let stopped = false;
  const child = spawn("ip", ["-o", "monitor", "address"], { stdio: ["ignore", "pipe", "ignore"] });
  child.stdout.on("data", () => changed());
  const end = (why: string): void => {
    if (stopped) return;
    stopped = true;
    failed(why);
  };
  child.once("error", (err) => end(`ip monitor: ${err.message}`));
  child.once("exit", (code, signal) => end(`ip monitor exited (${signal ?? `code ${String(code)}`})`));
  // Never what keeps the gateway's process alive. (A gateway killed outright leaves it behind
  // until the next address change, when its write to the closed pipe ends it.)
  child.unref();
  (child.stdout as unknown as Socket).unref(); // a pipe is a net.Socket
  return () => {
    stopped = true;
    child.kill();
  };
};

export interface HostAddressWatcherOptions {
  read?: () => string[];
  /** Re-read period when no change feed runs. Default 3 s. */
  intervalMs?: number;
  /** Re-read period while the feed runs. Default 60 s. */
  backstopMs?: number;
  /** Default `ip -o monitor address`; null: poll only. */
  feed?: AddressFeed | null;
  onChange: (addresses: string[], previous: string[]) => void;
  /** The feed ended (or could not start): the watcher polls every intervalMs from now on. */
  onFeedLost?: (why: string) => void;
}

export class HostAddressWatcher {
  readonly #read: () => string[];
  readonly #onChange: HostAddressWatcherOptions["onChange"];
  readonly #intervalMs: number;
  #current: string[];
  #timer: NodeJS.Timeout | undefined;
  #pending: NodeJS.Timeout | undefined;
  #stopFeed: (() => void) | null = null;
  #closed = false;

  constructor(opts: HostAddressWatcherOptions) {
    this.#read = opts.read ?? (() => collectHostAddresses());
    this.#onChange = opts.onChange;
    this.#intervalMs = opts.intervalMs ?? DEFAULT_HOST_ADDRESS_INTERVAL_MS;
    const feed = opts.feed === undefined ? ipMonitorFeed : opts.feed;
    // The feed starts before the first read, so a change after that read is never missed.
    if (feed !== null) {
      this.#stopFeed = feed(
        () => this.#soon(),
        (why) => {
          this.#stopFeed = null;
          if (this.#closed) return;
          opts.onFeedLost?.(why);
          this.#every(this.#intervalMs);
          this.poll(); // whatever changed while the feed was going away
        },
      );
      if (this.#stopFeed === null) opts.onFeedLost?.("no address feed on this host");
    }
    this.#current = this.#read();
    if (!this.#timer) this.#every(this.#stopFeed === null ? this.#intervalMs : (opts.backstopMs ?? DEFAULT_HOST_ADDRESS_BACKSTOP_MS));
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
    this.#closed = true;
    this.#stopFeed?.();
    this.#stopFeed = null;
    clearInterval(this.#timer);
    clearTimeout(this.#pending);
    this.#timer = undefined;
  }

  #every(ms: number): void {
    clearInterval(this.#timer);
    this.#timer = setInterval(() => this.poll(), ms);
    this.#timer.unref();
  }

  #soon(): void {
    if (this.#pending !== undefined || this.#closed) return;
    this.#pending = setTimeout(() => {
      this.#pending = undefined;
      this.poll();
    }, FEED_COALESCE_MS);
    this.#pending.unref();
  }
}
