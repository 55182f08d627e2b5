// How the control-session parsers describe a malformed message. The supervisor bundles
// zod/mini, which loads no locale; the gateway also loads classic zod, which registers
// English. The parsers word every issue themselves, as English does, so one message reads
// alike in both logs.
import fc from "fast-check";
import { afterEach, describe, expect, it } from "vitest";
import * as z from "zod/mini";
import { gatewayMessage, parseGatewayMessage, parseSupervisorMessage, supervisorMessage } from "../../../src/protocol/wire.js";

const savedLocale = z.config().localeError;
afterEach(() => {
  z.config({ localeError: savedLocale });
});

const withLocale = <T>(english: boolean, f: () => T): T => {
  z.config({ localeError: english ? z.locales.en().localeError : undefined });
  return f();
};

/** What zod's English locale says of the first issue, in parseWith's "path: message" form. */
function english(schema: z.ZodMiniType, value: unknown): string | null {
  const r = schema.safeParse(value, { error: z.locales.en().localeError });
  if (r.success) return null;
  const issue = r.error.issues[0]!;
  return `${issue.path.join(".") || "(root)"}: ${issue.message}`;
}

const hello = { type: "hello", token: "t", sandboxId: "s", generation: 1, enforcedRevision: null, proxy: "listening", accepts: ["secrets"] };
const event = { type: "egress", time: "t", decision: "deny", host: "h", port: 443, protocol: "https" };
const supervisorCases: [string, unknown, string][] = [
  ["a missing field", { type: "ack", applied: true }, "revision: Invalid input: expected number, received undefined"],
  ["a wrong type", { ...hello, generation: "1" }, "generation: Invalid input: expected number, received string"],
  ["null where a list goes", { ...hello, accepts: null }, "accepts: Invalid input: expected array, received null"],
  ["a fraction where an integer goes", { type: "ack", revision: 1.5, applied: true }, "revision: Invalid input: expected int, received number"],
  ["a number below its minimum", { type: "ack", revision: -1, applied: true }, "revision: Too small: expected number to be >=0"],
  ["a number above its maximum", { type: "audit", event: { ...event, port: 65536 } }, "event.port: Too big: expected number to be <=65535"],
  ["an unsafe integer", { type: "ack", revision: 2 ** 53, applied: true }, "revision: Too big: expected int to be <=9007199254740991"],
  ["a long string", { type: "audit", event: { ...event, method: "x".repeat(33) } }, "event.method: Too big: expected string to have <=32 characters"],
  ["an empty string", { ...hello, token: "" }, "token: Too small: expected string to have >=1 characters"],
  ["a long list", { ...hello, accepts: Array(17).fill("a") }, "accepts: Too big: expected array to have <=16 items"],
  ["an unknown enum value", { ...hello, proxy: "up" }, 'proxy: Invalid option: expected one of "listening"|"not_listening"'],
  ["a wrong literal", { type: "audit", event: { ...event, type: "ingress" } }, 'event.type: Invalid input: expected "egress"'],
  ["an unknown key", { ...hello, extra: 1 }, '(root): Unrecognized key: "extra"'],
  ["unknown keys", { ...hello, a: 1, b: 2 }, '(root): Unrecognized keys: "a", "b"'],
  ["an unknown type", { type: "nope" }, "type: Invalid discriminator value. Expected 'hello' | 'ack' | 'heartbeat' | 'audit' | 'secretsAck'"],
  ["not a mapping", [1], "(root): Invalid input: expected object, received array"],
];
const gatewayCases: [string, unknown, string][] = [
  ["a record of the wrong type", { type: "policy", revision: 1, policy: [] }, "policy: Invalid input: expected record, received array"],
  ["a bad record key", { type: "secrets", version: 1, secrets: { "A B": "eA==" } }, "secrets.A B: Invalid key in record"],
  ["too many secrets", { type: "secrets", version: 1, secrets: Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`s${String(i)}`, "eA=="])) }, "secrets: at most 32 secrets"],
];

describe("a malformed message's description", () => {
  it.each([
    ...supervisorCases.map(([n, v, text]) => [n, supervisorMessage, parseSupervisorMessage, v, text] as const),
    ...gatewayCases.map(([n, v, text]) => [n, gatewayMessage, parseGatewayMessage, v, text] as const),
  ])("%s: English words, with the locale and without", (_n, schema, parse, value, text) => {
    expect(english(schema, value)).toBe(text);
    for (const locale of [true, false]) expect(withLocale(locale, () => parse(JSON.stringify(value)))).toEqual({ ok: false, error: text });
  });

  it("property: any damage to a valid message is described as English would, with the locale or without", () => {
    const bases: [z.ZodMiniType, (d: unknown) => unknown, unknown][] = [
      [supervisorMessage, parseSupervisorMessage, hello],
      [supervisorMessage, parseSupervisorMessage, { type: "heartbeat", enforcedRevision: 4, proxy: "not_listening", lockdown: false, auditDropped: 0 }],
      [supervisorMessage, parseSupervisorMessage, { type: "audit", event: { ...event, activity: "close", count: 2, status: 200, bytesIn: 1 } }],
      [gatewayMessage, parseGatewayMessage, { type: "welcome", sessionId: "a", sandboxId: "b", generation: 1 }],
      [gatewayMessage, parseGatewayMessage, { type: "secrets", version: 1, secrets: { gh: "eA==" } }],
      [gatewayMessage, parseGatewayMessage, { type: "hostAddresses", addresses: ["192.0.2.1"] }],
    ];
    const wrong = fc.oneof(fc.constantFrom(undefined, null, true, -1, 1.5, 2 ** 53, "", "x".repeat(301), [], {}, { zz: 1 }), fc.jsonValue({ maxDepth: 2 }));
    const damaged = fc.record({ base: fc.integer({ min: 0, max: bases.length - 1 }), key: fc.string({ maxLength: 12 }), into: fc.boolean(), value: wrong });
    fc.assert(
      fc.property(damaged, ({ base, key, into, value }) => {
        const [schema, parse, message] = bases[base]!;
        const m = structuredClone(message) as Record<string, unknown>;
        // Replace a field (or add a key), at the top or inside the first nested mapping.
        const nested = Object.values(m).find((v): v is Record<string, unknown> => v !== null && typeof v === "object" && !Array.isArray(v));
        const target = into && nested !== undefined ? nested : m;
        const keys = Object.keys(target);
        target[keys.includes(key) || key.length > 3 ? key : keys[key.length % keys.length]!] = value;
        const text = JSON.stringify(m);
        const expected = english(schema, JSON.parse(text));
        for (const locale of [true, false]) {
          const got = withLocale(locale, () => parse(text));
          expect(got).toEqual(expected === null ? { ok: true, message: expect.anything() } : { ok: false, error: expected });
        }
      }),
      { seed: 1414, numRuns: 2000 },
    );
  });
});
