/**
 * The machines' resolver on loopback, asked with Node's own DNS client from several
 * loopback source addresses, each standing for a machine with another egress; upstream
 * is the test DNS server. Over UDP and TCP, with garbage and a dead upstream.
 */
import { Resolver } from 'node:dns/promises';
import net from 'node:net';
import dgram from 'node:dgram';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestDns, type TestDns } from './dns.test-helper.js';
import { answer, parseQuery, QTYPE, RCODE } from './dns-wire.js';
import { MachineDns, type DnsPolicy } from './machine-dns.js';

const OPEN = '127.0.0.2';
const ALLOW = '127.0.0.3';
const DENY = '127.0.0.4';
const STRANGER = '127.0.0.5';

let upstream: TestDns;
let resolver: MachineDns;
let deadUpstream: MachineDns;

const policies = new Map<string, DnsPolicy>([
  [OPEN, { mode: 'open' }],
  [
    ALLOW,
    {
      mode: 'allowlist',
      names: new Map([['allowed.pier.test', { addresses: ['198.51.100.7'], ttlS: 30 }]]),
    },
  ],
  [DENY, { mode: 'deny-all' }],
]);

beforeAll(async () => {
  upstream = await startTestDns();
  upstream.records.set('allowed.pier.test', ['203.0.113.1']); // what others would answer
  upstream.records.set('else.pier.test', ['203.0.113.2']);
  const log = { warn: () => {} };
  const policyOf = (ip: string) => policies.get(ip);
  resolver = await MachineDns.start({
    host: '127.0.0.1',
    port: 0,
    upstream: [upstream.server],
    policyOf,
    log,
  });
  // A port nothing listens on: every forward fails.
  const closed = dgram.createSocket('udp4');
  await new Promise<void>((r) => closed.bind(0, '127.0.0.1', () => r()));
  const closedPort = closed.address().port;
  closed.close();
  deadUpstream = await MachineDns.start({
    host: '127.0.0.1',
    port: 0,
    upstream: [`127.0.0.1:${closedPort}`],
    policyOf,
    log,
  });
});

afterAll(async () => {
  await resolver?.close();
  await deadUpstream?.close();
  await upstream?.close();
});

/** A client asking `server` from the source address `from`. */
function client(from: string, server = resolver): Resolver {
  const r = new Resolver({ timeout: 4000, tries: 1 });
  r.setLocalAddress(from);
  r.setServers([`127.0.0.1:${server.port}`]);
  return r;
}

/** A standard query for the A records of `name`, recursion desired. */
function query(name: string, id: number): Buffer {
  const head = Buffer.alloc(12);
  head.writeUInt16BE(id, 0);
  head.writeUInt16BE(0x0100, 2);
  head.writeUInt16BE(1, 4);
  const labels = name
    .split('.')
    .map((l) => Buffer.concat([Buffer.from([l.length]), Buffer.from(l)]));
  return Buffer.concat([head, ...labels, Buffer.from([0, 0, QTYPE.A, 0, 1])]);
}

const codeOf = (p: Promise<unknown>) =>
  p.then(
    () => 'answered',
    (err: NodeJS.ErrnoException) => err.code,
  );

it('passes an open machine’s queries to the host’s resolvers, answers and errors alike', async () => {
  expect(await client(OPEN).resolve4('else.pier.test')).toEqual(['203.0.113.2']);
  expect(await codeOf(client(OPEN).resolve4('missing.pier.test'))).toBe('ENOTFOUND');
});

it('answers an allowlist’s names with the walls’ addresses, and refuses the rest', async () => {
  const r = client(ALLOW);
  const [answered] = await r.resolve4('allowed.pier.test', { ttl: true });
  expect(answered).toEqual({ address: '198.51.100.7', ttl: 30 });
  // The name is allowed, but no other record type is given for it.
  expect(await codeOf(r.resolve6('Allowed.Pier.Test'))).toBe('ENODATA');
  expect(await codeOf(r.resolve4('else.pier.test'))).toBe('EREFUSED');
});

it('refuses a deny-all machine and an address that is no machine', async () => {
  expect(await codeOf(client(DENY).resolve4('else.pier.test'))).toBe('EREFUSED');
  expect(await codeOf(client(STRANGER).resolve4('else.pier.test'))).toBe('EREFUSED');
});

it('answers over TCP too, one length-prefixed query after another', async () => {
  const framed = (msg: Buffer) => {
    const size = Buffer.alloc(2);
    size.writeUInt16BE(msg.length);
    return Buffer.concat([size, msg]);
  };
  const socket = net.connect({ host: '127.0.0.1', port: resolver.port, localAddress: ALLOW });
  const replies: Buffer[] = [];
  let got = Buffer.alloc(0);
  await new Promise<void>((resolve, reject) => {
    socket.on('error', reject);
    socket.on('data', (d: Buffer) => {
      got = Buffer.concat([got, d]);
      while (got.length >= 2 && got.length >= 2 + got.readUInt16BE(0)) {
        replies.push(got.subarray(2, 2 + got.readUInt16BE(0)));
        got = got.subarray(2 + got.readUInt16BE(0));
      }
      if (replies.length === 2) resolve();
    });
    // Both queries in one write: the second waits in the buffer for the first's answer.
    socket.write(
      Buffer.concat([framed(query('allowed.pier.test', 7)), framed(query('else.pier.test', 8))]),
    );
  });
  socket.destroy();
  expect(replies.map((r) => [r.readUInt16BE(0), r.readUInt16BE(2) & 0xf])).toEqual([
    [7, RCODE.noError],
    [8, RCODE.refused],
  ]);
  expect([...replies[0]!.subarray(-4)]).toEqual([198, 51, 100, 7]);
});

it('ignores what is not a query, and keeps answering', async () => {
  const socket = dgram.createSocket('udp4');
  await new Promise<void>((r) => socket.bind(0, OPEN, () => r()));
  const silent = new Promise<string>((resolve) => {
    socket.once('message', () => resolve('answered'));
    setTimeout(() => resolve('silent'), 300);
  });
  socket.send(Buffer.from('not dns at all'), resolver.port, '127.0.0.1');
  // A response (QR set) sent to it is not answered either: no reflection loops.
  const msg = query('else.pier.test', 9);
  socket.send(answer(msg, parseQuery(msg)!, { rcode: RCODE.noError }), resolver.port, '127.0.0.1');
  expect(await silent).toBe('silent');
  socket.close();
  expect(await client(OPEN).resolve4('else.pier.test')).toEqual(['203.0.113.2']);
});

it('answers SERVFAIL when the upstream is dead, at once rather than never', async () => {
  const started = Date.now();
  expect(await codeOf(client(OPEN, deadUpstream).resolve4('else.pier.test'))).toBe('ESERVFAIL');
  expect(Date.now() - started).toBeLessThan(3500);
});
