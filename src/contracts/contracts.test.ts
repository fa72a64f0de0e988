/**
 * Contracts have one home: every schema a route declares (body, params, querystring,
 * response) is a value exported by a file of src/contracts/, and those files import
 * nothing of pier but each other. The routes are registered on a bare Fastify (no
 * database, no listener), which is enough to see what each declares.
 */
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import swagger from '@fastify/swagger';
import Fastify, { type RouteOptions } from 'fastify';
import { jsonSchemaTransform } from 'fastify-type-provider-zod';
import { describe, expect, expectTypeOf, it } from 'vitest';
import type * as cliBuckets from '../cli/client/buckets-types.js';
import type * as cliDb from '../cli/client/db-types.js';
import type * as cliMachines from '../cli/client/machines-types.js';
import type * as cliTypes from '../cli/client/types.js';
import type { AppDeps } from '../http/deps.js';
import { installValidation } from '../http/plugins/validation.js';
import { registerRoutes } from '../http/routes/index.js';
import type * as apps from './apps.js';
import type * as buckets from './buckets.js';
import type * as databases from './databases.js';
import type * as machines from './machines.js';
import type * as secrets from './secrets.js';
import type * as tokens from './tokens.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const src = path.resolve(here, '..');

async function contractFiles(): Promise<string[]> {
  return (await readdir(here)).filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts'));
}

/** Every value exported by a contracts file. */
async function contractValues(): Promise<Set<unknown>> {
  const values = new Set<unknown>();
  for (const file of await contractFiles()) {
    const url = pathToFileURL(path.join(here, file)).href;
    const mod = (await import(/* @vite-ignore */ url)) as Record<string, unknown>;
    for (const v of Object.values(mod)) values.add(v);
  }
  return values;
}

