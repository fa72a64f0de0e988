import { once } from 'node:events';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ensureCa, type CaFiles } from '../../crypto/ca.js';
import { TcpFront, type TcpFrontOptions } from './tcp-front.js';

// Everything made by a test is closed after it, pass or fail.
const cleanups: (() => Promise<unknown> | void)[] = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});

/** An upstream that echoes; it records what it received and its open sockets. */
async function echoServer(port = 0) {
  const received: Buffer[] = [];
  const sockets = new Set<net.Socket>();
  const server = net.createServer({ allowHalfOpen: true }, (sock) => {
    sockets.add(sock);
    sock.on('close', () => sockets.delete(sock));
    sock.on('error', () => {});
    sock.on('data', (chunk) => {
      received.push(chunk);
      sock.write(chunk);
    });
    sock.on('end', () => sock.end());
  });
  server.listen(port, '127.0.0.1');
  await once(server, 'listening');
  const close = async () => {
    for (const s of sockets) s.destroy();
    if (server.listening) await new Promise((r) => server.close(r));
  };
  cleanups.push(close);
  const bound = (server.address() as net.AddressInfo).port;
  return {
    server,
    port: bound,
    received,
    sockets,
    close,
    text: () => Buffer.concat(received).toString(),
  };
}

async function startFront(opts: Omit<TcpFrontOptions, 'host' | 'port'> & { port?: number }) {
  const front = new TcpFront({ host: '127.0.0.1', port: 0, ...opts });
  await front.listen();
  cleanups.push(() => front.close());
  return front;
}

function connect(port: number): net.Socket {
  // Not half-open: a FIN from the front closes it, as with a database driver.
  const sock = net.connect({ host: '127.0.0.1', port });
  sock.on('error', () => {});
  cleanups.push(() => void sock.destroy());
  return sock;
}

/** Resolves with everything received once `n` bytes have arrived. */
function readBytes(sock: net.Socket, n: number): Promise<string> {
  return new Promise((resolve, reject) => {
    let got = '';
    const onData = (chunk: Buffer) => {
      got += chunk.toString();
      if (got.length >= n) {
        sock.off('data', onData);
        resolve(got);
      }
    };
    sock.on('data', onData);
    sock.once('close', () => reject(new Error(`closed after ${JSON.stringify(got)}`)));
  });
}

/** Resolves when `sock` is fully closed; reads (and drops) whatever still arrives. */
function closed(sock: net.Socket): Promise<unknown> {
  if (sock.closed) return Promise.resolve();
  sock.resume();
  return once(sock, 'close');
}

