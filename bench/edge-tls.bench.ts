/**
 * The TLS edge (issue 17): one pier with `PIER_TLS_LISTEN`, pebble and a zone proven
 * (wildcard through DNS-01 answered by pier's own DNS), one real machine of an app. With
 * the same keep-alive load, requests/s and p99 (a) straight to the machine's private
 * address, (b) through the plain proxy (`Host: <app>.127.0.0.1`) — the baseline — and
 * (c) through HTTPS on the edge (`<app>.<zone>`, SNI). Ratio (c) ÷ (b), goal ≥ 0.8.
 *
 * Then new names below the proven zone: for each sample a new app and its machine
 * (untimed), then the time until `<new>.<zone>` first answers the machine's page over
 * HTTPS with a certificate that verifies against pebble's root (goal < 1 s: no new
 * certificate is needed). The time from the app's creation is kept beside it.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort, startDnsServer, startPebble } from '../test/edge/acme-servers.js';
import { compare, type Benchmark } from './lib/benchmark.js';
import { fmtMs, percentile, round } from './lib/db-samples.js';
import { keepAliveImage } from './lib/keepalive-machine.js';
import { measure } from './lib/load.js';
import {
  INTERNAL_PORT,
  MACHINE_SAMPLES,
  PAGE,
  firstOk,
  withMachineBench,
  type MachinePier,
} from './lib/machine-pier.js';

const CONNECTIONS = 20;
const ZONE = 'bench.test';
const EDGE = 'edge.pier.test';
/** The issue's goals: HTTPS costs at most 20 % of the plain proxy; a new name in < 1 s. */
const MIN_RATIO = 0.8;
const NEW_NAME_GOAL_MS = 1000;

