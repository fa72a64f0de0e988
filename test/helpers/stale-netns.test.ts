/**
 * The start-of-run sweep of machine network namespaces that killed runs left: one with no
 * process and no record in a data dir goes; one a live test bed records, or with a
 * process inside, stays.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { sweepStaleNetns } from './stale-netns.js';

const isRoot = process.getuid?.() === 0;
const suffix = `${process.pid}x${Date.now().toString(36)}`;
const names = [
  ...['orphan', 'recorded', 'busy'].map((n) => `mch-sweep${n}${suffix}`),
  ...['orphan', 'leased'].map((n) => `bld-sweep${n}${suffix}`),
];
let tmp = '';

afterAll(async () => {
  for (const id of names) {
    try {
      execFileSync('ip', ['netns', 'del', `pier-${id}`], { stdio: 'ignore' });
    } catch {
      // gone already
    }
  }
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

it.skipIf(!isRoot)('removes namespaces no process and no live data dir holds', async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), 'pier-netns-'));
  const [orphan, recorded, busy, buildOrphan, leased] = names as [
    string,
    string,
    string,
    string,
    string,
  ];
  for (const id of names) execFileSync('ip', ['netns', 'add', `pier-${id}`]);
  // A live bed's stopped machine: its record is in a data dir.
  await mkdir(path.join(tmp, 'pier-test-Live01', 'machines'), { recursive: true });
  await writeFile(path.join(tmp, 'pier-test-Live01', 'machines', `${recorded}.json`), '{}');
  // A live bed's running build: its network's lease is in a data dir.
  await mkdir(path.join(tmp, 'pier-test-Live01', 'machines', '.builds'));
  await writeFile(
    path.join(tmp, 'pier-test-Live01', 'machines', '.builds', `${leased}.json`),
    '{}',
  );
  // A running machine: a process inside.
  const sleeper = spawn('ip', ['netns', 'exec', `pier-${busy}`, 'sleep', '30']);
  await new Promise((r) => setTimeout(r, 300));
  try {
    const removed = await sweepStaleNetns(tmp);
    expect(removed).toContain(`pier-${orphan}`);
    expect(removed).toContain(`pier-${buildOrphan}`);
    expect(removed).not.toContain(`pier-${leased}`);
    expect(removed).not.toContain(`pier-${recorded}`);
    expect(removed).not.toContain(`pier-${busy}`);
    const left = await readdir('/run/netns');
    expect(left).not.toContain(`pier-${orphan}`);
    expect(left).not.toContain(`pier-${buildOrphan}`);
    expect(left).toEqual(
      expect.arrayContaining([`pier-${recorded}`, `pier-${busy}`, `pier-${leased}`]),
    );
  } finally {
    sleeper.kill('SIGKILL');
  }
});
