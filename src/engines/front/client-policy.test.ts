/**
 * A front serves the host and the machines' network only. The outside client is real: a
 * private network namespace joined to the host by a veth pair, whose address is neither
 * loopback, nor the host's, nor in the machines' network, dials the front across it.
 * Everything made here (namespace, veth, listeners) is removed after the file, pass or fail.
 */
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import net from 'node:net';
import { promisify } from 'node:util';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { frontClientPolicy, plainAddress } from './client-policy.js';
import { TcpFront } from './tcp-front.js';

const run = promisify(execFile);

// Unique per test process: other suites may build namespaces at the same time.
const tag = `${process.pid % 100_000}`;
const NS = `pier-front-${tag}`;
const HOST_IF = `pfh${tag}`;
const NS_IF = `pfn${tag}`;
const third = 1 + (process.pid % 250);
const HOST_ADDR = `10.254.${third}.1`;
const OUTSIDE_ADDR = `10.254.${third}.2`;
const MACHINES_CIDR = '10.213.0.0/16';

const cleanups: (() => Promise<unknown> | void)[] = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});

beforeAll(async () => {
  await run('ip', ['netns', 'add', NS]);
  await run('ip', ['link', 'add', HOST_IF, 'type', 'veth', 'peer', 'name', NS_IF]);
  await run('ip', ['link', 'set', NS_IF, 'netns', NS]);
  await run('ip', ['addr', 'add', `${HOST_ADDR}/30`, 'dev', HOST_IF]);
  await run('ip', ['link', 'set', HOST_IF, 'up']);
  await run('ip', ['-n', NS, 'addr', 'add', `${OUTSIDE_ADDR}/30`, 'dev', NS_IF]);
  await run('ip', ['-n', NS, 'link', 'set', NS_IF, 'up']);
});
afterAll(async () => {
  // Deleting the namespace deletes its end of the pair, and with it the host's end.
  await run('ip', ['netns', 'del', NS]).catch(() => {});
  await run('ip', ['link', 'del', HOST_IF]).catch(() => {});
});

async function echoServer(): Promise<number> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((sock) => {
    sockets.add(sock);
    sock.on('close', () => sockets.delete(sock));
    sock.on('error', () => {});
    sock.pipe(sock);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  cleanups.push(async () => {
    for (const s of sockets) s.destroy();
    await new Promise((r) => server.close(r));
  });
  return (server.address() as net.AddressInfo).port;
}

async function startFront(publicFronts: boolean) {
  const refused: (string | undefined)[] = [];
  const front = new TcpFront({
    host: '0.0.0.0',
    port: 0,
    targetPort: await echoServer(),
    admit: frontClientPolicy({ machinesCidr: MACHINES_CIDR, public: publicFronts }),
    onRefused: (peer) => refused.push(peer),
  });
  await front.listen();
  cleanups.push(() => front.close());
  return { front, refused };
}

// Sends "hello" and prints what came back, or how the connection ended without it.
const CLIENT = `
const sock = require('node:net').connect({ host: process.argv[1], port: Number(process.argv[2]) });
let got = '';
sock.on('connect', () => sock.write('hello'));
sock.on('data', (d) => { got += d; if (got === 'hello') { console.log('echo:' + got); sock.destroy(); } });
sock.on('error', (e) => { console.log('error:' + e.code); });
sock.on('close', () => { if (got !== 'hello') console.log('closed:' + got); });
setTimeout(() => { console.log('timeout'); process.exit(0); }, 5000).unref();
`;

/** Runs the client inside the namespace: its source address is OUTSIDE_ADDR. */
async function dialFromOutside(port: number): Promise<string> {
  const { stdout } = await run('ip', [
    'netns',
    'exec',
    NS,
    process.execPath,
    '-e',
    CLIENT,
    HOST_ADDR,
    String(port),
  ]);
  return stdout.trim();
}

async function dialFromHost(host: string, port: number): Promise<string> {
  const { stdout } = await run(process.execPath, ['-e', CLIENT, host, String(port)]);
  return stdout.trim();
}

describe('database front admission', () => {
  it('resets a client from outside the host and the machines, and counts it', async () => {
    const { front, refused } = await startFront(false);
    const answer = await dialFromOutside(front.port);
    expect(answer).toMatch(/^(error:ECONNRESET|closed:)/);
    expect(answer).not.toContain('echo');
    expect(front.refusedConnections).toBe(1);
    expect(refused.map((p) => plainAddress(p ?? ''))).toEqual([OUTSIDE_ADDR]);
    expect(front.openConnections).toBe(0);
  });

  it('serves the host itself, by loopback and by one of its own addresses', async () => {
    const { front } = await startFront(false);
    expect(await dialFromHost('127.0.0.1', front.port)).toBe('echo:hello');
    // Dialing the host's address on the veth: the peer is that address, the host's own.
    expect(await dialFromHost(HOST_ADDR, front.port)).toBe('echo:hello');
    expect(front.refusedConnections).toBe(0);
  });

  it('serves the outside client when the operator made fronts public', async () => {
    const { front } = await startFront(true);
    expect(await dialFromOutside(front.port)).toBe('echo:hello');
    expect(front.refusedConnections).toBe(0);
  });

  it("admits the machines' network, loopback and mapped IPv4, and nothing unparsable", () => {
    const admit = frontClientPolicy({
      machinesCidr: MACHINES_CIDR,
      public: false,
      hostAddresses: () => ['192.0.2.7'],
    });
    expect(admit('10.213.4.9')).toBe(true);
    expect(admit('::ffff:10.213.0.2')).toBe(true);
    expect(admit('127.0.0.5')).toBe(true);
    expect(admit('::1')).toBe(true);
    expect(admit('192.0.2.7')).toBe(true);
    expect(admit('10.214.0.2')).toBe(false);
    expect(admit('192.0.2.8')).toBe(false);
    expect(admit('::ffff:198.51.100.1')).toBe(false);
    expect(admit('2001:db8::1')).toBe(false);
    expect(admit(undefined)).toBe(false);
    expect(admit('not-an-address')).toBe(false);
  });
});
