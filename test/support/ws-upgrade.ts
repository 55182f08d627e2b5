// The answer to a WebSocket upgrade through the `ws` client: upgraded, or the HTTP refusal
// (its status and JSON body) the gateway sent instead of the 101.
import WebSocket from "ws";

export interface UpgradeAnswer<B = unknown> {
  status: number;
  /** The refusal's JSON body; null when upgraded (101). */
  body: B | null;
}

/** Upgrades `url` (closing the socket at once on a 101) or reads the refusal. */
export function upgradeAnswer<B = unknown>(url: string, headers: Record<string, string> = {}): Promise<UpgradeAnswer<B>> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers });
    ws.on("open", () => {
      ws.close();
      resolve({ status: 101, body: null });
    });
    ws.on("unexpected-response", (_req, res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => (text += d));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as B }));
    });
    ws.on("error", reject);
  });
}