/** A GET of PAGE through the edge as `host` on a new connection, verifying against `ca`. */
function edgeGet(port: number, host: string, ca: string) {
  return new Promise<{ status: number; text: string }>((resolve, reject) => {
    https
      .get(
        {
          host: '127.0.0.1',
          port,
          path: PAGE.path,
          servername: host,
          headers: { host },
          ca,
          agent: false,
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (text += c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
        },
      )
      .on('error', reject);
  });
}

/** Claims ZONE, publishes its delegation and waits for the wildcard (`cert_issued`). */
async function proveZone(b: MachinePier, setCname: (h: string, t: string) => Promise<void>) {
  const claimed = await b.api('POST', '/v1/domains/zones', { zone: ZONE }, 201);
  await setCname(`_acme-challenge.${ZONE}`, `${claimed.acmeLabel}.acme.${EDGE}`);
  await b.api('POST', `/v1/domains/zones/${ZONE}/check`);
  const deadline = Date.now() + 120_000;
  for (;;) {
    const z = await b.api('GET', `/v1/domains/zones/${ZONE}`);
    if (z.status === 'cert_issued') return;
    if (Date.now() > deadline) throw new Error(`zone never issued: ${JSON.stringify(z)}`);
    await sleep(100);
  }
}

const benchmark: Benchmark = {
  name: 'edge-tls',
  description: `HTTPS through the TLS edge (SNI, zone wildcard) to a machine vs the plain proxy vs the machine itself, ${CONNECTIONS} keep-alive connections; a new name below a proven zone → first verified HTTPS answer`,
  async run(settings) {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'pier-bench-edge-'));
    const dns = await startDnsServer();
    try {
      const [apiPort, dnsPort, tlsPort] = [await freePort(), await freePort(), await freePort()];
      // Pebble resolves through pier's DNS, which forwards what is not its own.
      const pebble = await startPebble(dir, {
        dnsServer: `127.0.0.1:${dnsPort}`,
        httpPort: apiPort,
        tlsPort,
      });
      try {
        const env = {
          PIER_TLS_LISTEN: `127.0.0.1:${tlsPort}`,
          PIER_DNS_LISTEN: `127.0.0.1:${dnsPort}`,
          PIER_EDGE_ADDRESS: EDGE,
          PIER_ACME_DIRECTORY_URL: pebble.directoryUrl,
          PIER_ACME_CA_FILE: pebble.caFile,
          PIER_DNS_RESOLVER: dns.address,
        };
        return await withMachineBench(
          'edge-tls',
          async (b) => {
            const zoneStarted = performance.now();
            await proveZone(b, dns.setCname);
            const zoneMs = performance.now() - zoneStarted;
            console.log(`  zone ${ZONE} proven, wildcard issued: ${fmtMs(zoneMs)}`);
            const root = await pebble.root();

            await b.createApp('web');
            const m = await b.createMachine('web', {
              image: await keepAliveImage(b),
              memoryMb: 256,
            });
            const secureHost = `web.${ZONE}`;
            const verified = await edgeGet(tlsPort, secureHost, root);
            if (verified.status !== 200 || verified.text !== PAGE.content)
              throw new Error(`edge answered ${verified.status}: ${verified.text}`);

            const load = {
              connections: CONNECTIONS,
              durationS: settings.durationS,
              warmupS: settings.warmupS,
            };
            const direct = await measure({
              ...load,
              url: `http://${m.privateIp}:${INTERNAL_PORT}${PAGE.path}`,
            });
            const proxy = await measure({
              ...load,
              url: `${b.url}${PAGE.path}`,
              headers: { host: 'web.127.0.0.1' },
            });
            const edge = await measure({
              ...load,
              url: `https://127.0.0.1:${tlsPort}${PAGE.path}`,
              headers: { host: secureHost },
              servername: secureHost,
            });
            for (const [label, r] of [
              ['machine directly', direct],
              ['plain proxy', proxy],
              ['HTTPS edge', edge],
            ] as const)
              console.log(
                `  ${label.padEnd(17)} ${Math.round(r.requestsPerSec)} req/s, p99 ${fmtMs(r.p99Ms)}`,
              );

            // New names below the proven zone: no certificate to get, only the route.
            const fromMachine: number[] = [];
            const fromApp: number[] = [];
            for (let i = 0; i < MACHINE_SAMPLES; i++) {
              const app = `new${i}`;
              await b.createApp(app);
              const appAt = performance.now();
              await b.createMachine(app);
              const started = performance.now();
              await firstOk(() => edgeGet(tlsPort, `${app}.${ZONE}`, root));
              const done = performance.now();
              fromMachine.push(done - started);
              fromApp.push(done - appAt);
              console.log(
                `  ${app}.${ZONE}: ${fmtMs(done - started)} after its machine, ${fmtMs(done - appAt)} after the app`,
              );
            }
            const sorted = [...fromMachine].sort((x, y) => x - y);
            const worst = sorted[sorted.length - 1]!;
            console.log(
              `  new name → verified HTTPS answer: median ${fmtMs(percentile(sorted, 50))}, ` +
                `worst ${fmtMs(worst)} (goal < ${fmtMs(NEW_NAME_GOAL_MS)}: ${worst < NEW_NAME_GOAL_MS ? 'met' : 'NOT met'})`,
            );

            return compare({
              name: benchmark.name,
              baselineLabel: 'the plain proxy (Host <app>.127.0.0.1) to the same machine',
              connections: CONNECTIONS,
              baseline: proxy,
              pier: edge,
              goal: { minRatio: MIN_RATIO, maxP99Ms: Infinity },
              notes: {
                store: b.store,
                loadAverage1m: round(os.loadavg()[0]!, 2),
                direct_rps: Math.round(direct.requestsPerSec),
                direct_p99Ms: round(direct.p99Ms, 2),
                proxy_ratioOfDirect: round(proxy.requestsPerSec / direct.requestsPerSec, 3),
                https_ratioOfDirect: round(edge.requestsPerSec / direct.requestsPerSec, 3),
                zoneIssueMs: round(zoneMs),
                newName_medianMs: round(percentile(sorted, 50)),
                newName_worstMs: round(worst),
                newName_fromApp_worstMs: round(Math.max(...fromApp)),
                newName_goalMet: worst < NEW_NAME_GOAL_MS ? 'yes' : 'no',
              },
            });
          },
          { port: apiPort, env },
        );
      } finally {
        await pebble.close();
      }
    } finally {
      await dns.close();
      await rm(dir, { recursive: true, force: true });
    }
  },
};

export default benchmark;
