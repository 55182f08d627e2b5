// The container ids: the --uid-base parser, and the checks against the host's
// account databases (users' uids and primary gids, groups, subordinate ranges) of
// the gateway's role ids and of a policy's process.user.
import { describe, expect, it } from "vitest";
import { DEFAULT_UID_BASE, UID_BASE_RANGE, hostIdConflicts, parseUidBase, processUserConflicts, processUserProblem, roleIds, type HostIdFiles } from "../../../src/driver/docker/host-ids.js";
import { mountPoints } from "../../../src/driver/docker/workspace-disk.js";

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

describe("processUserConflicts: a policy's process.user against the host", () => {
  const ids = roleIds(3_000_000);
  const host: HostIdFiles = {
    passwd: "root:x:0:0:root:/root:/bin/bash\nalice:x:1001:1001::/home/alice:/bin/sh\nbob:x:1002:1500::/home/bob:/bin/sh\n",
    group: "root:x:0:\nalice:x:1001:\nops:x:1600:bob\n",
    subuid: "carol:100000:65536\n",
    subgid: "dave:200000:1000\n",
  };
  const check = (user: string): string[] => processUserConflicts(user, ids, host);

  it("a free id passes, with or without a gid; so does the workload's own id", () => {
    expect(check("4242:4242")).toEqual([]);
    expect(check("4242")).toEqual([]);
    expect(check("3000000:3000000")).toEqual([]);
    expect(processUserConflicts("1001:1001", ids, none)).toEqual([]);
  });
  it("names a user holding the uid", () => {
    expect(check("1002:4242")).toEqual(["uid 1002 is the uid of host user bob (/etc/passwd)"]);
    expect(check("1002")).toEqual(["uid 1002 is the uid of host user bob (/etc/passwd)"]);
  });
  it("names a user whose primary gid is the gid", () => {
    expect(check("4242:1500")).toEqual(["gid 1500 is the primary gid of host user bob (/etc/passwd)"]);
  });
  it("names a group holding the gid (its members get the workload's group access)", () => {
    expect(check("4242:1600")).toEqual(["gid 1600 is the gid of host group ops (/etc/group)"]);
    expect(check("4242:0")).toEqual(["gid 0 is the primary gid of host user root (/etc/passwd)", "gid 0 is the gid of host group root (/etc/group)"]);
  });
  it("checks the uid as a uid and the gid as a gid only", () => {
    // bob's primary gid, ops's gid and dave's subordinate gids are no user's uid; carol's subordinate uids no group's gid.
    expect(check("1500:4242")).toEqual([]);
    expect(check("1600:4242")).toEqual([]);
    expect(check("200000:4242")).toEqual([]);
    expect(check("4242:100000")).toEqual([]);
  });
  it("names a subordinate uid range holding the uid, at both of its ends and not past them", () => {
    expect(check("100000:4242")).toEqual(["uid 100000 is in the subordinate range 100000-165535 of carol (/etc/subuid)"]);
    expect(check("165535:4242")).toEqual(["uid 165535 is in the subordinate range 100000-165535 of carol (/etc/subuid)"]);
    expect(check("99999:4242")).toEqual([]);
    expect(check("165536:4242")).toEqual([]);
  });
  it("names a subordinate gid range holding the gid, at both of its ends and not past them", () => {
    expect(check("4242:200000")).toEqual(["gid 200000 is in the subordinate range 200000-200999 of dave (/etc/subgid)"]);
    expect(check("4242:200999")).toEqual(["gid 200999 is in the subordinate range 200000-200999 of dave (/etc/subgid)"]);
    expect(check("4242:199999")).toEqual([]);
    expect(check("4242:201000")).toEqual([]);
  });
  it("refuses the supervisor's id as the uid or the gid, even where no host account holds it", () => {
    expect(check("3000001:4242")).toEqual(["uid 3000001 is the supervisor's id (--uid-base + 1)"]);
    expect(check("3000001")).toEqual(["uid 3000001 is the supervisor's id (--uid-base + 1)"]);
    expect(check("4242:3000001")).toEqual(["gid 3000001 is the supervisor's id (--uid-base + 1)"]);
  });
  it("lists every conflict, the uid's first", () => {
    expect(check("1001:1001")).toEqual([
      "uid 1001 is the uid of host user alice (/etc/passwd)",
      "gid 1001 is the primary gid of host user alice (/etc/passwd)",
      "gid 1001 is the gid of host group alice (/etc/group)",
    ]);
    expect(check("3000001:3000001")).toEqual(["uid 3000001 is the supervisor's id (--uid-base + 1)", "gid 3000001 is the supervisor's id (--uid-base + 1)"]);
  });
});

describe("processUserProblem", () => {
  const ids = roleIds(3_000_000);
  it("is null for a free id", () => {
    expect(processUserProblem("4242:4242", ids, none)).toBeNull();
  });
  it("is one line naming every conflict and what is allowed", () => {
    const line = processUserProblem("1001:1001", ids, { ...none, passwd: "alice:x:1001:1001::/:/bin/sh\n" });
    expect(line).toBe(
      "process.user: uid 1001 is the uid of host user alice (/etc/passwd); gid 1001 is the primary gid of host user alice (/etc/passwd); " +
        "a workload must run as ids that no host account, group or subordinate range holds, nor the supervisor (without process.user it runs as the gateway's workload id)",
    );
    expect(line).not.toContain("\n");
  });
});

describe("mountPoints", () => {
  it("reads the mount point field and decodes octal escapes", () => {
    const info = "26 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n90 26 7:0 / /tmp/ws/sbx_1 rw,nosuid - ext4 /dev/loop0 rw\n91 26 7:1 / /tmp/a\\040b rw - ext4 /dev/loop1 rw\n";
    expect([...mountPoints(info)]).toEqual(["/", "/tmp/ws/sbx_1", "/tmp/a b"]);
  });
});
