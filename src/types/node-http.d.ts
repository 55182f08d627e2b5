// @types/node 24 leaves noDelay out of http.AgentOptions (and so https's), yet node's Agent
// hands its options to net.connect, which takes it ("options in socket.connect() are also
// supported"): the supervisor's agents set it so that a small write never waits for Nagle.
import "http";

declare module "http" {
  interface AgentOptions {
    noDelay?: boolean | undefined;
  }
}
