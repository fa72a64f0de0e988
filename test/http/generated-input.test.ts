/**
 * Generated bad input over every operation of `/v1/openapi.json` (issue 24, item 9), as
 * Schemathesis does from outside: request bodies, query strings and path parameters built
 * from each operation's schemas, with hostile values mixed in at every level (NUL, lone
 * surrogates, control characters, non-Latin-1 text, huge and non-finite numbers, deep
 * nesting, wrong types, unknown fields with hostile names, over-long parameters).
 *
 * For each answer it holds pier to four properties:
 *  1. never a 5xx;
 *  2. every error is `{error, code}` with a code of the catalogue;
 *  3. every 400 lists its `issues`;
 *  4. a refused request writes nothing. Checked with a digest of every table of the state
 *     store (row count and the newest row version, `max(xmin)`, per table) taken before
 *     and after each refused request: any insert, update or delete moves it. Left out, by
 *     design: the job table (the platform's own clock), the per-address windows of the
 *     public entrances (they count every attempt, refused or not, which is their point),
 *     and a key's `last_used_at` (written when a key authenticates, before any route
 *     decides); api_keys is digested from its rows without that column.
 *
 * Two routes speak another protocol's errors, and are held to that one instead of
 * `{error, code}`: `/v1/oauth/token` (RFC 6749 5.2: `{error, error_description}`) and
 * `/v1/mcp` (JSON-RPC 2.0: `{jsonrpc, error: {code, message}}`). A 5xx other than 500 is
 * allowed only as a catalogue answer saying what this installation lacks
 * (`payments-unavailable`: no payment provider is configured in tests).
 *
 * Inputs are sampled by fast-check with a fixed seed, so a failure repeats run after run;
 * the run count per operation keeps the file under a minute on a busy 2-core host.
 *
 * Seeded objects (an app with a secret, a bucket, a volume, a token, a webhook, a second
 * organization for the operator routes) let parameters name real things, so routes are
 * exercised past their 404. DELETE operations run last, since they may remove the seeded
 * objects; the operator routes act on the second organization, never on the caller's (a
 * generated suspend would otherwise refuse everything after it). Nothing is skipped.
 */
import fc from 'fast-check';
import { sql } from 'kysely';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { errorCatalogue } from '../../src/errors/catalogue.js';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';

const SEED = 24_009;
const RUNS_PER_OPERATION = 6;

/**
 * Written whatever a request does (see the header): left out of the digest. The booking
 * job moves `billing_cursor` at each window boundary (the hour), on its own clock.
 */
const UNDIGESTED_TABLES = new Set(['jobs', 'entrance_rate_windows', 'billing_cursor']);
/** Columns written whatever a request does: the table is digested without them. */
const UNDIGESTED_COLUMNS: Record<string, string> = { api_keys: 'last_used_at' };
/** Answers of this installation that are 5xx by its configuration, not by a failure. */
const CONFIGURED_5XX = new Set(['payments-unavailable']);

let tp: TestPlatform;
let org: TestOrg;
let other: TestOrg;
const seeded: Record<string, string> = {};

beforeAll(async () => {
  // The seeded webhook's receiver: a loopback port nothing listens on, trusted like a registry.
  tp = await startTestPlatform({ trustedRegistries: ['127.0.0.1:9'] });
  org = await tp.createOrg();
  other = await tp.createOrg();
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await tp.request(method, path, { token: org.token, body });
    if (res.status >= 300)
      throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body;
  };
  seeded.app = (await call('POST', '/v1/apps', { name: 'seed-app' })).name;
  await call('PUT', '/v1/apps/seed-app/secrets', { secrets: { SEED_SECRET: 'v' } });
  seeded.bucket = (
    await call('POST', '/v1/buckets', { name: `seed-bucket-${org.id.slice(-6)}` })
  ).name;
  seeded.volume = (await call('POST', '/v1/volumes', { name: 'seed-volume', sizeGb: 1 })).id;
  seeded.token = (await call('POST', '/v1/tokens', { name: 'seed token' })).id;
  seeded.webhook = (
    await call('POST', '/v1/webhooks', { url: 'http://127.0.0.1:9/hook', events: ['email.sent'] })
  ).id;
});
afterAll(async () => tp?.close());

// ---- the hostile alphabet -------------------------------------------------------------

