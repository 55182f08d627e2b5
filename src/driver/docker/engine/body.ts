// Reading the Engine's answers: a body read whole under the call's guard, parsed as JSON,
// or read as the Engine's error ({"message": ...}, or whatever text came). Apart from the
// transport (transport.ts) because it is the same for every kind of call and holds no
// state: the transport opens calls, this reads what they answer.
import type { CallGuard } from "./call.js";
import { TransportCode, dockerError, transport } from "./result.js";
import type { DockerError, TransportFailure } from "./result.js";

/** The whole body; a cut or the guard's deadline gives the failure instead. */
export async function readAll(body: AsyncIterable<Buffer>, guard: CallGuard): Promise<Buffer | TransportFailure> {
  const chunks: Buffer[] = [];
  try {
    for await (const chunk of body) chunks.push(chunk);
    return Buffer.concat(chunks);
  } catch (err) {
    return guard.failure(err);
  }
}

export function parseJson(buf: Buffer): { kind: "ok"; body: unknown } | TransportFailure {
  try {
    return { kind: "ok", body: JSON.parse(buf.toString("utf8")) as unknown };
  } catch {
    return transport(TransportCode.BAD_BODY, `expected JSON, got ${buf.length} bytes: ${snippet(buf)}`);
  }
}

export function errorFromBody(status: number, buf: Buffer): DockerError {
  const text = buf.toString("utf8").trim();
  try {
    const parsed = JSON.parse(text) as { message?: unknown };
    if (typeof parsed.message === "string") return dockerError(status, parsed.message);
  } catch {
    // not JSON: fall through to the raw text
  }
  return dockerError(status, text === "" ? `HTTP ${status}` : text.slice(0, 500));
}

export function snippet(buf: Buffer): string {
  return JSON.stringify(buf.subarray(0, 120).toString("utf8"));
}
