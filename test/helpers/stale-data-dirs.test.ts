/**
 * The start-of-run sweep of data dirs that killed runs left: a dir whose owner is gone is
 * unmounted and removed; one whose owner lives, or that names none, is left alone.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { sweepStaleDataDirs } from './stale-data-dirs.js';

const isRoot = process.getuid?.() === 0;
let tmp: string;

beforeAll(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), 'pier-sweep-'));
});
afterAll(async () => {
  for (const mnt of await mounted()) spawnSync('umount', [mnt]);
  await rm(tmp, { recursive: true, force: true });
});

async function mounted(): Promise<string[]> {
  const info = await readFile('/proc/self/mountinfo', 'utf8');
  return info
    .split('\n')
    .map((l) => l.split(' ')[4] ?? '')
    .filter((m) => m.startsWith(`${tmp}/`));
}

async function dataDir(name: string, pid: number | undefined): Promise<string> {
  const dir = path.join(tmp, name);
  await mkdir(path.join(dir, 'pool', 'mnt'), { recursive: true });
  if (pid !== undefined) await writeFile(path.join(dir, 'serve.lock'), `${pid}\n`);
  return dir;
}

const exists = (p: string) =>
  stat(p).then(
    () => true,
    () => false,
  );

it.skipIf(!isRoot)('unmounts and removes the dirs of dead owners only', async () => {
  const dead = spawnSync('true').pid!; // exited: its pid names no process now
  const crashed = await dataDir('pier-test-Crash1', dead);
  const live = await dataDir('pier-test-Live01', process.pid);
  const unlocked = await dataDir('pier-test-NoLck1', undefined);
  const other = await dataDir('pier-other-Crash2', dead);
  // A mounted pool, as a killed run leaves it (tmpfs stands in for the btrfs image).
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', path.join(crashed, 'pool/mnt')]);
  await writeFile(path.join(crashed, 'pool/mnt/file'), 'x');

  expect(await sweepStaleDataDirs(tmp)).toEqual([crashed]);
  expect(await mounted()).toEqual([]);
  expect(await exists(crashed)).toBe(false);
  for (const kept of [live, unlocked, other]) expect(await exists(kept)).toBe(true);
});
