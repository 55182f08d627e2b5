// The container ids: the --uid-base parser, and the check against the host's
// account databases (users' uids and primary gids, groups, subordinate ranges).
import { describe, expect, it } from "vitest";
import { DEFAULT_UID_BASE, UID_BASE_RANGE, hostIdConflicts, parseUidBase, roleIds, type HostIdFiles } from "../../src/driver/docker/host-ids.js";
import { mountPoints } from "../../src/driver/docker/workspace-disk.js";

const none: HostIdFiles = { passwd: "", group: "", subuid: "", subgid: "" };
const RANGE = "expected an integer from 65536 to 2147483646";

describe("parseUidBase", () => {
  it.each(["65536", "100000", "2000000000", "2147483646"])("%s is accepted", (t) => {
    expect(parseUidBase(t)).toEqual({ ok: true, base: Number(t) });
  });
  it.each(["0", "1000", "65535", "2147483647", "4294967295", "9999999999"])("%s is out of range", (t) => {
    expect(parseUidBase(t)).toEqual({ ok: false, error: `invalid uid base ${t}: ${RANGE}` });
  });
  it.each(["", " ", "abc", "12ab", "-5", "+70000", "70000.0", "7e4", "0x10000", " 70000", "70000 ", "99999999999"])("%j is not an integer", (t) => {
    expect(parseUidBase(t)).toEqual({ ok: false, error: `invalid uid base ${JSON.stringify(t)}: ${RANGE}` });
  });
  it("the default is in range, and both role ids fit", () => {
    expect(parseUidBase(String(DEFAULT_UID_BASE))).toEqual({ ok: true, base: DEFAULT_UID_BASE });
    expect(roleIds(UID_BASE_RANGE.max).supervisor).toBe(2147483647);
  });
});

describe("roleIds", () => {
  it("gives each role its own id", () => {
    expect(roleIds(2_000_000_000)).toEqual({ workload: 2_000_000_000, supervisor: 2_000_000_001 });
  });
});

describe("hostIdConflicts", () => {
  const ids = roleIds(3_000_000);
  it("is empty when nothing on the host holds the ids", () => {
    expect(hostIdConflicts(ids, none)).toEqual([]);
    expect(
      hostIdConflicts(ids, {
        passwd: "root:x:0:0:root:/root:/bin/bash\nalice:x:1000:1000::/home/alice:/bin/sh\n# 3000000\n",
        group: "root:x:0:\nalice:x:1000:\n",
        subuid: "alice:100000:65536\n",
        subgid: "alice:100000:65536\n",
      }),
    ).toEqual([]);
  });
  it("names a user holding the workload's uid", () => {
    expect(hostIdConflicts(ids, { ...none, passwd: "eve:x:3000000:100::/:/bin/sh\n" })).toEqual(["workload id 3000000 is the uid of host user eve (/etc/passwd)"]);
  });
  it("names a user whose primary gid is the supervisor's", () => {
    expect(hostIdConflicts(ids, { ...none, passwd: "eve:x:5000:3000001::/:/bin/sh\n" })).toEqual(["supervisor id 3000001 is the primary gid of host user eve (/etc/passwd)"]);
  });
  it("names a group holding an id", () => {
    expect(hostIdConflicts(ids, { ...none, group: "wheel:x:10:\nops:x:3000001:eve\n" })).toEqual(["supervisor id 3000001 is the gid of host group ops (/etc/group)"]);
  });
  it("names a subordinate range holding an id, at both of its ends", () => {
    expect(hostIdConflicts(ids, { ...none, subuid: "bob:2999999:2\n" })).toEqual(["workload id 3000000 is in the subordinate range 2999999-3000000 of bob (/etc/subuid)"]);
    expect(hostIdConflicts(ids, { ...none, subgid: "bob:3000001:65536\n" })).toEqual(["supervisor id 3000001 is in the subordinate range 3000001-3065536 of bob (/etc/subgid)"]);
    expect(hostIdConflicts(ids, { ...none, subuid: "bob:2999999:1\nbob:3000002:10\n" })).toEqual([]);
  });
  it("lists every conflict", () => {
    expect(
      hostIdConflicts(ids, {
        passwd: "a:x:3000000:3000001::/:/bin/sh\n",
        group: "g:x:3000000:\n",
        subuid: "",
        subgid: "",
      }),
    ).toEqual([
      "workload id 3000000 is the uid of host user a (/etc/passwd)",
      "supervisor id 3000001 is the primary gid of host user a (/etc/passwd)",
      "workload id 3000000 is the gid of host group g (/etc/group)",
    ]);
  });
  it("ignores comments, blank and malformed lines", () => {
    expect(hostIdConflicts(ids, { passwd: "#a:x:3000000:1\n\nbroken\n", group: "x\n", subuid: "b:abc:3\nc:3000000\n", subgid: "" })).toEqual([]);
  });
});

describe("mountPoints", () => {
  it("reads the mount point field and decodes octal escapes", () => {
    const info = "26 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n90 26 7:0 / /tmp/ws/sbx_1 rw,nosuid - ext4 /dev/loop0 rw\n91 26 7:1 / /tmp/a\\040b rw - ext4 /dev/loop1 rw\n";
    expect([...mountPoints(info)]).toEqual(["/", "/tmp/ws/sbx_1", "/tmp/a b"]);
  });
});
