// The child of bench/tls-cpu.ts: the supervisor's egress proxy with TLS termination,
// alone in its process so its CPU can be read from /proc. Config: argv[2], a JSON file.
import { readFileSync } from "node:fs";
import { policyFromObject } from "../../src/policy/index.js";
import { PolicyHolder } from "../../src/supervisor/policy-holder.js";
import { createEgressProxy } from "../../src/supervisor/proxy/index.js";
import { silentLogger } from "../../src/supervisor/logger.js";
import { LeafCertificates } from "../../src/supervisor/tls/leaf-certs.js";

const cfg = JSON.parse(readFileSync(process.argv[2]!, "utf8")) as { originPort: number; sandboxCa: { certPem: string; keyPem: string }; originCaPem: string };
const parsed = policyFromObject({
  version: 1,
  network: { rules: [{ name: "origin", endpoints: [{ host: "origin.test", port: cfg.originPort, protocol: "https", allowPrivate: ["127.0.0.0/8"], rules: [{ methods: ["GET"] }] }] }] },
});
if (!parsed.ok) throw new Error(parsed.errors.join("; "));
const proxy = createEgressProxy({
  policy: new PolicyHolder({ policy: parsed.policy, revision: 1 }),
  logger: silentLogger,
  onAudit: () => undefined,
  resolve: () => Promise.resolve(["127.0.0.1"]),
  tls: new LeafCertificates(cfg.sandboxCa),
  upstreamCa: cfg.originCaPem,
});
const address = await proxy.listen(0, "127.0.0.1");
process.once("SIGTERM", () => process.exit(0));
process.stdout.write(`${address.port}\n`);
