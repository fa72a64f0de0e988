/**
 * The app proxy's own cost per request: one pier, one real machine of an app `web`
 * (the keep-alive node server of lib/keepalive-machine.ts), and the same keep-alive load
 * (a) straight to the machine's private address, the baseline, and (b) through the plain
 * proxy on pier's listener (`Host: web.127.0.0.1`). Ratio (b) ÷ (a). For scale, also (c) the
 * least a Node proxy does (`bareProxy`, in the bench process), kept in the notes: what
 * Node's HTTP client and server cost before anything of pier's.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import { compare, type Benchmark } from './lib/benchmark.js';
import { fmtMs, round } from './lib/db-samples.js';
import { keepAliveImage } from './lib/keepalive-machine.js';
import { measure } from './lib/load.js';
import { INTERNAL_PORT, PAGE, proxiedGet, withMachineBench } from './lib/machine-pier.js';

const CONNECTIONS = 20;
/** Goals of the proxy task: at least 0.3 of the machine itself, p99 well under 50 ms. */
const MIN_RATIO = 0.3;
const MAX_P99_MS = 50;

/**
 * A proxy with nothing but the forwarding: one kept-alive agent, headers as they come,
 * bodies piped. No routing, no checks, no error answers.
 */
async function bareProxy(host: string, port: number) {
  const agent = new http.Agent({ keepAlive: true });
  const server = http.createServer((req, res) => {
    const up = http.request(
      { host, port, method: req.method, path: req.url, headers: req.headers, agent },
      (upRes) => {
        res.writeHead(upRes.statusCode ?? 502, upRes.headers);
        upRes.pipe(res);
      },
    );
    up.on('error', () => res.destroy());
    req.pipe(up);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      agent.destroy();
    },
  };
}

const benchmark: Benchmark = {
  name: 'proxy-http',
  description: `GET through pier's plain app proxy (Host <app>.127.0.0.1) vs straight to the machine, ${CONNECTIONS} keep-alive connections`,
  async run(settings) {
    return withMachineBench('proxy-http', async (b) => {
      await b.createApp('web');
      const m = await b.createMachine('web', { image: await keepAliveImage(b), memoryMb: 256 });
      const first = await proxiedGet(b.url, 'web');
      if (first.status !== 200 || first.text !== PAGE.content)
        throw new Error(`the proxy answered ${first.status}: ${first.text}`);

      const load = {
        connections: CONNECTIONS,
        durationS: settings.durationS,
        warmupS: settings.warmupS,
      };
      const loadAverage1m = round(os.loadavg()[0]!, 2);
      const direct = await measure({
        ...load,
        url: `http://${m.privateIp}:${INTERNAL_PORT}${PAGE.path}`,
      });
      const bare = await bareProxy(m.privateIp, INTERNAL_PORT);
      const bareRun = await measure({ ...load, url: `${bare.url}${PAGE.path}` }).finally(() =>
        bare.close(),
      );
      const proxy = await measure({
        ...load,
        url: `${b.url}${PAGE.path}`,
        headers: { host: 'web.127.0.0.1' },
      });
      for (const [label, r] of [
        ['machine directly', direct],
        ['bare node proxy', bareRun],
        ['plain proxy', proxy],
      ] as const)
        console.log(
          `  ${label.padEnd(17)} ${Math.round(r.requestsPerSec)} req/s, p99 ${fmtMs(r.p99Ms)}`,
        );

      return compare({
        name: benchmark.name,
        baselineLabel: "the machine's own address (no pier), same server and load",
        connections: CONNECTIONS,
        baseline: direct,
        pier: proxy,
        goal: { minRatio: MIN_RATIO, maxP99Ms: MAX_P99_MS },
        notes: {
          store: b.store,
          loadAverage1m,
          loadAverage1mAfter: round(os.loadavg()[0]!, 2),
          bareProxy_rps: Math.round(bareRun.requestsPerSec),
          bareProxy_p99Ms: round(bareRun.p99Ms, 2),
          bareProxy_ratioOfDirect: round(bareRun.requestsPerSec / direct.requestsPerSec, 3),
          proxy_ratioOfBare: round(proxy.requestsPerSec / bareRun.requestsPerSec, 3),
          pierNodeFlags: b.nodeFlags,
        },
      });
    });
  },
};

export default benchmark;
