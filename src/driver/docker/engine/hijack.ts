// The hijacked answer (Docker's exec start): a POST upgraded to a raw socket, dispatched
// by hand. Apart from the transport (transport.ts) because it is the one call that does
// not go through undici's request(): it speaks undici's dispatch-handler protocol instead.
import type { Dispatcher } from "undici";
import type { Duplex } from "node:stream";
import type { CallGuard } from "./call.js";
import { errorFromBody } from "./body.js";
import { ok, transport } from "./result.js";
import type { EngineResult } from "./result.js";

/**
 * A raw dispatch rather than undici's upgrade(): that one turns a non-101 answer into
 * "bad upgrade" and drops Docker's error message (404 no such exec, 409 not running).
 * Resolves with the socket (then the caller's) or why not; never rejects.
 */
export function dispatchUpgrade(dispatcher: Dispatcher, dispatchOpts: Dispatcher.DispatchOptions, guard: CallGuard): Promise<EngineResult<Duplex>> {
  return new Promise((resolve) => {
    let settled = false;
    let controller: Dispatcher.DispatchController | undefined;
    let status = 0;
    const chunks: Buffer[] = [];
    const settle = (r: EngineResult<Duplex>): void => {
      if (settled) return;
      settled = true;
      resolve(r);
    };
    guard.onAbort(() => {
      controller?.abort(new Error("aborted"));
      settle(guard.failure(undefined));
    });
    const handler: Dispatcher.DispatchHandler = {
      onRequestStart(c) {
        controller = c;
        if (settled) c.abort(new Error("aborted"));
      },
      onRequestUpgrade(_c, statusCode, _headers, socket) {
        if (settled) {
          socket.destroy();
          return;
        }
        settle(ok(statusCode, socket));
      },
      onResponseStart(_c, statusCode) {
        status = statusCode;
      },
      onResponseData(_c, chunk) {
        chunks.push(chunk);
      },
      onResponseEnd() {
        const buf = Buffer.concat(chunks);
        if (status >= 400) settle(errorFromBody(status, buf));
        else settle(transport("NO_UPGRADE", `the upgrade was answered with HTTP ${status} instead of 101 Switching Protocols`));
      },
      onResponseError(_c, err) {
        settle(guard.failure(err));
      },
    };
    try {
      dispatcher.dispatch(dispatchOpts, handler);
    } catch (err) {
      settle(guard.failure(err));
    }
  });
}
