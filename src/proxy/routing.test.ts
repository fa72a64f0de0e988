/** Choosing machines and answering failures, over real sockets. */
import type http from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import {
  ScriptedTargets,
  closeAll,
  deadPort,
  front,
  machine,
  send,
  target,
} from './proxy.test-helper.js';

afterEach(closeAll);

/** A machine that answers its own name. */
async function named(name: string) {
  return machine((_req, res) => res.end(name));
}

describe('Host routing', () => {
  it('sends app hosts to the app and leaves the API host and other domains alone', async () => {
    const targets = new ScriptedTargets();
    const m = await named('shop-machine');
    targets.apps.set('shop', [target('m1', m.port)]);
    const { port } = await front(targets);

    expect((await send(port, 'shop.pier.test')).text).toBe('shop-machine');
    expect((await send(port, 'SHOP.pier.test:8080')).text).toBe('shop-machine');
    expect((await send(port, 'pier.test')).text).toBe('api');
    expect((await send(port, 'shop.elsewhere.com')).text).toBe('api');
    expect(targets.resolveCalls).toBe(2);
  });

  it('answers 404 not-found for an unknown app', async () => {
    const { port } = await front(new ScriptedTargets());
    const res = await send(port, 'ghost.pier.test');
    expect(res.status).toBe(404);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.json()).toEqual({ error: 'No app ghost.', code: 'not-found' });
  });

  it('reaches an exposed port at <port>.<app>.<public host>', async () => {
    const targets = new ScriptedTargets();
    const web = await named('web');
    const admin = await named('admin-port');
    targets.apps.set('shop', [target('m1', web.port)]);
    targets.exposed.set('shop:9000', [target('m1', admin.port)]);
    const { port } = await front(targets);

    expect((await send(port, '9000.shop.pier.test')).text).toBe('admin-port');
    expect((await send(port, 'shop.pier.test')).text).toBe('web');
    const notExposed = await send(port, '9001.shop.pier.test');
    expect(notExposed.status).toBe(404);
    expect(notExposed.json().code).toBe('not-found');
  });
});

describe('choosing a machine', () => {
  it('takes turns across running machines', async () => {
    const targets = new ScriptedTargets();
    const a = await named('a');
    const b = await named('b');
    targets.apps.set('shop', [target('ma', a.port), target('mb', b.port)]);
    const { port } = await front(targets);

    const seen: string[] = [];
    for (let i = 0; i < 6; i++) seen.push((await send(port, 'shop.pier.test')).text);
    expect(seen.filter((s) => s === 'a')).toHaveLength(3);
    expect(seen.filter((s) => s === 'b')).toHaveLength(3);
    // Strictly alternating, not merely balanced.
    for (let i = 1; i < seen.length; i++) expect(seen[i]).not.toBe(seen[i - 1]);
    expect(new Set(targets.touched)).toEqual(new Set(['ma', 'mb']));
  });

  it('skips a machine that refuses the connection, body intact', async () => {
    const targets = new ScriptedTargets();
    const ok = await machine((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => res.end(`got ${body}`));
    });
    targets.apps.set('shop', [target('dead', await deadPort()), target('live', ok.port)]);
    const { port, log } = await front(targets);

    for (let i = 0; i < 4; i++) {
      const res = await send(port, 'shop.pier.test', { method: 'POST', body: `n${i}` });
      expect(res.status).toBe(200);
      expect(res.text).toBe(`got n${i}`);
    }
    expect(log.lines.some((l) => l.msg?.includes('did not accept'))).toBe(true);
    expect(targets.touched.every((id) => id === 'live')).toBe(true);
  });

  it('answers 502 upstream-failed when every machine refuses', async () => {
    const targets = new ScriptedTargets();
    targets.apps.set('shop', [target('d1', await deadPort()), target('d2', await deadPort())]);
    const { port } = await front(targets);
    const res = await send(port, 'shop.pier.test');
    expect(res.status).toBe(502);
    expect(res.json().code).toBe('upstream-failed');
  });

  it('wakes a suspended machine and serves the request', async () => {
    const targets = new ScriptedTargets();
    const m = await named('awake');
    targets.apps.set('shop', [target('m1', m.port, 'suspended')]);
    targets.wakeImpl = async (t) => {
      await new Promise((r) => setTimeout(r, 100));
      t.state = 'running';
    };
    const { port } = await front(targets);

    // Concurrent requests share one wake.
    const answers = await Promise.all([1, 2, 3].map(() => send(port, 'shop.pier.test')));
    expect(answers.map((a) => a.text)).toEqual(['awake', 'awake', 'awake']);
    expect(targets.woken).toEqual(['m1']);
    // Running now: no more waking.
    await send(port, 'shop.pier.test');
    expect(targets.woken).toEqual(['m1']);
  });

  it('wakes a sleeper when the running machines refuse', async () => {
    const targets = new ScriptedTargets();
    const m = await named('sleeper');
    targets.apps.set('shop', [target('dead', await deadPort()), target('m1', m.port, 'suspended')]);
    const { port } = await front(targets);
    expect((await send(port, 'shop.pier.test')).text).toBe('sleeper');
    expect(targets.woken).toEqual(['m1']);
  });

  it('connects to the address a woken machine comes back on', async () => {
    const targets = new ScriptedTargets();
    const m = await named('moved');
    const t = target('m1', await deadPort(), 'stopped');
    targets.apps.set('shop', [t]);
    targets.wakeImpl = async () => {
      targets.apps.set('shop', [target('m1', m.port)]);
    };
    const { port } = await front(targets);
    expect((await send(port, 'shop.pier.test')).text).toBe('moved');
  });

  it('asks again when a machine of a kept list refuses, and tries the machines that are new', async () => {
    const targets = new ScriptedTargets();
    const m = await named('new');
    const dead = target('gone', await deadPort());
    targets.apps.set('shop', [dead]);
    const forgotten: string[] = [];
    targets.forget = (app) => {
      forgotten.push(app);
      targets.apps.set('shop', [dead, target('m2', m.port)]);
    };
    const { port } = await front(targets);
    expect((await send(port, 'shop.pier.test')).text).toBe('new');
    expect(forgotten).toEqual(['shop']);
    // Tried once only: the fresh list's known machine is not asked a second time.
    expect(targets.resolveCalls).toBe(2);
  });

  it('answers 503 unavailable when the app has no machine', async () => {
    const targets = new ScriptedTargets();
    targets.apps.set('shop', []);
    const { port } = await front(targets);
    const res = await send(port, 'shop.pier.test');
    expect(res.status).toBe(503);
    expect(res.json()).toEqual({ error: 'The app has no running machine.', code: 'unavailable' });
  });

  it('answers 503 unavailable when the wake fails', async () => {
    const targets = new ScriptedTargets();
    targets.apps.set('shop', [target('m1', await deadPort(), 'stopped')]);
    targets.wakeImpl = async () => {
      throw new Error('stopped machines stay stopped');
    };
    const { port } = await front(targets);
    const res = await send(port, 'shop.pier.test');
    expect(res.status).toBe(503);
    expect(res.json().code).toBe('unavailable');
    expect(targets.woken).toEqual(['m1']);
  });

  it('answers 503 when looking the app up fails', async () => {
    const targets = new ScriptedTargets();
    targets.resolve = async () => {
      throw new Error('database down');
    };
    const { port } = await front(targets);
    const res = await send(port, 'shop.pier.test');
    expect(res.status).toBe(503);
    expect(res.json().code).toBe('unavailable');
  });
});

