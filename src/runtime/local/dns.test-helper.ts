/**
 * A tiny DNS server on loopback for tests: answers A queries from a table the test can
 * change at any moment (so a name can "move"), everything else with no answer. Enough
 * for `dns.Resolver`; nothing here parses more than one question.
 */
import dgram from 'node:dgram';

/** A running test DNS server. */
export interface TestDns {
  /** `127.0.0.1:<port>`, for `Resolver.setServers`. */
  server: string;
  /** name → IPv4 addresses; edit freely. */
  records: Map<string, string[]>;
  /** TTL of every answer, in seconds. */
  ttl: number;
  close(): Promise<void>;
}

/** The question's name (lowercased) and where the question ends, or undefined. */
function question(msg: Buffer): { name: string; end: number; type: number } | undefined {
  const labels: string[] = [];
  let at = 12;
  while (at < msg.length) {
    const len = msg[at]!;
    if (len === 0) break;
    if (len > 63) return undefined;
    labels.push(msg.subarray(at + 1, at + 1 + len).toString('latin1'));
    at += 1 + len;
  }
  if (at + 5 > msg.length) return undefined;
  return { name: labels.join('.').toLowerCase(), end: at + 5, type: msg.readUInt16BE(at + 1) };
}

/** Starts the server on 127.0.0.1, on a free port. */
export async function startTestDns(): Promise<TestDns> {
  const socket = dgram.createSocket('udp4');
  const dns: TestDns = {
    server: '',
    records: new Map(),
    ttl: 1,
    close: () => new Promise((r) => socket.close(() => r())),
  };
  socket.on('message', (msg, from) => {
    const q = question(msg);
    if (!q || msg.length < 12) return;
    const known = dns.records.get(q.name);
    const answers = q.type === 1 ? (known ?? []) : [];
    const head = Buffer.alloc(12);
    msg.copy(head, 0, 0, 2); // the query's id
    // QR, RD, RA; NXDOMAIN for an unknown name.
    head.writeUInt16BE(0x8180 | (known ? 0 : 3), 2);
    head.writeUInt16BE(1, 4);
    head.writeUInt16BE(answers.length, 6);
    const records = answers.map((ip) => {
      const rr = Buffer.alloc(16);
      rr.writeUInt16BE(0xc00c, 0); // the name: a pointer to the question's
      rr.writeUInt16BE(1, 2); // A
      rr.writeUInt16BE(1, 4); // IN
      rr.writeUInt32BE(dns.ttl, 6);
      rr.writeUInt16BE(4, 10);
      ip.split('.').forEach((p, i) => rr.writeUInt8(Number(p), 12 + i));
      return rr;
    });
    socket.send(
      Buffer.concat([head, msg.subarray(12, q.end), ...records]),
      from.port,
      from.address,
    );
  });
  await new Promise<void>((r) => socket.bind(0, '127.0.0.1', () => r()));
  dns.server = `127.0.0.1:${socket.address().port}`;
  return dns;
}
