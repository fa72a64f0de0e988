/** WebSocket upgrades tunnel to the machine; failures answer JSON on the raw socket. */
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import http from 'node:http';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { ScriptedTargets, closeAll, deadPort, front, listen, target } from './proxy.test-helper.js';

afterEach(closeAll);

const GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';

/** A text frame of a short payload; clients mask theirs (RFC 6455 5.3). */
function frame(text: string, masked: boolean): Buffer {
  const payload = Buffer.from(text);
  if (!masked) return Buffer.concat([Buffer.from([0x81, payload.length]), payload]);
  const mask = Buffer.from([1, 2, 3, 4]);
  const body = Buffer.from(payload.map((b, i) => b ^ mask[i % 4]!));
  return Buffer.concat([Buffer.from([0x81, 0x80 | payload.length]), mask, body]);
}

/** The payload of one short frame, unmasking if needed. */
function unframe(data: Buffer): string {
  const masked = (data[1]! & 0x80) !== 0;
  const length = data[1]! & 0x7f;
  if (!masked) return data.subarray(2, 2 + length).toString();
  const mask = data.subarray(2, 6);
  return Buffer.from(data.subarray(6, 6 + length).map((b, i) => b ^ mask[i % 4]!)).toString();
}

/** A machine that accepts WebSockets and echoes each frame, prefixed with `name:`. */
async function wsMachine(name: string) {
  const seen: http.IncomingHttpHeaders[] = [];
  const server = http.createServer((_req, res) => res.end('plain'));
  server.on('upgrade', (req, socket) => {
    seen.push(req.headers);
    if (req.headers.upgrade?.toLowerCase() !== 'websocket') {
      socket.end('HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
      return;
    }
    const accept = createHash('sha1')
      .update(String(req.headers['sec-websocket-key']) + GUID)
      .digest('base64');
    socket.write(
      'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
        `Sec-WebSocket-Accept: ${accept}\r\n\r\n`,
    );
    socket.on('data', (data: Buffer) => socket.write(frame(`${name}:${unframe(data)}`, false)));
  });
  return { port: await listen(server), seen };
}

/** A raw client: sends the handshake, resolves with the socket and the answer's head. */
async function handshake(port: number, host: string, upgrade = 'websocket') {
  const socket = net.connect(port, '127.0.0.1');
  await once(socket, 'connect');
  const key = Buffer.from('0123456789abcdef').toString('base64');
  socket.write(
    `GET /chat?room=1 HTTP/1.1\r\nHost: ${host}\r\nUpgrade: ${upgrade}\r\nConnection: Upgrade\r\n` +
      `Sec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n\r\n`,
  );
  let buffered = Buffer.alloc(0);
  while (!buffered.includes('\r\n\r\n')) {
    const [data] = (await once(socket, 'data')) as [Buffer];
    buffered = Buffer.concat([buffered, data]);
  }
  const end = buffered.indexOf('\r\n\r\n') + 4;
  const head = buffered.subarray(0, end).toString();
  const rest = buffered.subarray(end);
  return { socket, head, rest, key };
}

async function readAll(socket: net.Socket, already: Buffer): Promise<string> {
  const chunks = [already];
  socket.on('data', (c: Buffer) => chunks.push(c));
  await once(socket, 'close');
  return Buffer.concat(chunks).toString();
}

describe('WebSocket upgrades', () => {
  it('tunnels the handshake and frames both ways', async () => {
    const targets = new ScriptedTargets();
    const m = await wsMachine('m1');
    targets.apps.set('chat', [target('m1', m.port)]);
    const { port } = await front(targets);

    const { socket, head, key } = await handshake(port, 'chat.pier.test');
    expect(head).toMatch(/^HTTP\/1\.1 101 /);
    const accept = createHash('sha1')
      .update(key + GUID)
      .digest('base64');
    expect(head).toContain(`Sec-WebSocket-Accept: ${accept}`);

    for (const text of ['hello', 'again']) {
      socket.write(frame(text, true));
      const [data] = (await once(socket, 'data')) as [Buffer];
      expect(unframe(data)).toBe(`m1:${text}`);
    }
    const headers = m.seen[0]!;
    expect(headers.host).toBe('chat.pier.test');
    expect(headers.upgrade).toBe('websocket');
    expect(headers.connection).toBe('Upgrade');
    expect(headers['x-forwarded-for']).toBe('127.0.0.1');
    expect(headers['x-forwarded-proto']).toBe('http');
    expect(targets.touched).toContain('m1');
    socket.destroy();
  });

  it('takes turns across machines and skips a dead one', async () => {
    const targets = new ScriptedTargets();
    const a = await wsMachine('a');
    const b = await wsMachine('b');
    targets.apps.set('chat', [
      target('a', a.port),
      target('dead', await deadPort()),
      target('b', b.port),
    ]);
    const { port } = await front(targets);

    const names: string[] = [];
    for (let i = 0; i < 4; i++) {
      const { socket, head } = await handshake(port, 'chat.pier.test');
      expect(head).toMatch(/^HTTP\/1\.1 101 /);
      socket.write(frame('x', true));
      const [data] = (await once(socket, 'data')) as [Buffer];
      names.push(unframe(data).split(':')[0]!);
      socket.destroy();
    }
    expect(names.sort()).toEqual(['a', 'a', 'b', 'b']);
  });

  it('wakes a suspended machine for an upgrade', async () => {
    const targets = new ScriptedTargets();
    const m = await wsMachine('m1');
    targets.apps.set('chat', [target('m1', m.port, 'suspended')]);
    const { port } = await front(targets);
    const { socket, head } = await handshake(port, 'chat.pier.test');
    expect(head).toMatch(/^HTTP\/1\.1 101 /);
    expect(targets.woken).toEqual(['m1']);
    socket.destroy();
  });

  it("passes the machine's refusal through", async () => {
    const targets = new ScriptedTargets();
    const m = await wsMachine('m1');
    targets.apps.set('chat', [target('m1', m.port)]);
    const { port } = await front(targets);
    const { head } = await handshake(port, 'chat.pier.test', 'not-websocket');
    expect(head).toMatch(/^HTTP\/1\.1 400 /);
  });

  it('answers JSON errors on the raw socket', async () => {
    const targets = new ScriptedTargets();
    targets.apps.set('empty', []);
    const silent = net.createServer(() => undefined);
    targets.apps.set('silent', [target('s1', await listen(silent))]);
    const hangup = net.createServer((s) => s.once('data', () => s.end()));
    targets.apps.set('hangup', [target('h1', await listen(hangup))]);
    const { port } = await front(targets, { responseTimeoutMs: 200 });

    const cases: [string, number, string][] = [
      ['ghost.pier.test', 404, 'not-found'],
      ['empty.pier.test', 503, 'unavailable'],
      ['silent.pier.test', 504, 'upstream-timeout'],
      ['hangup.pier.test', 502, 'upstream-failed'],
    ];
    for (const [host, status, code] of cases) {
      const { socket, head, rest } = await handshake(port, host);
      expect(head).toMatch(new RegExp(`^HTTP/1\\.1 ${status} `));
      const body = await readAll(socket, rest);
      expect(JSON.parse(body).code).toBe(code);
    }
  });

  it('closes the client when the machine closes, and the machine when the client does', async () => {
    const targets = new ScriptedTargets();
    const machineSockets: net.Socket[] = [];
    const server = http.createServer();
    server.on('upgrade', (_req, socket: net.Socket) => {
      machineSockets.push(socket);
      socket.write(
        'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n',
      );
    });
    targets.apps.set('chat', [target('m1', await listen(server))]);
    const { port, proxy } = await front(targets);

    const first = await handshake(port, 'chat.pier.test');
    machineSockets[0]!.end();
    await once(first.socket, 'close');

    const second = await handshake(port, 'chat.pier.test');
    second.socket.destroy();
    // (The machine's socket is half-open by Node's default for servers: 'end' is the signal.)
    await once(machineSockets[1]!, 'end');

    // Shutting the proxy down ends tunnels still open.
    const third = await handshake(port, 'chat.pier.test');
    proxy.close();
    await once(third.socket, 'close');
  });
});
