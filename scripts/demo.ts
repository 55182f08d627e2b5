// The README's main job: a real demo on a private Docker daemon (live-restore on)
// and the default embedded state (SQLite). Every step is a real `sandgate` CLI
// call, printed before it runs. Cleans up everything at the end.

import { spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { EngineClient } from "../src/driver/docker/engine/client.js";
import { LeafCertificates } from "../src/supervisor/tls/leaf-certs.js";
import { issueSandboxCa } from "../src/util/x509.js";
import { PrivateDockerd } from "../test/support/dockerd.js";

const ROOT = join(import.meta.dirname, "..");
const BIN = join(ROOT, "bin", "sandgate.js");
const home = mkdtempSync(join(tmpdir(), "sandgate-demo-"));
let dockerd: PrivateDockerd | undefined;
/** The demo's own CA for its HTTPS origin; the gateway trusts it for origins (SANDGATE_ORIGIN_CA). */
const originCaFile = join(home, "origin-ca.pem");

const bold = (s: string): string => (process.stdout.isTTY ? `\x1b[1m${s}\x1b[0m` : s);
function step(title: string): void {
  process.stdout.write(`\n${bold(`== ${title}`)}\n`);
}

function sandgate(args: string[], opts: { input?: string; allowFail?: boolean; quiet?: boolean } = {}): string {
  if (!opts.quiet) process.stdout.write(`$ sandgate ${args.map((a) => (/[\s"'$*]/.test(a) ? `'${a}'` : a)).join(" ")}\n`);
  const r = spawnSync(process.execPath, [BIN, ...args], {
    env: { ...process.env, SANDGATE_HOME: home, DOCKER_HOST: dockerd!.dockerHost, SANDGATE_ORIGIN_CA: originCaFile },
    input: opts.input ?? "",
    encoding: "utf8",
  });
  if (!opts.quiet) {
    process.stdout.write(r.stdout);
    process.stderr.write(r.stderr);
  }
  if (r.status !== 0 && !opts.allowFail) throw new Error(`sandgate ${args.join(" ")} exited ${r.status}`);
  return r.stdout;
}

/** A long-running `sandgate` (port-forward): resolves with the process and its first line of output. */
function sandgateBackground(args: string[]): Promise<{ line: string; stop(): Promise<number | null> }> {
  process.stdout.write(`$ sandgate ${args.join(" ")} &\n`);
  const p = spawn(process.execPath, [BIN, ...args], {
    env: { ...process.env, SANDGATE_HOME: home, DOCKER_HOST: dockerd!.dockerHost },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const exited = new Promise<number | null>((resolve) => p.on("close", (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    let out = "";
    p.stdout.on("data", (b: Buffer) => {
      out += b.toString("utf8");
      const nl = out.indexOf("\n");
      if (nl < 0) return;
      p.stdout.removeAllListeners("data");
      p.stdout.resume();
      resolve({ line: out.slice(0, nl), stop: () => (p.kill("SIGINT"), exited) });
    });
    void exited.then((code) => reject(new Error(`sandgate ${args.join(" ")} exited ${code} before printing anything`)));
  });
}

/** A node one-liner run in the workload: an HTTP request through the supervisor's proxy ($HTTP_PROXY). */
const VIA_PROXY = (url: string, method = "GET"): string =>
  `const u=new URL(process.env.HTTP_PROXY),t=new URL("${url}");require("http").request({method:"${method}",agent:false,host:u.hostname,port:u.port,path:t.href,headers:{host:t.host}},r=>{let b="";r.on("data",d=>b+=d);r.on("end",()=>console.log("${method}",r.statusCode,r.headers["x-proxy-error"]??"",b))}).end()`;

/** A plain GET with no proxy at all (no agent, no proxy variable): what a proxy-unaware client does. */
const DIRECT_GET = (url: string): string =>
  `require("http").get("${url}",{agent:false},r=>{let b="";r.on("data",d=>b+=d);r.on("end",()=>console.log("no proxy: GET ${url} ->",r.statusCode,r.headers["x-proxy-error"]??"",b.trim().slice(0,80)))}).on("error",e=>console.log("no proxy: GET ${url} ->",e.code))`;

/**
 * An HTTPS client for the workload (saved in its workspace): CONNECT through $HTTPS_PROXY, then
 * TLS with node's default trust — no CA option: the sandbox's CA comes in via NODE_EXTRA_CA_CERTS.
 * Usage: node https.js METHOD URL ["Header: value"]
 */
const HTTPS_CLIENT = `const net = require("net"), tls = require("tls"), https = require("https");
const [method, url, header] = process.argv.slice(2);
const u = new URL(url), p = new URL(process.env.HTTPS_PROXY), port = u.port || "443";
const headers = { host: u.host };
if (header) headers[header.slice(0, header.indexOf(":"))] = header.slice(header.indexOf(":") + 1).trim();
const s = net.connect(Number(p.port), p.hostname, () => s.write("CONNECT " + u.hostname + ":" + port + " HTTP/1.1\\r\\nHost: " + u.hostname + ":" + port + "\\r\\n\\r\\n"));
let b = "";
const onData = (d) => {
  b += d.toString("latin1");
  if (b.indexOf("\\r\\n\\r\\n") < 0) return;
  s.off("data", onData);
  if (b.split(" ")[1] !== "200") return console.log("CONNECT refused:", b.split("\\r\\n")[0]);
  const t = tls.connect({ socket: s, servername: u.hostname });
  t.on("error", (e) => console.log("TLS error", e.code));
  https.request({ createConnection: () => t, method, path: u.pathname + u.search, headers }, (r) => {
    let o = "";
    r.on("data", (d) => (o += d));
    r.on("end", () => { console.log(method, url, "->", r.statusCode, r.headers["x-proxy-error"] ?? "", o.trim()); process.exit(0); });
  }).end();
};
s.on("data", onData);
`;

async function main(): Promise<void> {
  const originCa = await issueSandboxCa("sandgate demo origins");
  writeFileSync(originCaFile, originCa.certPem);
  step("Start a private Docker daemon with live-restore (its own data-root, socket and networks)");
  dockerd = await PrivateDockerd.start({ liveRestore: true, name: "demo" });
  process.stdout.write(`dockerd pid ${dockerd.pid}, DOCKER_HOST=${dockerd.dockerHost}\n`);

  step("Start the gateway (state in SQLite under its home; builds the images locally on first start)");
  sandgate(["gateway", "start", "--detach"]);
  sandgate(["gateway", "status"]);

  step("An HTTP origin outside the sandbox, and a policy that allows only it");
  const engine = new EngineClient({ socketPath: dockerd.socketPath });
  const gatewayId = (await import("node:fs")).readFileSync(join(home, "gateway-id"), "utf8").trim();
  const images = await engine.request<{ RepoTags: string[] }[]>("GET", "/images/json");
  const workloadImage = images.kind === "ok" ? images.body.flatMap((i) => i.RepoTags).find((t) => t.startsWith("sandgate-workload:")) : undefined;
  if (!workloadImage) throw new Error("workload image not found");
  const origin = await engine.createContainer("demo-origin", {
    Image: workloadImage,
    Cmd: ["node", "-e", 'require("http").createServer((q,s)=>s.end("hello from the origin\\n")).listen(8080)'],
    HostConfig: { NetworkMode: `sandgate-egress-${gatewayId}` },
  });
  if (origin.kind !== "ok") throw new Error("origin create failed");
  await engine.startContainer(origin.body.Id);
  const inspected = await engine.inspectContainer(origin.body.Id);
  const originIp = inspected.kind === "ok" ? Object.values(inspected.body.NetworkSettings.Networks ?? {})[0]?.IPAddress : undefined;
  const tlsPem = await new LeafCertificates(originCa).issuePem("demo-api");
  // The API's token: the gateway stores it, the supervisor sends it, the workload never holds it.
  const apiToken = `demo-${randomBytes(12).toString("hex")}`;
  const api = await engine.createContainer("demo-api", {
    Image: workloadImage,
    // Says whether the request carried the real token, never the token itself.
    Cmd: ["node", "-e", 'require("https").createServer({cert:process.env.CERT,key:process.env.KEY},(q,s)=>s.end("api: "+q.method+" "+q.url+(q.headers.authorization===undefined?"":q.headers.authorization==="Bearer "+process.env.TOKEN?" (authorized: the real token arrived)":" (not authorized)")+"\\n")).listen(8443)'],
    Env: [`CERT=${tlsPem.certPem}`, `KEY=${tlsPem.keyPem}`, `TOKEN=${apiToken}`],
    HostConfig: { NetworkMode: `sandgate-egress-${gatewayId}` },
  });
  if (api.kind !== "ok") throw new Error("HTTPS origin create failed");
  await engine.startContainer(api.body.Id);
  const policy = join(home, "policy.yaml");
  writeFileSync(
    policy,
    `version: 1
network:
  rules:
    - name: demo-origin
      endpoints:
        - host: demo-origin
          port: 8080
          protocol: http
          rules:
            - methods: [GET]
              paths: ["/**"]
          allowPrivate: ["10.0.0.0/8"]
    - name: demo-api-read
      endpoints:
        - host: demo-api
          port: 8443
          protocol: https
          rules:
            - methods: [GET]
              paths: ["/repos/**"]
          credentials:
            - secret: api-token
              paths: ["/repos/*/issues"]
          allowPrivate: ["10.0.0.0/8"]
`,
  );
  process.stdout.write(`policy: allow GET http://demo-origin:8080/** and GET https://demo-api:8443/repos/** (everything else is denied);\n        the secret api-token may go to https://demo-api:8443/repos/*/issues only\n`);

  step("A secret for the API: kept by the gateway (encrypted), never given to the workload");
  sandgate(["secret", "set", "api-token"], { input: apiToken });
  sandgate(["secret", "list"]);

  step("Create a sandbox: workload + companion supervisor, Ready only on evidence (incl. an authenticated control session)");
  // The workload's main process: says hello on stdout, then waits (the agent would work here).
  sandgate(["sandbox", "create", "demo", "--policy", policy, "-e", "API_TOKEN=sandgate:secret:api-token", "--", "sh", "-c", "echo 'agent: started'; echo 'agent: nothing to do yet' >&2; while :; do sleep 3600; done"]);
  sandgate(["sandbox", "list"]);
  sandgate(["sandbox", "get", "demo"]);

  step("Run commands in it (exit codes, stdin and the workspace are real)");
  sandgate(["sandbox", "exec", "demo", "--", "sh", "-c", "id; echo 'written before the daemon restart' > /sandbox/note.txt"]);
  sandgate(["sandbox", "exec", "demo", "--", "cat"], { input: "piped through stdin\n" });

  step("The workload's output (stdout and stderr kept apart), files in and out, and a server inside reached from the host");
  sandgate(["sandbox", "logs", "demo", "--timestamps"]);
  const local = join(home, "hello.txt");
  writeFileSync(local, "a file from the host\n");
  sandgate(["sandbox", "cp", local, "demo:/sandbox/"]);
  sandgate(["sandbox", "exec", "demo", "--", "sh", "-c", "ls -l /sandbox/hello.txt; cat /sandbox/hello.txt"]);
  sandgate(["sandbox", "cp", "demo:/sandbox/note.txt", join(home, "note-copy.txt")]);
  process.stdout.write(`(copied out: ${JSON.stringify(readFileSync(join(home, "note-copy.txt"), "utf8"))})\n`);
  sandgate(["sandbox", "exec", "demo", "--detach", "--", "node", "-e", `require("http").createServer((q,r)=>r.end("hello from a server inside the sandbox\\n")).listen(8080,"127.0.0.1")`]);
  const forward = await sandgateBackground(["sandbox", "port-forward", "demo", "0:8080"]);
  process.stdout.write(`${forward.line}\n`);
  const localPort = /:(\d+) ->/.exec(forward.line)?.[1];
  if (localPort === undefined) throw new Error(`port-forward printed ${JSON.stringify(forward.line)}`);
  // The server needs a moment to listen: retry while the forward answers 503 (closed port).
  let body = "";
  for (let i = 0; i < 50 && body === ""; i++) {
    body = await fetch(`http://127.0.0.1:${localPort}/`).then((r) => (r.ok ? r.text() : ""), () => "");
    if (body === "") await new Promise((r) => setTimeout(r, 200));
  }
  process.stdout.write(`(from the host) GET http://127.0.0.1:${localPort}/ -> ${body}`);
  if (body === "") throw new Error("the forwarded server never answered");
  process.stdout.write(`port-forward ended with exit ${await forward.stop()} on Ctrl-C\n`);

  step("Egress goes through the supervisor's proxy, by policy");
  sandgate(["sandbox", "exec", "demo", "--", "node", "-e", VIA_PROXY("http://demo-origin:8080/")]);
  sandgate(["sandbox", "exec", "demo", "--", "node", "-e", VIA_PROXY("http://example.com/")]);

  step("A client that knows nothing of the proxy is governed all the same (the transparent path: DNS and every TCP connection go to the supervisor)");
  const noProxy = ["env", "-u", "HTTP_PROXY", "-u", "HTTPS_PROXY", "-u", "http_proxy", "-u", "https_proxy", "-u", "NODE_USE_ENV_PROXY"];
  sandgate(["sandbox", "exec", "demo", "--", ...noProxy, "node", "-e", DIRECT_GET("http://demo-origin:8080/")]);
  sandgate(["sandbox", "exec", "demo", "--", ...noProxy, "node", "-e", DIRECT_GET(`http://${originIp}:8080/`)]);
  sandgate(["sandbox", "exec", "demo", "--", ...noProxy, "node", "-e", DIRECT_GET("http://example.com/")]);
  sandgate(["audit", "demo", "--tail", "4"]);

  step("L7 rules on HTTPS: the supervisor ends the workload's TLS with the sandbox's own CA and decides each request");
  sandgate(["sandbox", "exec", "demo", "--", "sh", "-c", "cat > /sandbox/https.js"], { input: HTTPS_CLIENT, quiet: true });
  process.stdout.write("(a 20-line HTTPS client is now /sandbox/https.js in the workspace: node's own TLS, no CA flags)\n");
  sandgate(["sandbox", "exec", "demo", "--", "node", "/sandbox/https.js", "GET", "https://demo-api:8443/repos/sandgate/issues"]);
  sandgate(["sandbox", "exec", "demo", "--", "node", "/sandbox/https.js", "DELETE", "https://demo-api:8443/repos/sandgate"]);
  sandgate(["sandbox", "exec", "demo", "--", "node", "/sandbox/https.js", "GET", "https://demo-api:8443/admin"]);

  step("An injected credential: the workload sends a placeholder, the supervisor swaps in the secret where the policy binds it");
  sandgate(["sandbox", "exec", "demo", "--", "sh", "-c", "echo API_TOKEN=$API_TOKEN"]);
  sandgate(["sandbox", "exec", "demo", "--", "sh", "-c", 'node /sandbox/https.js GET https://demo-api:8443/repos/sandgate/issues "Authorization: Bearer $API_TOKEN"']);
  // The same placeholder where the secret is not bound: refused, naming the binding, never the value.
  sandgate(["sandbox", "exec", "demo", "--", "sh", "-c", 'node /sandbox/https.js GET https://demo-api:8443/repos/sandgate/pulls "Authorization: Bearer $API_TOKEN"']);

  step("Change the policy while it runs: POST is now allowed too (no restart)");
  const PROXY_POST = VIA_PROXY("http://demo-origin:8080/", "POST");
  sandgate(["sandbox", "exec", "demo", "--", "node", "-e", PROXY_POST]);
  writeFileSync(policy.replace(".yaml", "-2.yaml"), (await import("node:fs")).readFileSync(policy, "utf8").replace("methods: [GET]", "methods: [GET, POST]"));
  sandgate(["policy", "set", "demo", "--policy", policy.replace(".yaml", "-2.yaml"), "--wait"]);
  sandgate(["sandbox", "exec", "demo", "--", "node", "-e", PROXY_POST]);
  // Exit 8 says "denied" (0 would be "allowed"): what the demo expects here.
  sandgate(["policy", "check", "demo", "--url", "http://demo-origin:8080/x", "--method", "DELETE"], { allowFail: true });

  const before = JSON.parse(sandgate(["sandbox", "get", "demo", "--json"], { quiet: true })) as { runtime: { workload: { id: string }; supervisor: { id: string } } };

  step("Restart the Docker daemon (live-restore): containers survive, every API stream breaks");
  await dockerd.restart({ downMs: 2000 });
  process.stdout.write("dockerd restarted\n");
  // Wait for the monitor to have re-verified the sandbox (Recovering → Ready).
  for (let i = 0; i < 150; i++) {
    const events = JSON.parse(sandgate(["sandbox", "events", "demo", "--json"], { quiet: true })) as { newPhase: string | null; oldPhase: string | null }[];
    if (events.some((e) => e.oldPhase === "Recovering" && e.newPhase === "Ready")) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  sandgate(["sandbox", "events", "demo"]);
  sandgate(["sandbox", "get", "demo"]);
  const after = JSON.parse(sandgate(["sandbox", "get", "demo", "--json"], { quiet: true })) as typeof before;
  const same = after.runtime.workload.id === before.runtime.workload.id && after.runtime.supervisor.id === before.runtime.supervisor.id;
  process.stdout.write(`same containers as before the restart: ${same ? "yes" : "NO"}\n`);
  if (!same) throw new Error("containers changed across a live-restore daemon restart");

  step("Still Ready, still enforcing, workspace intact, its output still readable");
  sandgate(["sandbox", "logs", "demo"]);
  sandgate(["sandbox", "exec", "demo", "--", "cat", "/sandbox/note.txt"]);
  sandgate(["sandbox", "exec", "demo", "--", "node", "-e", VIA_PROXY("http://demo-origin:8080/")]);
  sandgate(["sandbox", "exec", "demo", "--", "node", "-e", VIA_PROXY("http://example.com/")]);
  sandgate(["policy", "get", "demo"]);

  step("Stop, start (a new generation, same workspace), delete");
  sandgate(["sandbox", "stop", "demo"]);
  sandgate(["sandbox", "start", "demo"]);
  sandgate(["sandbox", "exec", "demo", "--", "cat", "/sandbox/note.txt"]);
  sandgate(["sandbox", "delete", "demo"]);
  sandgate(["gateway", "status"]);
  sandgate(["gateway", "stop"]);
  await engine.close();
  process.stdout.write(`\n${bold("demo finished: all steps passed")}\n`);
}

try {
  await main();
} catch (err) {
  process.stderr.write(`\ndemo failed: ${(err as Error).message}\n`);
  // Delete what it made (its workspace is a mounted filesystem), then stop the gateway.
  spawnSync(process.execPath, [BIN, "sandbox", "delete", "demo"], { env: { ...process.env, SANDGATE_HOME: home }, stdio: "ignore" });
  spawnSync(process.execPath, [BIN, "gateway", "stop"], { env: { ...process.env, SANDGATE_HOME: home }, stdio: "ignore" });
  process.exitCode = 1;
} finally {
  await dockerd?.destroy();
  // A workspace still mounted (a delete that could not finish) is unmounted first.
  spawnSync("sh", ["-c", `awk -v d="${home}" 'index($5, d "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l`], { stdio: "ignore" });
  rmSync(home, { recursive: true, force: true });
}