describe('timeouts and broken machines', () => {
  it('answers 504 upstream-timeout when the machine does not answer', async () => {
    const targets = new ScriptedTargets();
    const silent = await machine(() => undefined);
    targets.apps.set('shop', [target('m1', silent.port)]);
    const { port } = await front(targets, { responseTimeoutMs: 200 });
    const started = Date.now();
    const res = await send(port, 'shop.pier.test');
    expect(res.status).toBe(504);
    expect(res.json().code).toBe('upstream-timeout');
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('answers 502 when the machine hangs up without an answer', async () => {
    const targets = new ScriptedTargets();
    const rude = await machine((req) => req.socket.destroy());
    targets.apps.set('shop', [target('m1', rude.port)]);
    const { port } = await front(targets);
    const res = await send(port, 'shop.pier.test');
    expect(res.status).toBe(502);
    expect(res.json().code).toBe('upstream-failed');
  });

  it('cuts the client off when the machine dies mid-answer', async () => {
    const targets = new ScriptedTargets();
    const dying = await machine((req, res) => {
      res.writeHead(200, { 'content-length': '100' });
      res.write('partial');
      setTimeout(() => req.socket.destroy(), 20);
    });
    targets.apps.set('shop', [target('m1', dying.port)]);
    const { port } = await front(targets);
    await expect(send(port, 'shop.pier.test')).rejects.toThrow();
  });

  it('retries a GET whose kept-alive connection the machine drops on reuse', async () => {
    const targets = new ScriptedTargets();
    let connections = 0;
    const m = await oneAnswerPerConnection((_req, res) => res.end('fresh'));
    m.server.on('connection', () => connections++);
    targets.apps.set('shop', [target('m1', m.port)]);
    const { port } = await front(targets);
    for (let i = 0; i < 3; i++) expect((await send(port, 'shop.pier.test')).text).toBe('fresh');
    expect(connections).toBe(3);
  });

  it('retries on a new connection, not on another kept-alive one the machine also dropped', async () => {
    const targets = new ScriptedTargets();
    // Two connections are kept alive (two requests at once, each answered late); the
    // machine then drops both on reuse. A retry through the pool would take the second
    // dropped connection and answer 502; only a new connection gets the answer.
    const m = await oneAnswerPerConnection((_req, res) => setTimeout(() => res.end('fresh'), 50));
    targets.apps.set('shop', [target('m1', m.port)]);
    const { port } = await front(targets);
    const both = await Promise.all([send(port, 'shop.pier.test'), send(port, 'shop.pier.test')]);
    expect(both.map((r) => r.text)).toEqual(['fresh', 'fresh']);
    const third = await send(port, 'shop.pier.test');
    expect(third.status).toBe(200);
    expect(third.text).toBe('fresh');
  });

  it('does not replay a request with a body on a dropped connection', async () => {
    const targets = new ScriptedTargets();
    const m = await oneAnswerPerConnection((req, res) => {
      req.resume();
      req.on('end', () => res.end('ok'));
    });
    targets.apps.set('shop', [target('m1', m.port)]);
    const { port } = await front(targets);
    expect((await send(port, 'shop.pier.test', { method: 'POST', body: 'x' })).text).toBe('ok');
    const second = await send(port, 'shop.pier.test', { method: 'POST', body: 'y' });
    expect(second.status).toBe(502);
  });
});

/**
 * A machine whose every connection serves one answer (`handler`'s), then drops on the
 * next request: the race of a machine closing an idle connection just as the proxy reuses
 * it, made certain.
 */
function oneAnswerPerConnection(handler: http.RequestListener) {
  return machine((req, res) => {
    const socket = req.socket as typeof req.socket & { served?: boolean };
    if (socket.served) {
      socket.destroy();
      return;
    }
    socket.served = true;
    handler(req, res);
  });
}
