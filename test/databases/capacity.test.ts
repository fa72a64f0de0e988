/**
 * No capacity: a host whose database ports are all taken, or whose storage pool is full,
 * answers 503 no-capacity and makes nothing (no row, no name, no volume).
 */
import { execFileSync } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { btrfsSkipReason } from '../../src/storage/pool/btrfs-env.test-helper.js';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { POOL_RESERVE_BYTES } from '../../src/services/databases/create.js';
import { createDatabase, platformCa, poolVolumes, query, storagePool } from './helpers.js';

const started: TestPlatform[] = [];
afterAll(async () => {
  for (const tp of started) await tp.close();
});

describe('no capacity', () => {
  it('answers 503 no-capacity when every database port is in use', async () => {
    const holder = net.createServer();
    await new Promise<void>((r) => holder.listen(0, '0.0.0.0', r));
    const port = (holder.address() as net.AddressInfo).port;
    try {
      const tp = await startTestPlatform({ databasePorts: `${port}-${port}` });
      started.push(tp);
      const org = await tp.createOrg();
      const res = await tp.request('POST', '/v1/resources', {
        token: org.token,
        body: { name: 'no-port', kind: 'postgres' },
      });
      expect(res.status).toBe(503);
      expect(res.body.code).toBe('no-capacity');
      expect(res.body.error).toMatch(/port/);
      const name = await tp.request('GET', '/v1/bucket-names/no-port', { token: org.token });
      expect(name.body.available).toBe(true);
    } finally {
      holder.close();
    }
  });

  const skip = btrfsSkipReason();
  it.skipIf(skip !== undefined)(
    'answers 503 no-capacity when the pool is full',
    async () => {
      const tp = await startTestPlatform({ storagePool: 'btrfs', storagePoolGb: 0.75 });
      started.push(tp);
      const org = await tp.createOrg();
      const ca = await platformCa(tp);
      const db = await createDatabase(tp, org, { name: 'filler', kind: 'postgres', sizeGb: 1 });
      // Table, WAL and archived WAL all land in the pool: this fills it.
      await query(
        db.url,
        ca,
        'CREATE TABLE big AS SELECT g, repeat(md5(g::text), 32) AS pad FROM generate_series(1, 300000) g',
      ).catch(() => undefined); // the server may well fail on the full disk itself
      // btrfs counts space at its transaction commit (every 30 s, or a sync): on a loaded
      // host the pool could still report room here without it.
      execFileSync('sync');
      // On a pool this small, btrfs can refuse the server's writes (its reservations run
      // out) while statfs still shows a few hundred MB free: ballast makes "full" certain.
      const pool = await storagePool(tp);
      const { freeBytes } = await pool.usage();
      const room = freeBytes - POOL_RESERVE_BYTES / 2;
      if (room > 0) {
        execFileSync('fallocate', ['-l', String(room), path.join(pool.root, '.ballast')]);
        execFileSync('sync');
      }
      const before = await poolVolumes(tp);
      const res = await tp.request('POST', '/v1/resources', {
        token: org.token,
        body: { name: 'one-too-many', kind: 'postgres' },
      });
      expect(res.status).toBe(503);
      expect(res.body.code).toBe('no-capacity');
      expect(res.body.error).toMatch(/storage pool is full/);
      expect(await poolVolumes(tp)).toEqual(before);
      expect(
        (await tp.request('GET', '/v1/resources/one-too-many', { token: org.token })).status,
      ).toBe(404);
      // A btrfs pool made, a server started and ~300 MB written: over 30 s on a busy host.
    },
    90_000,
  );
});
