// A WebSocket client by hand, for tests that must control each byte (absolute-form upgrades,
// frames sent before the 101): the upgrade request, one masked text frame, and a reader that
// returns the response head and the first text frames after it.
import type { Duplex } from "node:stream";

export function upgradeRequest(target: string, host: string, extra = ""): string {
  return `GET ${target} HTTP/1.1\r\nHost: ${host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n${extra}\r\n`;
}

/** One masked (client-to-server) text frame; payload under 126 bytes. */
export function maskedFrame(text: string): Buffer {
  const payload = Buffer.from(text);
  const mask = Buffer.from([1, 2, 3, 4]);
  return Buffer.concat([Buffer.from([0x81, 0x80 | payload.length]), mask, Buffer.from(payload.map((b, i) => b ^ mask[i % 4]!))]);
}

/** The response head, then (after a 101) the first `count` unmasked text frames, or "closed". */
export function readUpgrade(s: Duplex, count = 1): Promise<{ head: string; frame: string; frames: string[]; body: string }> {
  return new Promise((resolve) => {
    let buf = Buffer.alloc(0);
    let head: string | undefined;
    const frames: string[] = [];
    const done = (frame: string, body = ""): void => {
      s.off("data", onData);
      s.off("close", onClose);
      resolve({ head: head ?? "", frame, frames, body });
    };
    const onData = (d: Buffer): void => {
      buf = Buffer.concat([buf, d]);
      if (head === undefined) {
        const end = buf.indexOf("\r\n\r\n");
        if (end < 0) return;
        head = buf.subarray(0, end).toString("latin1");
        buf = buf.subarray(end + 4);
      }
      if (!head.startsWith("HTTP/1.1 101")) return; // the body follows until close
      while (buf.length >= 2 && buf.length >= 2 + (buf[1]! & 0x7f)) {
        frames.push(buf.subarray(2, 2 + (buf[1]! & 0x7f)).toString());
        buf = buf.subarray(2 + (buf[1]! & 0x7f));
      }
      if (frames.length >= count) done(frames[0]!);
    };
    const onClose = (): void => done("closed", buf.toString());
    s.on("data", onData);
    s.once("close", onClose);
    s.resume();
  });
}
