/**
 * Real cgroups, real processes: a tree of "tickers" (each writes an increasing counter to
 * a file every 20 ms) is adopted, frozen and thawed, on each cgroup version this host
 * offers. Skipped, with the reason, where pier cannot manage cgroups (not root…).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm, rmdir } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertCgroupName, CgroupSet } from './cgroup.js';
import { exists } from './cgroup-fs.js';

const TICKER = `
const fs = require('node:fs');
const { spawn } = require('node:child_process');
const file = process.argv[1];
const kids = Number(process.argv[2] || 0);
const pids = [];
const fork = () => {
  const child = spawn(process.execPath, ['-e', process.env.PIER_TICKER, file + '.' + pids.length, '0'], { stdio: 'ignore' });
  pids.push(child.pid);
  fs.writeFileSync(file + '.pids.tmp', pids.join(','));
  fs.renameSync(file + '.pids.tmp', file + '.pids');
};
for (let i = 0; i < kids; i++) fork();
process.on('SIGUSR2', fork);
let n = 0;
setInterval(() => {
  fs.writeFileSync(file + '.tmp', String(++n));
  fs.renameSync(file + '.tmp', file);
}, 20);
`;

/** Starts the root ticker writing to `file`, with `kids` children forked right away. */
export function startTicker(file: string, kids: number): ChildProcess {
  return spawn(process.execPath, ['-e', TICKER, file, String(kids)], {
    stdio: 'ignore',
    env: { ...process.env, PIER_TICKER: TICKER },
  });
}

/** The counter in `file`, or 0 before the first tick. */
export async function readCounter(file: string): Promise<number> {
  const text = await readFile(file, 'utf8').catch(() => '0');
  return Number(text) || 0;
}

/** The pids of the children the root ticker has forked so far. */
export async function childPids(file: string): Promise<number[]> {
  const text = await readFile(`${file}.pids`, 'utf8').catch(() => '');
  return text ? text.split(',').map(Number) : [];
}

export const delay = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Waits until `cond` holds, checking every 10 ms, up to `ms`. */
export async function waitUntil(cond: () => Promise<boolean>, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error('condition not reached in time');
    await delay(10);
  }
}

async function alive(pid: number): Promise<boolean> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  return stat !== '' && !/\) Z /.test(stat);
}

/** Kills `pids` (children first, so their parent reaps them) and waits for them to go. */
async function killAll(pids: number[]): Promise<void> {
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
    await waitUntil(async () => !(await alive(pid))).catch(() => {});
  }
}

const ROOT = `pier-test-${process.pid}`;
let unavailable = '';
const detected = await CgroupSet.detect({ root: ROOT }, (reason) => (unavailable = reason));
// Every version this host can run (a hybrid v1 host also has a v2 freezer to test).
const versions: (1 | 2)[] = [];
for (const version of [1, 2] as const) {
  if ((await CgroupSet.probe({ root: ROOT, version })).set) versions.push(version);
}

describe('cgroup names', () => {
  it('accepts lowercase names with dashes and refuses anything that could escape', () => {
    expect(() => assertCgroupName('dbi-0abc9')).not.toThrow();
    expect(() => assertCgroupName('a'.repeat(101))).not.toThrow();
    for (const bad of ['', '-x', 'A', '../x', 'a/b', 'a.b', 'a b', '.', 'a'.repeat(102)]) {
      expect(() => assertCgroupName(bad)).toThrow(/invalid cgroup name/);
    }
  });

  it('probe refuses a bad root name or parent with a reason', async () => {
    expect((await CgroupSet.probe({ root: '../etc' })).reason).toMatch(/invalid cgroup name/);
    expect((await CgroupSet.probe({ parent: '/a/../..' })).reason).toMatch(/invalid cgroup parent/);
  });
});

describe.skipIf(!detected)(`CgroupSet${detected ? '' : ` (skipped: ${unavailable})`}`, () => {
  for (const version of versions) {
    describe(`cgroup v${version}`, () => versionSuite(version));
  }
});

