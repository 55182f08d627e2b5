// DOCKER_HOST handling. Only Unix sockets are supported: the gateway talks to a local
// daemon, and a TCP daemon would need TLS settings we do not carry.

export const DEFAULT_SOCKET_PATH = "/var/run/docker.sock";

/**
 * Socket path for a DOCKER_HOST value: unset/empty → /var/run/docker.sock,
 * "unix:///path" → "/path". Throws on anything else (a configuration error, found at startup).
 */
export function socketPathFromDockerHost(value: string | undefined): string {
  const v = value?.trim() ?? "";
  if (v === "") return DEFAULT_SOCKET_PATH;
  if (!v.startsWith("unix://")) {
    throw new Error(`DOCKER_HOST=${v}: only unix:// sockets are supported (e.g. unix:///var/run/docker.sock)`);
  }
  const path = v.slice("unix://".length);
  if (!path.startsWith("/")) {
    throw new Error(`DOCKER_HOST=${v}: the socket path must be absolute (unix:///path)`);
  }
  return path;
}
