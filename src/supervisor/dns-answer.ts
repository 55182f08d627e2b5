// The supervisor's DNS answers, as pure functions of a query and the policy's decision: the
// workload's resolver is its supervisor (every DNS packet it sends, to any server, is
// redirected there), and a name the policy does not allow is NXDOMAIN with nothing sent
// upstream (src/policy/dns.ts). Allowed names get their IPv4 addresses (A); no IPv6 (the
// workload has none) and no other record type (NOERROR, empty): nothing upstream answers a
// query the supervisor did not make itself, so no record carries data in or out.
import packet from "dns-packet";

/** The largest query taken (a UDP query is one datagram; TCP's length prefix allows more). */
export const QUERY_MAX_BYTES = 512;
/** TTL of the addresses the supervisor answers: short, it checks every connection anyway. */
export const ANSWER_TTL_S = 30;

export type Rcode = "NOERROR" | "NXDOMAIN" | "SERVFAIL" | "FORMERR" | "REFUSED";
/** RFC 1035's codes; dns-packet takes the rcode in the flags' low four bits. */
const RCODES: Record<Rcode, number> = { NOERROR: 0, FORMERR: 1, SERVFAIL: 2, NXDOMAIN: 3, REFUSED: 5 };

export interface Query {
  id: number;
  /** The name as asked (lower case, no trailing dot). */
  name: string;
  type: string;
  recursionDesired: boolean;
  /** The question as it came, echoed in the answer. */
  question: { name: string; type: string; class: string };
}

/** The one question of a standard query; null when it is not one (a response, a notify, several questions). */
export function parseQuery(buf: Buffer): { ok: true; query: Query } | { ok: false; id: number | null } {
  if (buf.length > QUERY_MAX_BYTES) return { ok: false, id: buf.length >= 2 ? buf.readUInt16BE(0) : null };
  let p: packet.Packet;
  try {
    p = packet.decode(buf);
  } catch {
    return { ok: false, id: buf.length >= 2 ? buf.readUInt16BE(0) : null };
  }
  const id = p.id ?? 0;
  const q = p.questions ?? [];
  if (p.type !== "query" || (p as { opcode?: string }).opcode !== "QUERY" || q.length !== 1 || (p.answers?.length ?? 0) > 0) return { ok: false, id };
  const question = q[0]!;
  return {
    ok: true,
    query: {
      id,
      name: question.name.toLowerCase().replace(/\.$/, ""),
      type: question.type,
      recursionDesired: p.flags === undefined ? false : (p.flags & packet.RECURSION_DESIRED) !== 0,
      question: { name: question.name, type: question.type, class: question.class ?? "IN" },
    },
  };
}

/** An answer to `query`: `addresses` (IPv4) as A records when it asked for A, else none. */
export function answer(query: Query, rcode: Rcode, addresses: readonly string[] = []): Buffer {
  const a = rcode === "NOERROR" && query.type === "A" ? addresses.filter((x) => /^\d+\.\d+\.\d+\.\d+$/.test(x)) : [];
  return packet.encode({
    id: query.id,
    type: "response",
    flags: packet.RECURSION_AVAILABLE | (query.recursionDesired ? packet.RECURSION_DESIRED : 0) | RCODES[rcode],
    questions: [query.question as packet.Question],
    answers: a.map((data) => ({ type: "A", name: query.question.name, ttl: ANSWER_TTL_S, class: "IN", data })),
  });
}

/** FORMERR for a packet that is not one standard query (or nothing at all when its id cannot be read). */
export function formatError(id: number | null): Buffer | null {
  if (id === null) return null;
  return packet.encode({ id, type: "response", flags: packet.RECURSION_AVAILABLE | RCODES.FORMERR, questions: [] });
}
