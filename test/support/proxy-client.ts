// Raw clients of the egress proxy for tests that must see exactly what happens to one
// connection: CONNECT on a fresh socket, HTTP/1.1 requests on one kept-alive socket, and
// probes that tell an answered write from a closed connection; a second listener beside it.
import net from "node:net";
import type tls from "node:tls";
import { listenOn } from "./net.js";

/** A client socket to the proxy, destroyed at cleanup. */
export function rawClient(port: number, cleanups: (() => unknown)[]): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, "127.0.0.1", () => resolve(s));
    s.on("error", reject);
    cleanups.push(() => s.destroy());
  });
}

/** CONNECT on a fresh socket; resolves with the status and the socket (paused after the head). */
export async function connect(proxyPort: number, authority: string, cleanups: (() => unknown)[]): Promise<{ status: number; socket: net.Socket }> {
  const socket = await rawClient(proxyPort, cleanups);
  socket.removeAllListeners("error");
  socket.on("error", () => undefined);
  return new Promise((resolve) => {
    let buf = Buffer.alloc(0);
    const onData = (c: Buffer): void => {
      buf = Buffer.concat([buf, c]);
      const end = buf.indexOf("\r\n\r\n");
      if (end < 0) return;
      socket.off("data", onData);
      socket.pause();
      resolve({ status: Number(buf.subarray(0, end).toString("latin1").split(" ")[1]), socket });
    };
    socket.on("data", onData);
    socket.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n\r\n`);
  });
}

/** What a stream does next: yields data, or closes. */
export function nextEvent(s: net.Socket | tls.TLSSocket): Promise<"closed" | `data:${string}`> {
  if (s.destroyed) return Promise.resolve("closed");
  return new Promise((resolve) => {
    const onData = (d: Buffer): void => {
      s.off("close", onClose);
      resolve(`data:${d.toString()}`);
    };
    const onClose = (): void => {
      s.off("data", onData);
      resolve("closed");
    };
    s.once("data", onData);
    s.once("close", onClose);
    s.resume();
  });
}

/** Writes `text` (if the stream still takes writes) and reports whether it was answered or closed. */
export function probe(s: net.Socket | tls.TLSSocket, text: string): Promise<"closed" | `data:${string}`> {
  const next = nextEvent(s);
  if (!s.destroyed && s.writable) s.write(text);
  return next;
}

/** One HTTP/1.1 request on a raw kept-alive socket; the response text, or "closed". */
export function rawRequest(s: net.Socket, url: string): Promise<string> {
  return new Promise((resolve) => {
    let buf = "";
    const onData = (d: Buffer): void => {
      buf += d.toString("latin1");
      const head = buf.indexOf("\r\n\r\n");
      if (head < 0) return;
      const len = /content-length: (\d+)/i.exec(buf.slice(0, head));
      if (len === null || buf.length < head + 4 + Number(len[1])) return;
      done(buf.slice(0, head + 4 + Number(len[1])));
    };
    const onClose = (): void => done("closed");
    const done = (r: string): void => {
      s.off("data", onData);
      s.off("close", onClose);
      resolve(r);
    };
    if (s.destroyed) return resolve("closed");
    s.on("data", onData);
    s.once("close", onClose);
    const host = new URL(url).host;
    if (s.writable) s.write(`GET ${url} HTTP/1.1\r\nHost: ${host}\r\n\r\n`);
  });
}

export const status = (response: string): string => response.split(" ")[1] ?? response;

/**
 * A listener of the test's own beside the proxy (as the transparent path will be): each accepted
 * socket goes to `accept`; if that throws, the socket is closed (a client waiting on it must not hang).
 */
export async function secondListener(accept: (socket: net.Socket) => void, cleanups: (() => unknown)[]): Promise<number> {
  const accepted: net.Socket[] = [];
  const server = net.createServer((s) => {
    accepted.push(s);
    s.on("error", () => undefined);
    guarded(s, () => accept(s));
  });
  const port = await listenOn(server, cleanups);
  cleanups.push(() => accepted.forEach((s) => s.destroy()));
  return port;
}

/** Runs `fn` for `socket`; if it throws, the socket is closed too. */
export function guarded(socket: net.Socket, fn: () => void): void {
  try {
    fn();
  } catch (err) {
    socket.destroy();
    throw err;
  }
}

/** A record without what differs between two otherwise equal decisions: when, and how long. */
export const sameDecision = <T extends { time: string; durationMs?: number }>({ time: _t, durationMs: _d, ...rest }: T): Omit<T, "time" | "durationMs"> => rest;
