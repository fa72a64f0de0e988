/**
 * An app reaches what is attached to it, seen from inside one of its real machines: the
 * injected `DATABASE_URL`, `REDIS_URL` and `S3_*` work with ordinary clients (the host's
 * own psql, redis-cli and curl, copied into the image with their libraries) over TLS
 * verified with the platform CA the machine holds at /etc/pier/ca.crt; and the same
 * clients refuse the servers when given another CA, or none, so verification is real.
 *
 * The machine runs every check at boot (check.sh below) and prints one line each; the
 * test reads them through the app's logs.
 */
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureCa, MACHINE_CA_PATH } from '../../src/crypto/ca.js';
import { busyboxLayer } from '../../src/runtime/images/build.test-helper.js';
import { hostBinariesLayer } from '../../src/runtime/images/host-binaries.test-helper.js';
import { createBucket } from '../buckets/helpers.js';
import { createDatabase } from '../databases/helpers.js';
import { canRunMachines, startMachineBed, type MachineBed } from './bed.js';

const CLIENTS = ['/usr/lib/postgresql/15/bin/psql', '/usr/bin/redis-cli', '/usr/bin/curl'];

/**
 * Each check prints `CHECK <name> rc=<exit status> <output on one line>`. The wrong CA
 * is another CA's certificate; "no CA" is verify-full without a root certificate file.
 */
const CHECK_SH = [
  '#!/bin/sh',
  'check() {',
  '  name=$1; shift',
  '  out=$("$@" 2>&1); rc=$?',
  `  echo "CHECK $name rc=$rc $(echo "$out" | tr '\\n' ' ')"`,
  '}',
  `SQL="SELECT 'pg-ok ' || current_user || ' ssl=' || ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()"`,
  'check pg psql "$DATABASE_URL" -X -At -c "$SQL"',
  'check pg-wrong-ca psql "${DATABASE_URL%sslrootcert=*}sslrootcert=/wrong-ca.crt" -X -At -c "$SQL"',
  'check pg-no-ca psql "${DATABASE_URL%&sslrootcert=*}" -X -At -c "$SQL"',
  'R="redis-cli --no-auth-warning -u $REDIS_URL --tls"',
  'check redis-set $R --cacert "$PIER_CA_FILE" SET attached yes',
  'check redis-get $R --cacert "$PIER_CA_FILE" GET attached',
  'check redis-wrong-ca $R --cacert /wrong-ca.crt PING',
  'S3="curl -sS --fail-with-body --aws-sigv4 aws:amz:$S3_REGION:s3 --user $S3_ACCESS_KEY_ID:$S3_SECRET_ACCESS_KEY -H x-amz-content-sha256:UNSIGNED-PAYLOAD"',
  'echo "from inside" > /tmp/object',
  'check s3-put $S3 --cacert "$PIER_CA_FILE" -T /tmp/object "$S3_ENDPOINT/$S3_BUCKET/hello.txt"',
  'check s3-get $S3 --cacert "$PIER_CA_FILE" "$S3_ENDPOINT/$S3_BUCKET/hello.txt"',
  'check s3-wrong-ca $S3 --cacert /wrong-ca.crt "$S3_ENDPOINT/$S3_BUCKET/hello.txt"',
  `check ca-file md5sum ${MACHINE_CA_PATH}`,
  'echo "CHECK env rc=0 NODE_EXTRA_CA_CERTS=$NODE_EXTRA_CA_CERTS PIER_CA_FILE=$PIER_CA_FILE"',
  'echo CHECKS-DONE',
  'exec sleep 3600',
  '',
].join('\n');

let bed: MachineBed;
let scratch: string;
let checks: Map<string, { rc: number; out: string }>;

/** Polls `fn` until it returns something, or fails after `ms`. */
async function until<T>(what: string, ms: number, fn: () => Promise<T | undefined>): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const got = await fn();
    if (got !== undefined) return got;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