function versionSuite(version: 1 | 2): void {
  let set: CgroupSet;
  let dir: string;
  let root: ChildProcess | undefined;
  const name = 'db-tickers';
  const file = () => path.join(dir, 'root');

  beforeAll(async () => {
    const probe = await CgroupSet.probe({ root: ROOT, version });
    if (!probe.set) throw new Error(`cgroup v${version} unusable here: ${probe.reason}`);
    set = probe.set;
    dir = await mkdtemp(path.join(os.tmpdir(), `pier-cgroup-v${version}-`));
  });

  // Runs pass or fail: nothing frozen, no ticker left, no directory left.
  afterAll(async () => {
    if (!set) return;
    await set.thaw(name).catch(() => {});
    const kids = await childPids(file());
    const inside = await set.pids(name).catch(() => []);
    const rootPid = root?.pid;
    await killAll([...new Set([...kids, ...inside.filter((p) => p !== rootPid)])]);
    if (rootPid) await killAll([rootPid]);
    for (const group of [name, 'db-limits', 'db-empty']) await set.remove(group).catch(() => {});
    for (const d of set.dirs()) await rmdir(d).catch(() => {});
    await rm(dir, { recursive: true, force: true });
  });

  it('is created idempotently, one directory per hierarchy', async () => {
    await set.create(name);
    await set.create(name);
    expect(set.version).toBe(version);
    const dirs = set.dirs(name);
    expect(dirs.length).toBe(version === 1 ? new Set(dirs).size : 1);
    for (const d of dirs) expect(await exists(d)).toBe(true);
    expect(await set.pids(name)).toEqual([]);
    expect(await set.isFrozen(name)).toBe(false);
  });

  it('adopts a running tree, children forked before the adoption included', async () => {
    root = startTicker(file(), 2);
    const rootPid = root.pid!;
    await waitUntil(async () => (await childPids(file())).length === 2);
    const kids = await childPids(file());
    await waitUntil(async () => (await readCounter(`${file()}.1`)) > 0);

    const moved = await set.adopt(name, rootPid);
    expect(moved[0]).toBe(rootPid);
    expect(moved.slice(1).sort()).toEqual([...kids].sort());
    expect(await set.pids(name)).toEqual([rootPid, ...kids].sort((a, b) => a - b));

    // Forked after the move: born inside without another adopt.
    root.kill('SIGUSR2');
    await waitUntil(async () => (await childPids(file())).length === 3);
    const late = (await childPids(file()))[2]!;
    await waitUntil(async () => (await set.pids(name)).includes(late));
  });

  it('freezes the whole tree and thaws it (timings logged)', async () => {
    const files = [file(), `${file()}.0`, `${file()}.1`, `${file()}.2`];
    await waitUntil(async () => (await Promise.all(files.map(readCounter))).every((n) => n > 0));

    let t = performance.now();
    await set.freeze(name);
    const freezeMs = performance.now() - t;
    expect(await set.isFrozen(name)).toBe(true);
    const frozenAt = await Promise.all(files.map(readCounter));
    await delay(200);
    expect(await Promise.all(files.map(readCounter))).toEqual(frozenAt);

    t = performance.now();
    await set.thaw(name);
    const thawMs = performance.now() - t;
    expect(await set.isFrozen(name)).toBe(false);
    await waitUntil(async () => {
      const now = await Promise.all(files.map(readCounter));
      return now.every((n, i) => n > frozenAt[i]!);
    });
    console.log(
      `cgroup v${version}: freeze ${freezeMs.toFixed(2)} ms, thaw ${thawMs.toFixed(2)} ms (${files.length} processes)`,
    );

    // Repeated cycles: the wake path's figure, not a one-off.
    const thaws: number[] = [];
    for (let i = 0; i < 10; i++) {
      await set.freeze(name);
      t = performance.now();
      await set.thaw(name);
      thaws.push(performance.now() - t);
    }
    thaws.sort((a, b) => a - b);
    console.log(
      `cgroup v${version}: thaw over 10 cycles: median ${thaws[5]!.toFixed(2)} ms, max ${thaws[9]!.toFixed(2)} ms`,
    );
  });

  it('refuses to adopt this process or a missing pid, or into a missing group', async () => {
    await expect(set.adopt(name, process.pid)).rejects.toThrow(/holds this process/);
    await expect(set.adopt(name, 1)).rejects.toThrow(/cannot adopt/);
    await expect(set.adopt(name, 2 ** 22 + 7)).rejects.toThrow(/no such process/);
    await expect(set.adopt('db-missing', root!.pid!)).rejects.toThrow(/does not exist/);
    await expect(set.freeze('db-missing')).rejects.toThrow(/does not exist/);
  });

  it('writes the limits it supports and refuses the others', async () => {
    const limits = { memoryBytes: 256 * 1024 * 1024, cpuQuota: 0.5, pids: 64 };
    const supported = Object.fromEntries(
      Object.entries(limits).filter(([k]) => set.supports.has(k as keyof typeof limits)),
    );
    await set.create('db-limits', supported);
    await set.create('db-limits', supported); // idempotent
    expect(await set.limits('db-limits')).toEqual(supported);
    const [first] = set.dirs('db-limits');
    if (set.supports.has('memoryBytes')) {
      const memFile =
        version === 1
          ? path.join(set.dirs('db-limits')[1]!, 'memory.limit_in_bytes')
          : path.join(first!, 'memory.max');
      expect((await readFile(memFile, 'utf8')).trim()).toBe(String(limits.memoryBytes));
    }
    for (const kind of Object.keys(limits) as (keyof typeof limits)[]) {
      if (!set.supports.has(kind)) {
        await expect(set.create('db-limits', { [kind]: limits[kind] })).rejects.toThrow(
          /cannot limit/,
        );
      }
    }
    await expect(set.create('db-limits', { pids: -1 })).rejects.toThrow(/invalid cgroup limit/);
    await expect(set.create('db-limits', { memoryBytes: 1.5 })).rejects.toThrow(/invalid/);
    expect(await set.remove('db-limits')).toBe(true);
  });

  it('remove keeps a group with processes (thawed), then removes it once they exit', async () => {
    await set.freeze(name);
    expect(await set.remove(name)).toBe(false);
    expect(await set.isFrozen(name)).toBe(false); // never left stuck
    const inside = await set.pids(name);
    expect(inside.length).toBe(4);
    for (const d of set.dirs(name)) expect(await exists(d)).toBe(true);

    const rootPid = root!.pid!;
    await killAll(inside.filter((p) => p !== rootPid));
    await killAll([rootPid]);
    await waitUntil(async () => (await set.pids(name)).length === 0);
    expect(await set.remove(name)).toBe(true);
    for (const d of set.dirs(name)) expect(await exists(d)).toBe(false);
    expect(await set.remove(name)).toBe(true); // idempotent
    expect(await set.isFrozen(name)).toBe(false);
    expect(await set.pids(name)).toEqual([]);
  });

  it('freezes and removes an empty group', async () => {
    await set.create('db-empty');
    await set.freeze('db-empty');
    expect(await set.isFrozen('db-empty')).toBe(true);
    expect(await set.remove('db-empty')).toBe(true);
    for (const d of set.dirs('db-empty')) expect(await exists(d)).toBe(false);
  });
}
