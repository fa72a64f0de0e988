/**
 * Addresses lent to builds against machines' allocations (records.ts): a machine never
 * gets an address a build holds, a build never gets a machine's, and a lease taken back
 * frees its address; leases live on disk, so a new MachineRecords (a restart) sees them.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { MachineRecords, type MachineRecord } from './records.js';

const CIDR = '10.99.0.0/29'; // .2–.6 for machines and builds
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'pier-records-'));
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const record = (id: string) => (ip: string) => ({ id, ip }) as unknown as MachineRecord;

it('keeps the addresses of builds and machines apart, on disk', async () => {
  const records = new MachineRecords(dir);
  const m1 = await records.allocate('mch-a', CIDR, record('mch-a'));
  const b1 = await records.lease('bld-one', CIDR);
  const b2 = await records.lease('bld-two', CIDR);
  const m2 = await records.allocate('mch-b', CIDR, record('mch-b'));
  expect([m1.ip, b1.ip, b2.ip, m2.ip]).toEqual([
    '10.99.0.2',
    '10.99.0.3',
    '10.99.0.4',
    '10.99.0.5',
  ]);
  // A lease asked again for the same build (a retry) is not counted against itself.
  expect((await records.lease('bld-one', CIDR)).ip).toBe('10.99.0.3');

  // After a restart the leases are still there, and still held against machines.
  const again = new MachineRecords(dir);
  expect((await again.leases()).map((l) => l.id).sort()).toEqual(['bld-one', 'bld-two']);
  expect((await again.allocate('mch-c', CIDR, record('mch-c'))).ip).toBe('10.99.0.6');
  await expect(again.allocate('mch-d', CIDR, record('mch-d'))).rejects.toThrow(/no free address/);
  await expect(again.lease('bld-three', CIDR)).rejects.toThrow(/no free address/);

  // A lease taken back frees its address.
  await again.endLease('bld-one');
  await again.endLease('bld-one'); // idempotent
  expect((await again.allocate('mch-d', CIDR, record('mch-d'))).ip).toBe('10.99.0.3');
  expect((await again.leases()).map((l) => l.id)).toEqual(['bld-two']);
});
