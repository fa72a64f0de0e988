/**
 * A tiny DNS server on loopback for tests: answers A queries from a table the test can
 * change at any moment (so a name can "move"), everything else with no answer. Enough
 * for `dns.Resolver`; nothing here parses more than one question.
 */
import dgram from 'node:dgram';
import { answer, parseQuery, QTYPE, RCODE } from './dns-wire.js';

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
    const q = parseQuery(msg);
    if (!q) return;
    const known = dns.records.get(q.name);
    const reply = answer(msg, q, {
      rcode: known ? RCODE.noError : RCODE.nxDomain,
      addresses: q.type === QTYPE.A ? (known ?? []) : [],
      ttl: dns.ttl,
    });
    socket.send(reply, from.port, from.address);
  });
  await new Promise<void>((r) => socket.bind(0, '127.0.0.1', () => r()));
  dns.server = `127.0.0.1:${socket.address().port}`;
  return dns;
}
