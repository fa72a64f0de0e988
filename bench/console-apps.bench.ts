/**
 * The console's apps page (`GET /console/apps`, signed in) for an organization with 100
 * apps, against the plain API call that feeds it (`GET /v1/apps` with the same console
 * key). The page makes that call and `GET /console/api/me` (who is signed in), in
 * process, then renders 100 app sections (each loads its machines itself as it scrolls
 * into view, one request per app, not measured here): the ratio is what the session, the
 * second call and the rendering cost on top of the one call; the goal is the page's time
 * (p99 under 100 ms).
 */
import { compare, type Benchmark } from './lib/benchmark.js';
import { measure } from './lib/load.js';
import { call, createBenchOrg, startBenchPlatform } from './lib/platform.js';

const APPS = 100;
/** A few people loading the page at once, not a load test: the goal is page latency. */
const CONNECTIONS = 4;
const PASSWORD = 'bench console password';

const benchmark: Benchmark = {
  name: 'console-apps',
  description: `GET /console/apps with ${APPS} apps vs GET /v1/apps, ${CONNECTIONS} connections`,
  async run({ durationS, warmupS }) {
    const pier = await startBenchPlatform();
    try {
      const org = await createBenchOrg(pier);
      const email = 'bench@example.com';
      await call(
        pier.url,
        pier.operatorToken,
        'POST',
        `/admin/v1/orgs/${org.id}/users`,
        { email, password: PASSWORD, role: 'admin' },
        201,
      );
      for (let i = 0; i < APPS; i++) {
        await call(
          pier.url,
          org.token,
          'POST',
          '/v1/apps',
          { name: `bench-app-${i}-${org.id.slice(-6)}` },
          201,
        );
      }
      const res = await fetch(`${pier.url}/console/api/sign-in`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email, password: PASSWORD }),
      });
      const { token } = (await res.json()) as { token: string };
      const page = await fetch(`${pier.url}/console/apps`, {
        headers: { cookie: `pier_console=${token}` },
      });
      const html = await page.text();
      if (page.status !== 200 || (html.match(/class="app"/g) ?? []).length !== APPS) {
        throw new Error(`GET /console/apps answered ${page.status} without the ${APPS} apps`);
      }

      const load = { connections: CONNECTIONS, durationS, warmupS };
      const baseline = await measure({
        ...load,
        url: `${pier.url}/v1/apps`,
        headers: { authorization: `Bearer ${token}` },
      });
      const measured = await measure({
        ...load,
        url: `${pier.url}/console/apps`,
        headers: { cookie: `pier_console=${token}` },
      });
      return compare({
        name: benchmark.name,
        baselineLabel: 'GET /v1/apps',
        connections: CONNECTIONS,
        baseline,
        pier: measured,
        goal: { minRatio: 0.2, maxP99Ms: 100 },
        notes: { store: pier.store, apps: APPS, pageBytes: Buffer.byteLength(html) },
      });
    } finally {
      await pier.close();
    }
  },
};

export default benchmark;