/** A JSON fragment sent as written: numbers JSON.stringify cannot write, deep nesting. */
class Raw {
  constructor(readonly text: string) {}
}

const hostileStrings = [
  '\u0000',
  'a\u0000b',
  'x\ud800y',
  '\udfff',
  '\ud83d',
  '\u0001\u001b[31m\u007f\u0085',
  'tab\there\r\nline',
  'ß€\u200b\ufeff\u202e',
  '😀😀😀',
  'X Y',
  '',
  ' ',
  'a'.repeat(5000),
  '../../etc/passwd',
  '%00%ff',
  "' OR 1=1 --",
  '<script>alert(1)</script>',
];
const hostileNumbers = [
  new Raw('1e400'),
  new Raw('-1e400'),
  new Raw('9007199254740993'),
  new Raw('123456789012345678901234567890'),
  new Raw('-0'),
  new Raw('1.5'),
  new Raw('1e-400'),
  -1,
  0,
  2 ** 31,
];
const deep = (n: number) => new Raw('['.repeat(n) + ']'.repeat(n));
const deepObject = (n: number) => new Raw('{"a":'.repeat(n) + '1' + '}'.repeat(n));

const hostileString = fc.constantFrom(...hostileStrings);
const hostileValue = fc.oneof(
  { weight: 4, arbitrary: hostileString },
  { weight: 2, arbitrary: fc.constantFrom(...hostileNumbers) },
  fc.constantFrom(null, true, {}, [], deep(20), deep(5000), deepObject(2000)),
);

// ---- values from schemas ----------------------------------------------------------------

interface Schema {
  type?: string | string[];
  enum?: unknown[];
  const?: unknown;
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  additionalProperties?: boolean | Schema;
  anyOf?: Schema[];
  oneOf?: Schema[];
  allOf?: Schema[];
  minimum?: number;
  maximum?: number;
}

/** A value the schema describes, with hostile values in place of any part of it. */
function valueOf(schema: Schema | undefined, depth = 0): fc.Arbitrary<unknown> {
  if (!schema || depth > 4) return hostileValue;
  return fc.oneof(
    { weight: 3, arbitrary: shaped(schema, depth) },
    { weight: 1, arbitrary: hostileValue },
  );
}

function shaped(schema: Schema, depth: number): fc.Arbitrary<unknown> {
  const variants = schema.anyOf ?? schema.oneOf ?? schema.allOf;
  if (variants?.length) return fc.oneof(...variants.map((s) => valueOf(s, depth + 1)));
  if (schema.enum?.length) return fc.constantFrom(...schema.enum);
  if (schema.const !== undefined) return fc.constant(schema.const);
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  switch (type) {
    case 'string':
      return hostileString;
    case 'integer':
    case 'number':
      return fc.oneof(
        fc.integer({ min: schema.minimum ?? -1000, max: schema.maximum ?? 1000 }),
        fc.constantFrom(...hostileNumbers),
      );
    case 'boolean':
      return fc.boolean();
    case 'array':
      return fc.array(valueOf(schema.items, depth + 1), { maxLength: 3 });
    case 'object': {
      const props = Object.entries(schema.properties ?? {});
      const known = fc.record(
        Object.fromEntries(props.map(([k, s]) => [k, valueOf(s, depth + 1)])),
        { requiredKeys: (schema.required ?? []).filter((k) => schema.properties?.[k]) },
      );
      const extra = fc.option(fc.tuple(hostileString, hostileValue), { freq: 3 });
      return fc
        .tuple(known, extra)
        .map(([obj, more]) => (more ? { ...obj, [more[0]]: more[1] } : obj));
    }
    default:
      return hostileValue;
  }
}

