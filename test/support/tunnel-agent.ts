// Source text of an https.Agent that opens each connection as a CONNECT tunnel through an
// HTTP proxy, for node programs run inside containers (`node -e`). The workload's node 24
// reads HTTPS_PROXY itself (NODE_USE_ENV_PROXY=1); bench/https.ts keeps this agent to set
// its pool (keepAlive, maxSockets) and its TLS options per run, with or without a proxy.
// TLS options (ca, servername) pass through, so with no `ca` the client's default trust
// applies (system roots + NODE_EXTRA_CA_CERTS).
// Defines `TunnelAgent(proxyUrl, agentOptions)`; needs net, tls and https in scope.
export const NODE_TUNNEL_AGENT = `class TunnelAgent extends https.Agent{
  constructor(proxy,o){super(o);this.proxy=new URL(proxy)}
  createConnection(o,cb){const p=this.proxy,target=o.host+":"+o.port;let done=false;
    const fail=(e)=>{if(!done){done=true;cb(e)}};
    const s=net.connect(Number(p.port),p.hostname,()=>s.write("CONNECT "+target+" HTTP/1.1\\r\\nHost: "+target+"\\r\\n\\r\\n"));
    let b="";const onData=(d)=>{b+=d.toString("latin1");const e=b.indexOf("\\r\\n\\r\\n");if(e<0)return;s.off("data",onData);
      if(b.split(" ")[1]!=="200"){s.destroy();fail(new Error("CONNECT "+b.split("\\r\\n")[0]));return}
      done=true;cb(null,tls.connect({...o,socket:s,servername:o.servername||o.host}))};
    s.on("data",onData);s.once("error",fail);}}`;
