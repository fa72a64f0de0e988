/**
 * An MCP `tools/call` (`app_get`, a 2026-07-28 request with its envelope and headers)
 * against the very route it stands for, `GET /v1/apps/:name`, on the same pier with the
 * same key and load. The ratio is what the MCP path adds on top of the route: the
 * endpoint's checks, the tool-call count (a place from this replica's lease, and a lease
 * from PostgreSQL when it runs out), the JSON-RPC message (this plain call takes the fast
 * path of mcp/fast-call.ts) and the in-process request to the route (which does its own
 * auth, judge and read).
 * Goal (issue 15): the MCP path costs at most 1.5× the plain route, a ratio ≥ 0.67.
 */
import { compare, type Benchmark } from './lib/benchmark.js';
import { measure } from './lib/load.js';
import { call, createBenchOrg, startBenchPlatform } from './lib/platform.js';
import { MCP_LIMITS } from '../src/services/mcp-rate-limit.js';

const CONNECTIONS = 20;
const APP = 'bench-mcp';

const benchmark: Benchmark = {
  name: 'mcp-call',
  description: `MCP tools/call app_get vs GET /v1/apps/:name on the same pier, ${CONNECTIONS} connections`,
  async run({ durationS, warmupS }) {
    // The limit of 120 calls a minute would answer 429 within a second; the count still
    // runs on every call (leases sized to the pace, as for any busy organization).
    const limit = MCP_LIMITS.toolCallsPerMinute;
    MCP_LIMITS.toolCallsPerMinute = Number.MAX_SAFE_INTEGER;
    const pier = await startBenchPlatform();
    try {
      const org = await createBenchOrg(pier);
      await call(pier.url, org.token, 'POST', '/v1/apps', { name: APP }, 201);
      const authorization = `Bearer ${org.token}`;
      const mcp = mcpCall(authorization);
      // Both answer the same app: the tool's text is the route's JSON.
      const check = await fetch(`${pier.url}/v1/mcp`, { method: 'POST', ...mcp });
      const text = await check.text();
      if (check.status !== 200 || !text.includes(`\\"name\\":\\"${APP}\\"`)) {
        throw new Error(`tools/call answered ${check.status}: ${text}`);
      }

      const load = { connections: CONNECTIONS, durationS, warmupS };
      const route = await measure({
        ...load,
        url: `${pier.url}/v1/apps/${APP}`,
        headers: { authorization },
      });
      const measured = await measure({
        ...load,
        url: `${pier.url}/v1/mcp`,
        method: 'POST',
        ...mcp,
      });
      return compare({
        name: benchmark.name,
        baselineLabel: 'the same route',
        connections: CONNECTIONS,
        baseline: route,
        pier: measured,
        goal: { minRatio: 1 / 1.5, maxP99Ms: 50 },
        notes: {
          store: pier.store,
          tool: 'app_get',
          route: 'GET /v1/apps/:name',
          costOfMcp: Number((route.requestsPerSec / measured.requestsPerSec).toFixed(2)),
        },
      });
    } finally {
      MCP_LIMITS.toolCallsPerMinute = limit;
      await pier.close();
    }
  },
};

/** The POST of one 2026-07-28 `tools/call`, as a client sends it. */
function mcpCall(authorization: string) {
  return {
    headers: {
      authorization,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2026-07-28',
      'mcp-method': 'tools/call',
      'mcp-name': 'app_get',
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: {
        name: 'app_get',
        arguments: { name: APP },
        _meta: {
          'io.modelcontextprotocol/protocolVersion': '2026-07-28',
          'io.modelcontextprotocol/clientInfo': { name: 'bench', version: '1' },
          'io.modelcontextprotocol/clientCapabilities': {},
        },
      },
    }),
  };
}

export default benchmark;
