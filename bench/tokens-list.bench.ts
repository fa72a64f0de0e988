/**
 * Authenticated `GET /v1/tokens` against a bare Fastify route that answers the same JSON
 * from memory. The ratio is what pier's request path costs on top of Fastify itself: auth
 * hooks, the key listing query, response validation and serialization, observability.
 */
import Fastify from 'fastify';
import { compare, type Benchmark } from './lib/benchmark.js';
import { measure } from './lib/load.js';
import { call, createBenchOrg, startBenchPlatform } from './lib/platform.js';

const CONNECTIONS = 50;
/** Keys made on top of the organization's first one, so the listing has a realistic size. */
const EXTRA_KEYS = 5;

const benchmark: Benchmark = {
  name: 'tokens-list',
  description: `authenticated GET /v1/tokens vs a bare Fastify route, ${CONNECTIONS} connections`,
  async run({ durationS, warmupS }) {
    const pier = await startBenchPlatform();
    try {
      const org = await createBenchOrg(pier, EXTRA_KEYS);
      const headers = { authorization: `Bearer ${org.token}` };
      // The baseline answers exactly what pier answers, so both serialize the same bytes.
      const answer = await call(pier.url, org.token, 'GET', '/v1/tokens');
      if (!Array.isArray(answer) || answer.length !== EXTRA_KEYS + 1) {
        throw new Error(`GET /v1/tokens listed ${JSON.stringify(answer)}`);
      }

      const bare = Fastify({ logger: false });
      bare.get('/v1/tokens', async () => answer);
      const bareUrl = await bare.listen({ host: '127.0.0.1', port: 0 });
      const load = { connections: CONNECTIONS, durationS, warmupS };
      const baseline = await measure({ ...load, url: `${bareUrl}/v1/tokens` }).finally(() =>
        bare.close(),
      );
      const measured = await measure({ ...load, url: `${pier.url}/v1/tokens`, headers });

      return compare({
        name: benchmark.name,
        baselineLabel: 'bare Fastify',
        connections: CONNECTIONS,
        baseline,
        pier: measured,
        goal: { minRatio: 0.6, maxP99Ms: 5 },
        notes: {
          store: pier.store,
          keysListed: answer.length,
          bodyBytes: Buffer.byteLength(JSON.stringify(answer)),
        },
      });
    } finally {
      await pier.close();
    }
  },
};

export default benchmark;
