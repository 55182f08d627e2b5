// Two sockets relayed to each other both ways, as a tunnel or an upgraded WebSocket is once
// it is allowed: an error on either side closes both; an orderly end passes through.
import { pipeline, type Duplex } from "node:stream";

export function splice(client: Duplex, upstream: Duplex): void {
  const done = (err: NodeJS.ErrnoException | null): void => {
    if (err !== null) {
      client.destroy();
      upstream.destroy();
    }
  };
  pipeline(client, upstream, done);
  pipeline(upstream, client, done);
}
