/**
 * The data dirs of test platforms (`<tmp>/pier-test-XXXXXX`, platform.ts) that a killed
 * run left behind: the pid in their `serve.lock` is gone. Their storage pool may still be
 * mounted (a btrfs image on a loop device with autoclear, which the unmount frees). Each
 * run removes them at its start, so a crashed run costs the host nothing for long.
 *
 * A dir is removed only once nothing is mounted below it any more: what cannot be
 * unmounted (still busy) keeps its dir, untouched, for a later run.
 */
import { execFile } from 'node:child_process';
import { readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { alive } from '../../src/host/data-dir-lock.js';

const DATA_DIR = /^pier-test-[A-Za-z0-9]{6}$/;

/** Mount points at or below `dir`, deepest first (mountinfo's fifth field, octal-escaped). */
async function mountsBelow(dir: string): Promise<string[]> {
  const info = await readFile('/proc/self/mountinfo', 'utf8');
  return info
    .split('\n')
    .map((line) => line.split(' ')[4])
    .filter((m): m is string => m !== undefined)
    .map((m) => m.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8))))
    .filter((m) => m === dir || m.startsWith(`${dir}/`))
    .sort((a, b) => b.length - a.length);
}

async function ownerGone(dir: string): Promise<boolean> {
  const lock = await readFile(path.join(dir, 'serve.lock'), 'utf8').catch(() => '');
  const pid = Number(lock.trim());
  return pid > 0 && !alive(pid);
}

export async function sweepStaleDataDirs(tmp = os.tmpdir()): Promise<string[]> {
  const removed: string[] = [];
  for (const name of await readdir(tmp).catch(() => [])) {
    if (!DATA_DIR.test(name)) continue;
    const dir = path.join(tmp, name);
    if (!(await ownerGone(dir))) continue;
    for (const mount of await mountsBelow(dir)) {
      await promisify(execFile)('umount', [mount]).catch(() => undefined);
    }
    if ((await mountsBelow(dir)).length > 0) continue; // still busy: left for a later run
    await rm(dir, { recursive: true, force: true });
    removed.push(dir);
  }
  return removed;
}
