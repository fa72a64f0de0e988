/** Large bodies stream through both ways, with backpressure, and nothing piles up. */
import { createHash } from 'node:crypto';
import http from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { ScriptedTargets, closeAll, front, machine, target } from './proxy.test-helper.js';

afterEach(closeAll);

const MB = 1024 * 1024;
const chunk = Buffer.alloc(64 * 1024, 7);

function write(stream: NodeJS.WritableStream, data: Buffer): Promise<void> {
  return stream.write(data) ? Promise.resolve() : new Promise((r) => stream.once('drain', r));
}

describe('streaming', () => {
  it('echoes 20 MB while the upload is still going (no buffering either way)', async () => {
    const targets = new ScriptedTargets();
    const m = await machine((req, res) => req.pipe(res));
    targets.apps.set('echo', [target('m1', m.port)]);
    const { port } = await front(targets);

    const sent = createHash('sha256');
    const got = createHash('sha256');
    let received = 0;
    let firstEcho: () => void = () => undefined;
    const echoed = new Promise<void>((r) => (firstEcho = r));

    const req = http.request({
      host: '127.0.0.1',
      port,
      method: 'POST',
      path: '/',
      headers: { host: 'echo.pier.test', 'content-type': 'application/octet-stream' },
      agent: false,
    });
    const done = new Promise<number>((resolve, reject) => {
      req.on('response', (res) => {
        res.on('data', (c: Buffer) => {
          received += c.length;
          got.update(c);
          firstEcho();
        });
        res.on('end', () => resolve(res.statusCode ?? 0));
        res.on('error', reject);
      });
      req.on('error', reject);
    });

    // One MB, then wait for its echo: a proxy that held the request (or the answer)
    // back until the upload ended would never answer, and this test would time out.
    for (let i = 0; i < 16; i++) {
      sent.update(chunk);
      await write(req, chunk);
    }
    await echoed;
    const echoedBeforeEnd = received;
    for (let total = MB; total < 20 * MB; total += chunk.length) {
      sent.update(chunk);
      await write(req, chunk);
    }
    req.end();

    expect(await done).toBe(200);
    expect(echoedBeforeEnd).toBeGreaterThan(0);
    expect(received).toBe(20 * MB);
    expect(got.digest('hex')).toBe(sent.digest('hex'));
  });

  it('holds the machine back while the client does not read (backpressure)', async () => {
    const targets = new ScriptedTargets();
    const total = 64 * MB;
    let pushed = 0;
    const m = await machine(async (_req, res) => {
      res.writeHead(200, { 'content-length': String(total) });
      for (; pushed < total; pushed += chunk.length) await write(res, chunk);
      res.end();
    });
    targets.apps.set('big', [target('m1', m.port)]);
    const { port } = await front(targets);

    const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
      http
        .get({ host: '127.0.0.1', port, headers: { host: 'big.pier.test' }, agent: false }, resolve)
        .on('error', reject);
    });
    res.pause();
    await new Promise((r) => setTimeout(r, 500));
    // Only socket buffers (kernel and stream high-water marks) may be between the
    // machine and the paused client; a buffering proxy would have taken all 64 MB.
    const inFlight = pushed;
    let received = 0;
    res.on('data', (c: Buffer) => (received += c.length));
    res.resume();
    await new Promise((r) => res.on('end', r));

    expect(received).toBe(total);
    expect(inFlight).toBeLessThan(24 * MB);
    console.log(
      `backpressure: the machine got ${(inFlight / MB).toFixed(1)} MB ahead of a paused client`,
    );
  });

  it('times only the wait for the answer, not a slow upload or a long answer', async () => {
    const targets = new ScriptedTargets();
    const m = await machine((req, res) => {
      req.pipe(res, { end: false });
      // The answer goes on well past the response timeout after the upload ended.
      req.on('end', () => setTimeout(() => res.end('|tail'), 400));
    });
    targets.apps.set('slow', [target('m1', m.port)]);
    const { port } = await front(targets, { responseTimeoutMs: 200 });

    const body = await new Promise<string>((resolve, reject) => {
      const req = http.request({
        host: '127.0.0.1',
        port,
        method: 'POST',
        headers: { host: 'slow.pier.test' },
        agent: false,
      });
      req.on('response', (res) => {
        let text = '';
        res.on('data', (c) => (text += c));
        res.on('end', () => resolve(text));
        res.on('error', reject);
      });
      req.on('error', reject);
      // Six pieces 100 ms apart: 500 ms of upload against a 200 ms response timeout.
      let n = 0;
      const tick = setInterval(() => {
        req.write(`p${n}`);
        if (++n === 6) {
          clearInterval(tick);
          req.end();
        }
      }, 100);
    });
    expect(body).toBe('p0p1p2p3p4p5|tail');
  });

  it('downloads 20 MB intact', async () => {
    const targets = new ScriptedTargets();
    const body = Buffer.alloc(20 * MB);
    for (let i = 0; i < body.length; i += 4096) body.writeUInt32BE(i, i);
    const m = await machine((_req, res) => res.end(body));
    targets.apps.set('dl', [target('m1', m.port)]);
    const { port } = await front(targets);

    const digest = await new Promise<string>((resolve, reject) => {
      http
        .get(
          { host: '127.0.0.1', port, headers: { host: 'dl.pier.test' }, agent: false },
          (res) => {
            const h = createHash('sha256');
            res.on('data', (c: Buffer) => h.update(c));
            res.on('end', () => resolve(h.digest('hex')));
          },
        )
        .on('error', reject);
    });
    expect(digest).toBe(createHash('sha256').update(body).digest('hex'));
  });
});
