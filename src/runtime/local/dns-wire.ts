/**
 * The little of the DNS wire format (RFC 1035 §4) that the machines' resolver and the
 * test DNS server need: read the one question of a query, and write an answer to it made
 * of A records or of no records with a response code. Queries carry one question and no
 * name compression; anything else is not a query we answer.
 */

/** Response codes used here (RFC 1035 §4.1.1). */
export const RCODE = { noError: 0, formErr: 1, servFail: 2, nxDomain: 3, refused: 5 } as const;

/** Record types used here. */
export const QTYPE = { A: 1 } as const;

const HEADER_BYTES = 12;

/** The question of a query: the name (lowercase, no trailing dot), its type and class. */
export interface DnsQuestion {
  id: number;
  /** The query's flags word (opcode, RD), echoed in parts into the answer. */
  flags: number;
  name: string;
  type: number;
  /** Where the question ends in the message (the answer copies bytes 12..end). */
  end: number;
}

/**
 * The one question of a standard query, or undefined when `msg` is not one (a response,
 * another opcode, no question or several, a malformed or compressed name).
 */
export function parseQuery(msg: Buffer): DnsQuestion | undefined {
  if (msg.length < HEADER_BYTES + 5) return undefined;
  const flags = msg.readUInt16BE(2);
  const isResponse = (flags & 0x8000) !== 0;
  const opcode = (flags >> 11) & 0xf;
  if (isResponse || opcode !== 0 || msg.readUInt16BE(4) !== 1) return undefined;
  const labels: string[] = [];
  let at = HEADER_BYTES;
  for (;;) {
    if (at >= msg.length) return undefined;
    const len = msg[at]!;
    if (len === 0) break;
    if (len > 63) return undefined; // a pointer or a reserved label type
    labels.push(msg.subarray(at + 1, at + 1 + len).toString('latin1'));
    at += 1 + len;
  }
  if (at + 5 > msg.length) return undefined;
  const name = labels.join('.').toLowerCase();
  if (name.length > 253) return undefined;
  return { id: msg.readUInt16BE(0), flags, name, type: msg.readUInt16BE(at + 1), end: at + 5 };
}

/**
 * The answer to `q` (the query `query`): `addresses` as A records with `ttl`, or none,
 * with `rcode`. Recursion is shown as available; the query's RD bit is echoed.
 */
export function answer(
  query: Buffer,
  q: DnsQuestion,
  opts: { rcode: number; addresses?: string[]; ttl?: number },
): Buffer {
  const addresses = opts.addresses ?? [];
  const head = Buffer.alloc(HEADER_BYTES);
  head.writeUInt16BE(q.id, 0);
  // QR | RD (as asked) | RA | rcode.
  head.writeUInt16BE(0x8000 | (q.flags & 0x0100) | 0x0080 | (opts.rcode & 0xf), 2);
  head.writeUInt16BE(1, 4);
  head.writeUInt16BE(addresses.length, 6);
  const records = addresses.map((ip) => {
    const rr = Buffer.alloc(16);
    rr.writeUInt16BE(0xc000 | HEADER_BYTES, 0); // the name: a pointer to the question's
    rr.writeUInt16BE(QTYPE.A, 2);
    rr.writeUInt16BE(1, 4); // IN
    rr.writeUInt32BE(Math.max(0, Math.floor(opts.ttl ?? 0)), 6);
    rr.writeUInt16BE(4, 10);
    ip.split('.').forEach((p, i) => rr.writeUInt8(Number(p), 12 + i));
    return rr;
  });
  return Buffer.concat([head, query.subarray(HEADER_BYTES, q.end), ...records]);
}
