// The host's account databases, read for host-ids.ts's checks (which stay pure).
import { readFileSync } from "node:fs";
import type { HostIdFiles } from "./host-ids.js";

function readOrEmpty(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return "";
  }
}

/** The host's account databases as they are now (read at gateway start and for each policy naming a process.user). */
export function readHostIdFiles(): HostIdFiles {
  return { passwd: readOrEmpty("/etc/passwd"), group: readOrEmpty("/etc/group"), subuid: readOrEmpty("/etc/subuid"), subgid: readOrEmpty("/etc/subgid") };
}