beforeAll(async () => {
  if (!canRunMachines) return;
  bed = await startMachineBed('at', 230);
  scratch = await mkdtemp(path.join(os.tmpdir(), 'pier-attach-'));
  const wrong = await ensureCa(scratch, ['localhost']);
  const image = await bed.image('clients:1', {
    layers: [
      busyboxLayer(['sh', 'echo', 'tr', 'sleep', 'md5sum', 'cat']),
      hostBinariesLayer(CLIENTS, 'usr/local/bin'),
      [
        { path: 'check.sh', content: CHECK_SH, mode: 0o755 },
        { path: 'wrong-ca.crt', content: await readFile(wrong.caFile) },
      ],
    ],
    config: {
      Cmd: ['/bin/sh', '/check.sh'],
      Env: ['PATH=/usr/local/bin:/bin'],
    },
  });
  const { tp, org } = bed;
  expect((await bed.req('POST', '/v1/apps', { name: 'shop' })).status).toBe(201);
  await createDatabase(tp, org, { name: 'shop-pg', kind: 'postgres' });
  await createDatabase(tp, org, { name: 'shop-cache', kind: 'redis' });
  await createBucket(tp, org, 'shop-media');
  for (const name of ['shop-pg', 'shop-cache']) {
    await until(`${name} ready`, 60_000, async () => {
      const r = await bed.req('GET', `/v1/resources/${name}`);
      return r.body.state === 'ready' ? true : undefined;
    });
    expect((await bed.req('POST', '/v1/apps/shop/attach', { database: name })).status).toBe(200);
  }
  expect((await bed.req('POST', '/v1/apps/shop/attach', { bucket: 'shop-media' })).status).toBe(
    200,
  );
  const made = await bed.req('POST', '/v1/apps/shop/machines', { image, readiness: 'boot' });
  expect(made.status, JSON.stringify(made.body)).toBe(201);
  const lines = await until('the checks', 90_000, async () => {
    const r = await bed.req('GET', '/v1/apps/shop/logs?limit=100');
    const texts: string[] = (r.body.entries ?? []).map((e: { text: string }) => e.text);
    return texts.includes('CHECKS-DONE') ? texts : undefined;
  });
  checks = new Map();
  for (const line of lines) {
    const m = /^CHECK (\S+) rc=(\d+) ?(.*)$/.exec(line);
    if (m) checks.set(m[1]!, { rc: Number(m[2]), out: m[3]! });
  }
}, 240_000);

afterAll(async () => {
  await bed?.close();
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

/** The result of one check, with every result in the failure message. */
function check(name: string): { rc: number; out: string } {
  const c = checks.get(name);
  expect(c, `no check ${name}: ${JSON.stringify([...checks])}`).toBeDefined();
  return c!;
}

describe.runIf(canRunMachines)('from inside an attached app machine', () => {
  it('holds the platform CA at the documented path, named by NODE_EXTRA_CA_CERTS', async () => {
    const ca = await readFile(path.join(bed.tp.dataDir, 'ca', 'ca.pem'));
    const md5 = createHash('md5').update(ca).digest('hex');
    expect(check('ca-file')).toEqual({ rc: 0, out: `${md5}  ${MACHINE_CA_PATH} ` });
    expect(check('env').out).toBe(
      `NODE_EXTRA_CA_CERTS=${MACHINE_CA_PATH} PIER_CA_FILE=${MACHINE_CA_PATH}`,
    );
  });

  it('queries PostgreSQL through DATABASE_URL, TLS verified (verify-full) with that CA', () => {
    expect(check('pg')).toEqual({ rc: 0, out: 'pg-ok app ssl=true ' });
  });

  it('runs Redis commands through REDIS_URL over TLS verified with that CA', () => {
    expect(check('redis-set')).toEqual({ rc: 0, out: 'OK ' });
    expect(check('redis-get')).toEqual({ rc: 0, out: 'yes ' });
  });

  it('puts and gets an object through the S3_* values, over TLS verified with that CA', () => {
    expect(check('s3-put').rc).toBe(0);
    expect(check('s3-get')).toEqual({ rc: 0, out: 'from inside ' });
  });

  it('finds the services listener on the bridge gateway alone, not on every interface', async () => {
    // The bed's API listens on loopback; the services listener binds the address machines
    // dial (the gateway, made with the bridge), so no other interface of the host has it.
    const { servicesHost, servicesPort } = bed.tp.platform.config;
    const { stdout } = await promisify(execFile)('ss', ['-ltnH']);
    const listening = stdout
      .split('\n')
      .map((line) => line.trim().split(/\s+/)[3] ?? '')
      .filter((local) => local.endsWith(`:${servicesPort}`));
    expect(listening).toEqual([`${servicesHost}:${servicesPort}`]);
    expect(check('s3-get').rc).toBe(0); // and the machine reached it there
  });

  it('fails verification with another CA, or with none', () => {
    const pgWrong = check('pg-wrong-ca');
    expect(pgWrong.rc).not.toBe(0);
    expect(pgWrong.out).toMatch(/certificate verify failed/);
    const pgNone = check('pg-no-ca');
    expect(pgNone.rc).not.toBe(0);
    expect(pgNone.out).toMatch(/root certificate file .* does not exist/);
    const redisWrong = check('redis-wrong-ca');
    expect(redisWrong.rc).not.toBe(0);
    expect(redisWrong.out).toMatch(/certificate verify failed/);
    const s3Wrong = check('s3-wrong-ca');
    expect(s3Wrong.rc).toBe(60); // curl: the peer certificate cannot be authenticated
    expect(s3Wrong.out).not.toMatch(/from inside/);
  });
});