/** Imports (static, dynamic and re-exports) of a TypeScript file. */
function importsOf(text: string): string[] {
  const found = new Set<string>();
  for (const m of text.matchAll(/(?:^|\n)\s*(?:import|export)\b[^'";]*?from\s*['"]([^'"]+)['"]/g))
    found.add(m[1]!);
  for (const m of text.matchAll(/(?:^|\n)\s*import\s*['"]([^'"]+)['"]/g)) found.add(m[1]!);
  for (const m of text.matchAll(/\bimport\(\s*['"]([^'"]+)['"]\s*\)/g)) found.add(m[1]!);
  return [...found];
}

/**
 * Routes that answer no JSON body of pier's own: 204s, raw bytes, a WebSocket, PEM, only
 * errors, or JSON-RPC (the MCP endpoint, whose messages are the protocol's, not pier's).
 */
const NO_JSON_ANSWER = new Set([
  'GET /v1/builds/:id/logs',
  'DELETE /v1/tokens/:id',
  'DELETE /v1/ssh-keys/:id',
  'DELETE /v1/ssh/tokens/:id',
  'DELETE /v1/apps/:name',
  'DELETE /v1/apps/:name/secrets/:key',
  'DELETE /v1/apps/:name/protection/links/:id',
  'DELETE /v1/apps/:name/udp/:id',
  'DELETE /v1/apps/:name/previews/:preview',
  'DELETE /v1/buckets/:name/credentials/:accessKeyId',
  'DELETE /v1/resources/:name',
  'DELETE /v1/volumes/:id',
  'DELETE /v1/volumes/:id/attachment',
  'DELETE /v1/machines/:id/checkpoints/:label',
  'POST /v1/machines/:id/migrate',
  'GET /v1/machines/:id/screenshot',
  'GET /v1/machines/:id/files',
  'GET /v1/machines/:id/exec',
  'GET /v1/resources/:name/tunnel',
  'POST /v1/mcp',
  'GET,PUT,PATCH,DELETE /v1/mcp',
  'GET /admin/v1/ca',
  // OAuth: authorize answers a redirect; revoking a grant 204.
  'GET /v1/oauth/authorize',
  'DELETE /v1/oauth/grants/:id',
  'DELETE /v1/webhooks/:id',
  // The edge: removing a domain or a zone 204; the ACME CA's HTTP-01 fetch is plain text.
  'DELETE /v1/apps/:name/domains/:domain',
  'DELETE /v1/domains/zones/:zone',
  'GET /.well-known/acme-challenge/:token',
  // git push over HTTPS: git's smart HTTP protocol.
  'GET /git/:repo/info/refs',
  'POST /git/:repo/git-receive-pack',
  'POST /git/:repo/git-upload-pack',
]);

async function registeredRoutes() {
  const app = Fastify({ logger: false });
  installValidation(app);
  await app.register(swagger, {
    openapi: { info: { title: 'contracts test', version: '1' } },
    transform: jsonSchemaTransform,
  });
  const routes: RouteOptions[] = [];
  app.addHook('onRoute', (r) => {
    if (r.method !== 'HEAD') routes.push(r);
  });
  // Registration reads nothing of these: the handlers, never called here, would.
  const deps = { ctx: {}, pool: {}, sshGateway: {}, rateLimiter: {} } as unknown as AppDeps;
  await registerRoutes(app, deps);
  await app.ready();
  return { app, routes };
}

describe('contracts', () => {
  it('give every route its schemas, and every JSON answer a response schema', async () => {
    const values = await contractValues();
    const { app, routes } = await registeredRoutes();
    try {
      expect(routes.length).toBeGreaterThan(50);
      const strays: string[] = [];
      const unanswered: string[] = [];
      for (const r of routes) {
        const name = `${String(r.method)} ${r.url}`;
        const s = (r.schema ?? {}) as Record<string, unknown>;
        for (const part of ['body', 'params', 'querystring'] as const) {
          if (s[part] !== undefined && !values.has(s[part])) strays.push(`${name} ${part}`);
        }
        const response = (s.response ?? {}) as Record<string, unknown>;
        for (const [code, schema] of Object.entries(response)) {
          if (!values.has(schema)) strays.push(`${name} response ${code}`);
        }
        if (Object.keys(response).length === 0 && !NO_JSON_ANSWER.has(name)) unanswered.push(name);
      }
      expect(strays, 'schemas not exported by src/contracts').toEqual([]);
      expect(unanswered, 'routes answering JSON without a response schema').toEqual([]);
      // The OpenAPI document builds from them.
      const doc = app.swagger() as { paths: Record<string, Record<string, unknown>> };
      expect(doc.paths['/v1/apps/{name}/machines']?.post).toBeDefined();
    } finally {
      await app.close();
    }
  });

  it('import nothing of pier but each other (and zod)', async () => {
    const bad: string[] = [];
    for (const file of await contractFiles()) {
      const text = await readFile(path.join(here, file), 'utf8');
      for (const spec of importsOf(text)) {
        if (spec === 'zod' || /^\.\/[a-z0-9-]+\.js$/.test(spec)) continue;
        bad.push(`${file}: ${spec}`);
      }
    }
    expect(bad).toEqual([]);
  });

  it('are the only schemas of the route files (no zod there)', async () => {
    const bad: string[] = [];
    const walk = async (dir: string): Promise<void> => {
      for (const e of await readdir(dir, { withFileTypes: true })) {
        const p = path.join(dir, e.name);
        if (e.isDirectory()) await walk(p);
        else if (e.name.endsWith('.ts') && !e.name.endsWith('.test.ts')) {
          if (importsOf(await readFile(p, 'utf8')).includes('zod')) bad.push(path.relative(src, p));
        }
      }
    };
    await walk(path.join(src, 'http', 'routes'));
    expect(bad).toEqual([]);
  });

  it("give the CLI its record types (the client's types are the contracts' types)", () => {
    expectTypeOf<cliMachines.Machine>().toEqualTypeOf<machines.Machine>();
    expectTypeOf<cliMachines.AppLogs>().toEqualTypeOf<machines.AppLogs>();
    expectTypeOf<cliDb.Database>().toEqualTypeOf<databases.DatabaseRecord>();
    expectTypeOf<cliDb.CreatedDatabase>().toEqualTypeOf<databases.CreatedDatabase>();
    expectTypeOf<cliBuckets.Bucket>().toEqualTypeOf<buckets.Bucket>();
    expectTypeOf<cliBuckets.Presigned>().toEqualTypeOf<buckets.Presigned>();
    expectTypeOf<cliTypes.App>().toEqualTypeOf<apps.App>();
    expectTypeOf<cliTypes.Secret>().toEqualTypeOf<secrets.Secret>();
    expectTypeOf<cliTypes.TokenRecord>().toEqualTypeOf<tokens.KeyRecord>();
  });
});