const delay = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A port nothing listens on (bound then released). */
async function freePort(): Promise<number> {
  const s = net.createServer().listen(0, '127.0.0.1');
  await once(s, 'listening');
  const port = (s.address() as net.AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

async function waitFor(cond: () => boolean, ms = 2000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not reached');
    await delay(5);
  }
}

describe('TcpFront', () => {
  it('round-trips bytes and counts the connection', async () => {
    const up = await echoServer();
    const front = await startFront({ targetPort: up.port });
    expect(front.port).toBeGreaterThan(0);
    const before = front.lastActivityAt;
    await delay(5);
    const client = connect(front.port);
    await once(client, 'connect');
    client.write('hello');
    expect(await readBytes(client, 5)).toBe('hello');
    expect(front.openConnections).toBe(1);
    expect(front.lastActivityAt).toBeGreaterThan(before);

    const afterHello = front.lastActivityAt;
    await delay(5);
    client.write('x');
    await readBytes(client, 1);
    expect(front.lastActivityAt).toBeGreaterThan(afterHello);

    client.end();
    await closed(client);
    await waitFor(() => front.openConnections === 0);
  });

  it('carries a large transfer with backpressure intact', async () => {
    const up = await echoServer();
    const front = await startFront({ targetPort: up.port });
    const client = connect(front.port);
    const payload = Buffer.alloc(8 * 1024 * 1024);
    for (let i = 0; i < payload.length; i++) payload[i] = (i * 31) & 0xff;
    const chunks: Buffer[] = [];
    client.on('data', (c) => chunks.push(c));
    client.end(payload);
    await once(client, 'end');
    expect(Buffer.concat(chunks).equals(payload)).toBe(true);
  });

  it('holds early bytes during the wake hook and delivers them in order', async () => {
    const up = await echoServer();
    let release!: () => void;
    let calls = 0;
    const front = await startFront({
      targetPort: up.port,
      beforeConnect: () => {
        calls++;
        return new Promise<void>((r) => (release = r));
      },
    });
    const client = connect(front.port);
    await once(client, 'connect');
    client.write('one,');
    client.write('two,');
    await delay(50);
    client.write('three');
    await delay(50);
    expect(calls).toBe(1);
    expect(up.sockets.size).toBe(0); // not dialed before the wake resolves
    expect(front.openConnections).toBe(1);
    release();
    expect(await readBytes(client, 'one,two,three'.length)).toBe('one,two,three');
    expect(up.text()).toBe('one,two,three');
  });

  it('shares one wake between concurrent connects without deadlock', async () => {
    const up = await echoServer();
    let wakes = 0;
    let waking: Promise<void> | undefined;
    const front = await startFront({
      targetPort: up.port,
      beforeConnect: () =>
        (waking ??= (async () => {
          wakes++;
          await delay(50);
        })()),
    });
    const replies = await Promise.all(
      Array.from({ length: 8 }, async (_, i) => {
        const c = connect(front.port);
        c.write(`c${i}`);
        return readBytes(c, 2);
      }),
    );
    expect(replies).toEqual(Array.from({ length: 8 }, (_, i) => `c${i}`));
    expect(wakes).toBe(1);
  });

  it('closes the client when the wake hook rejects, and reports it', async () => {
    const up = await echoServer();
    const errors: [string, string][] = [];
    const front = await startFront({
      targetPort: up.port,
      beforeConnect: () => Promise.reject(new Error('cannot start')),
      onError: (err, phase) => errors.push([phase, err.message]),
    });
    const client = connect(front.port);
    client.write('hi');
    await closed(client);
    expect(errors).toEqual([['wake', 'cannot start']]);
    expect(up.sockets.size).toBe(0);
    await waitFor(() => front.openConnections === 0);
  });

  it('a client that left during the wake is torn down once the wake ends', async () => {
    // While waking the client is not read (its bytes must wait), so its FIN is only seen
    // after the splice: the server then gets the same FIN and the link closes.
    const up = await echoServer();
    let release!: () => void;
    const front = await startFront({
      targetPort: up.port,
      beforeConnect: () => new Promise<void>((r) => (release = r)),
    });
    const client = connect(front.port);
    await waitFor(() => front.openConnections === 1);
    client.destroy();
    await delay(20);
    release();
    await waitFor(() => front.openConnections === 0 && up.sockets.size === 0);
  });

  it('beforeTraffic holds an open connection until it resolves', async () => {
    const up = await echoServer();
    let asleep = false;
    let wake: Promise<void> | undefined;
    let release!: () => void;
    let gateCalls = 0;
    const front = await startFront({
      targetPort: up.port,
      beforeTraffic: () => {
        gateCalls++;
        if (!asleep) return undefined;
        return (wake ??= new Promise<void>((r) => (release = r)).then(() => {
          asleep = false;
          wake = undefined;
        }));
      },
    });
    const client = connect(front.port);
    client.write('awake;');
    expect(await readBytes(client, 6)).toBe('awake;');

    asleep = true;
    client.write('a');
    await delay(30);
    client.write('b');
    client.write('c');
    await delay(50);
    expect(up.text()).toBe('awake;'); // held while asleep
    release();
    expect(await readBytes(client, 3)).toBe('abc');
    expect(up.text()).toBe('awake;abc');
    expect(gateCalls).toBeGreaterThanOrEqual(2);
  });

  it('beforeTraffic rejection closes the connection', async () => {
    const up = await echoServer();
    const errors: string[] = [];
    let fail = false;
    const front = await startFront({
      targetPort: up.port,
      beforeTraffic: () => (fail ? Promise.reject(new Error('no wake')) : undefined),
      onError: (err, phase) => errors.push(`${phase}:${err.message}`),
    });
    const client = connect(front.port);
    client.write('ok');
    await readBytes(client, 2);
    fail = true;
    client.write('lost');
    await closed(client);
    expect(errors).toEqual(['traffic:no wake']);
    await waitFor(() => up.sockets.size === 0 && front.openConnections === 0);
  });

  it('a client FIN with a held last chunk still delivers that chunk first', async () => {
    const up = await echoServer();
    let asleep = true;
    const front = await startFront({
      targetPort: up.port,
      beforeTraffic: () => (asleep ? delay(50).then(() => void (asleep = false)) : undefined),
    });
    const client = connect(front.port);
    const got: Buffer[] = [];
    client.on('data', (c) => got.push(c));
    client.end('last words');
    await once(client, 'end');
    expect(Buffer.concat(got).toString()).toBe('last words');
  });

  it('setTarget sends new connections to the new target; open ones stay', async () => {
    const a = await echoServer();
    const b = await echoServer();
    const front = await startFront({ targetPort: a.port });
    const first = connect(front.port);
    first.write('1');
    await readBytes(first, 1);
    front.setTarget(b.port);
    expect(front.targetPort).toBe(b.port);
    const second = connect(front.port);
    second.write('2');
    await readBytes(second, 1);
    first.write('3');
    await readBytes(first, 1);
    expect(a.text()).toBe('13');
    expect(b.text()).toBe('2');
    expect(() => front.setTarget(0)).toThrow(RangeError);
  });

  it('retries a refused upstream until it appears', async () => {
    const port = await freePort();
    const front = await startFront({ targetPort: port });
    const client = connect(front.port);
    client.write('early');
    await delay(150);
    await echoServer(port);
    expect(await readBytes(client, 5)).toBe('early');
  });

  it('closes the client when the upstream stays refused past the bound', async () => {
    const port = await freePort();
    const errors: string[] = [];
    const front = await startFront({
      targetPort: port,
      connectTimeoutMs: 150,
      onError: (err, phase) => errors.push(`${phase}:${(err as NodeJS.ErrnoException).code}`),
    });
    const started = Date.now();
    const client = connect(front.port);
    await closed(client);
    expect(Date.now() - started).toBeGreaterThanOrEqual(100);
    expect(errors).toEqual(['upstream:ECONNREFUSED']);
  });

  it('propagates half-close: the reply after a client FIN still arrives', async () => {
    // The upstream answers only once the client has finished sending.
    const server = net.createServer({ allowHalfOpen: true }, (sock) => {
      let body = '';
      sock.on('data', (c) => (body += c.toString()));
      sock.on('end', () => setTimeout(() => sock.end(`got ${body}`), 30));
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    cleanups.push(() => new Promise((r) => server.close(r)));
    const front = await startFront({ targetPort: (server.address() as net.AddressInfo).port });
    const client = connect(front.port);
    let reply = '';
    client.on('data', (c) => (reply += c.toString()));
    client.end('question');
    await once(client, 'end');
    expect(reply).toBe('got question');
    await waitFor(() => front.openConnections === 0);
  });

  it('an upstream reset tears the client down', async () => {
    const up = await echoServer();
    const front = await startFront({ targetPort: up.port });
    const client = connect(front.port);
    client.write('x');
    await readBytes(client, 1);
    for (const s of up.sockets) s.resetAndDestroy();
    await closed(client);
    await waitFor(() => front.openConnections === 0);
  });

  it('close() destroys open connections and frees the port', async () => {
    const up = await echoServer();
    const front = new TcpFront({ host: '127.0.0.1', port: 0, targetPort: up.port });
    const port = await front.listen();
    const clients = [connect(port), connect(port)];
    for (const c of clients) c.write('z');
    await Promise.all(clients.map((c) => readBytes(c, 1)));
    expect(front.openConnections).toBe(2);
    await front.close();
    await front.close(); // idempotent
    expect(front.openConnections).toBe(0);
    await Promise.all(clients.map(closed));
    await waitFor(() => up.sockets.size === 0);
    const again = net.createServer().listen(port, '127.0.0.1');
    await once(again, 'listening');
    await new Promise((r) => again.close(r));
  });

  it('close() also ends connections still waiting for their wake', async () => {
    const up = await echoServer();
    const front = new TcpFront({
      host: '127.0.0.1',
      port: 0,
      targetPort: up.port,
      beforeConnect: () => new Promise(() => {}),
    });
    const port = await front.listen();
    const client = connect(port);
    await waitFor(() => front.openConnections === 1);
    await front.close();
    expect(front.openConnections).toBe(0);
    await closed(client);
    expect(up.sockets.size).toBe(0);
  });

  it('surfaces EADDRINUSE from listen()', async () => {
    const up = await echoServer();
    const front = await startFront({ targetPort: up.port });
    const other = new TcpFront({ host: '127.0.0.1', port: front.port, targetPort: up.port });
    await expect(other.listen()).rejects.toMatchObject({ code: 'EADDRINUSE' });
    await other.close();
  });

  describe('TLS passthrough', () => {
    let dir: string;
    let ca: CaFiles;
    beforeAll(async () => {
      dir = await mkdtemp(path.join(os.tmpdir(), 'pier-front-tls-'));
      ca = await ensureCa(dir, ['localhost']);
    });
    afterAll(async () => {
      if (dir) await rm(dir, { recursive: true, force: true });
    });

    it('the client verifies the upstream certificate through the front', async () => {
      const [cert, key, caPem] = await Promise.all(
        [ca.certFile, ca.keyFile, ca.caFile].map((f) => readFile(f)),
      );
      const server = tls.createServer({ cert, key }, (sock) => {
        sock.on('error', () => {});
        sock.on('data', (c) => sock.write(`tls:${c.toString()}`));
      });
      server.listen(0, '127.0.0.1');
      await once(server, 'listening');
      cleanups.push(() => new Promise((r) => server.close(r)));
      const front = await startFront({ targetPort: (server.address() as net.AddressInfo).port });

      const client = tls.connect({
        host: '127.0.0.1',
        port: front.port,
        servername: 'localhost',
        ca: caPem,
      });
      cleanups.push(() => void client.destroy());
      await once(client, 'secureConnect');
      expect(client.authorized).toBe(true);
      client.write('ping');
      const reply = await new Promise<string>((resolve) =>
        client.once('data', (c: Buffer) => resolve(c.toString())),
      );
      expect(reply).toBe('tls:ping');
      client.end();
    });
  });
});