/** JSON text of a value, with Raw fragments written as they are. */
function toJson(v: unknown): string {
  if (v instanceof Raw) return v.text;
  if (Array.isArray(v)) return `[${v.map(toJson).join(',')}]`;
  if (v && typeof v === 'object') {
    return `{${Object.entries(v)
      .map(([k, x]) => `${JSON.stringify(k)}:${toJson(x)}`)
      .join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

/** Percent-encodes the UTF-8 bytes of a string (a lone surrogate becomes U+FFFD's). */
function encode(s: string): string {
  return [...Buffer.from(s, 'utf8')]
    .map((b) =>
      /[A-Za-z0-9\-._~]/.test(String.fromCharCode(b))
        ? String.fromCharCode(b)
        : `%${b.toString(16).toUpperCase().padStart(2, '0')}`,
    )
    .join('');
}

function asText(v: unknown): string {
  return typeof v === 'string' ? v : v instanceof Raw ? v.text.slice(0, 2000) : toJson(v);
}

// ---- operations -------------------------------------------------------------------------

interface Parameter {
  in: string;
  name: string;
  required?: boolean;
  schema?: Schema;
}

interface Operation {
  method: string;
  path: string;
  parameters: Parameter[];
  body?: Schema;
}

/** The seeded object a path parameter names, by the collection it follows. */
function seededParam(path: string, name: string): string {
  const before = path.split('/').slice(0, path.split('/').indexOf(`{${name}}`));
  const collection = before[before.length - 1];
  const known: Record<string, string | undefined> = {
    apps: seeded.app,
    buckets: seeded.bucket,
    'bucket-names': seeded.bucket,
    volumes: seeded.volume,
    tokens: seeded.token,
    webhooks: seeded.webhook,
    orgs: other.id,
    secrets: 'SEED_SECRET',
  };
  return known[collection ?? ''] ?? 'x1';
}

interface GeneratedRequest {
  url: string;
  body?: string;
  label: string;
}

function requestsFor(op: Operation, seed: number): GeneratedRequest[] {
  const pathParams = op.parameters.filter((p) => p.in === 'path');
  const queryParams = op.parameters.filter((p) => p.in === 'query');
  const arb = fc.record({
    params: fc.tuple(
      ...pathParams.map((p) =>
        fc.oneof(
          { weight: 3, arbitrary: fc.constant(seededParam(op.path, p.name)) },
          { weight: 2, arbitrary: hostileString },
          { weight: 1, arbitrary: fc.constant('p'.repeat(1100)) },
        ),
      ),
    ),
    query: fc.tuple(...queryParams.map((p) => fc.option(valueOf(p.schema), { freq: 2 }))),
    extraQuery: fc.option(fc.tuple(hostileString, hostileString), { freq: 4 }),
    body: op.body ? valueOf(op.body) : fc.constant(undefined),
  });
  return fc.sample(arb, { seed, numRuns: RUNS_PER_OPERATION }).map((r) => {
    let path = op.path;
    pathParams.forEach((p, i) => {
      const value = encode(r.params[i] as string) || 'x';
      path = path.replace(`{${p.name}}`, p.name === '*' ? value.replace(/%2F/g, '/') : value);
    });
    const pairs = queryParams.flatMap((p, i) =>
      r.query[i] === null ? [] : [`${encode(p.name)}=${encode(asText(r.query[i]))}`],
    );
    if (r.extraQuery) pairs.push(`${encode(r.extraQuery[0])}=${encode(r.extraQuery[1])}`);
    const url = pairs.length ? `${path}?${pairs.join('&')}` : path;
    const body = r.body === undefined ? undefined : toJson(r.body);
    return {
      url,
      body,
      label: `${op.method.toUpperCase()} ${url.slice(0, 200)} ${body?.slice(0, 300) ?? ''}`,
    };
  });
}

async function operations(): Promise<Operation[]> {
  const doc = (await tp.request('GET', '/v1/openapi.json')).body;
  const ops: Operation[] = [];
  for (const [path, methods] of Object.entries<Record<string, any>>(doc.paths)) {
    for (const [method, op] of Object.entries<any>(methods)) {
      ops.push({
        method,
        path,
        parameters: op.parameters ?? [],
        body: op.requestBody?.content?.['application/json']?.schema,
      });
    }
  }
  // Deletes last: they may remove what the other operations' parameters name.
  return ops.sort((a, b) => Number(a.method === 'delete') - Number(b.method === 'delete'));
}

// ---- the properties ---------------------------------------------------------------------

let digestQuery: string | undefined;

/** Row count and newest row version of every table a request could write. */
async function digest(): Promise<Record<string, string>> {
  if (!digestQuery) {
    const tables = await sql<{ name: string }>`
      SELECT table_name AS name FROM information_schema.tables
      WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`.execute(tp.platform.ctx.db);
    digestQuery = tables.rows
      .filter((t) => !UNDIGESTED_TABLES.has(t.name))
      .map((t) => {
        const column = UNDIGESTED_COLUMNS[t.name];
        const state = column
          ? `md5(coalesce(string_agg((to_jsonb(t) - '${column}')::text, ',' ORDER BY (to_jsonb(t) - '${column}')::text), ''))`
          : `count(*)::text || '/' || coalesce(max(xmin::text::bigint), 0)::text`;
        return `SELECT '${t.name}' AS name, ${state} AS state FROM "${t.name}" t`;
      })
      .join(' UNION ALL ');
  }
  const rows = await sql
    .raw<{ name: string; state: string }>(digestQuery)
    .execute(tp.platform.ctx.db);
  return Object.fromEntries(rows.rows.map((r) => [r.name, r.state]));
}

function changed(before: Record<string, string>, after: Record<string, string>): string[] {
  return Object.keys(after).filter((t) => before[t] !== after[t]);
}

/** What is wrong with an answer, or nothing. */
function problemsOf(path: string, status: number, body: any): string[] {
  const problems: string[] = [];
  if (status >= 500 && !(status !== 500 && CONFIGURED_5XX.has(body?.code)))
    problems.push(`answered ${status}`);
  if (status >= 400 && path === '/v1/oauth/token') {
    if (typeof body?.error !== 'string') problems.push('OAuth error without `error`');
  } else if (status >= 400 && path === '/v1/mcp' && body?.jsonrpc === '2.0') {
    if (typeof body.error?.code !== 'number' || typeof body.error?.message !== 'string')
      problems.push('JSON-RPC error without code and message');
  } else if (status >= 400) {
    if (typeof body?.error !== 'string' || typeof body?.code !== 'string')
      problems.push(`error without {error, code}: ${JSON.stringify(body)?.slice(0, 200)}`);
    else if (!(body.code in errorCatalogue))
      problems.push(`code ${body.code} not in the catalogue`);
    if (status === 400 && (!Array.isArray(body?.issues) || body.issues.length === 0))
      problems.push('400 without issues');
  }
  return problems;
}

it('answers generated bad input on every operation without a 5xx, with catalogue errors, issues on 400 and no write on refusal', async () => {
  const failures: string[] = [];
  const ops = await operations();
  expect(ops.length).toBeGreaterThan(100);
  let sent = 0;
  for (const [index, op] of ops.entries()) {
    const token = op.path.startsWith('/admin/') ? tp.operatorToken : org.token;
    for (const req of requestsFor(op, SEED + index)) {
      const before = await digest();
      const headers: Record<string, string> = { authorization: `Bearer ${token}` };
      if (req.body !== undefined) headers['content-type'] = 'application/json';
      const res = await fetch(tp.url + req.url, {
        method: op.method.toUpperCase(),
        headers,
        body: req.body,
      });
      sent++;
      const text = await res.text();
      let body: unknown = text;
      try {
        body = text ? JSON.parse(text) : undefined;
      } catch {
        // not JSON: problemsOf says so for an error
      }
      const problems = problemsOf(op.path, res.status, body);
      if (res.status >= 400) {
        const written = changed(before, await digest());
        if (written.length)
          problems.push(`refused (${res.status}) but wrote ${written.join(', ')}`);
      }
      if (problems.length) failures.push(`${req.label} → ${res.status}: ${problems.join('; ')}`);
    }
  }
  expect(sent).toBeGreaterThan(ops.length * (RUNS_PER_OPERATION - 1));
  expect(failures).toEqual([]);
}, 180_000);

it('answers a QUERY request without a Content-Type on every path with 404 or 405, never a 5xx', async () => {
  const failures: string[] = [];
  for (const op of await operations()) {
    const path = op.path.replace(/\{[^}]+\}/g, 'x1');
    for (const token of [undefined, org.token]) {
      const res = await fetch(tp.url + path, {
        method: 'QUERY',
        headers: token ? { authorization: `Bearer ${token}` } : {},
      });
      const body = await res.json().catch(() => undefined);
      if (![404, 405].includes(res.status) || problemsOf(path, res.status, body).length)
        failures.push(`QUERY ${path} → ${res.status} ${JSON.stringify(body)}`);
    }
  }
  expect(failures).toEqual([]);
});
