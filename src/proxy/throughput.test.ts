/**
 * A rough cost figure of the proxy, printed rather than asserted tightly: the same small
 * requests straight to the machine and through the proxy, in the same run.
 */
import http from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { ScriptedTargets, closeAll, front, machine, target } from './proxy.test-helper.js';

afterEach(closeAll);

const REQUESTS = 1_000;
const CONCURRENCY = 16;

/** Runs REQUESTS GETs over kept-alive connections, CONCURRENCY at a time; requests/s. */
async function run(port: number, host: string): Promise<number> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  let next = 0;
  const one = (): Promise<void> =>
    new Promise((resolve, reject) => {
      http
        .get({ host: '127.0.0.1', port, path: '/', headers: { host }, agent }, (res) => {
          if (res.statusCode !== 200) reject(new Error(`status ${res.statusCode}`));
          res.resume();
          res.on('end', resolve);
        })
        .on('error', reject);
    });
  const worker = async (): Promise<void> => {
    while (next++ < REQUESTS) await one();
  };
  const started = process.hrtime.bigint();
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  agent.destroy();
  return REQUESTS / seconds;
}

describe('throughput', () => {
  it('measures small requests direct and through the proxy', async () => {
    const targets = new ScriptedTargets();
    const m = await machine((_req, res) => {
      res.setHeader('content-type', 'text/plain');
      res.end('hello');
    });
    let connections = 0;
    m.server.on('connection', () => connections++);
    targets.apps.set('app', [target('m1', m.port)]);
    const { port } = await front(targets);

    // Warm both paths (JIT, kept-alive connections), then measure.
    await run(m.port, 'app.pier.test');
    await run(port, 'app.pier.test');
    const warmConnections = connections;
    const direct = await run(m.port, 'app.pier.test');
    const proxied = await run(port, 'app.pier.test');
    console.log(
      `throughput (${REQUESTS} requests, ${CONCURRENCY} at a time): direct ${direct.toFixed(0)}/s, ` +
        `through the proxy ${proxied.toFixed(0)}/s (${((proxied / direct) * 100).toFixed(0)}%)`,
    );
    // A loose floor (the figures are noisy in one process): only a collapse fails here.
    expect(proxied).toBeGreaterThan(direct / 20);
    // The proxy keeps its connections to the machine alive across requests.
    expect(connections - warmConnections).toBeLessThanOrEqual(2 * CONCURRENCY);
  });
});
