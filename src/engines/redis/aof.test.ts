import {
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  rm,
  symlink,
  utimes,
  writeFile,
} from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EngineError } from '../engine.js';
import {
  aofOldest,
  copyAof,
  parseManifest,
  readManifest,
  renderManifest,
  truncateAof,
} from './aof.js';
import { redisBinaries } from './binaries.js';

/** A command as the AOF holds it. */
const cmd = (...args: string[]) =>
  `*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`;
const ts = (s: number) => `#TS:${s}\r\n`;

const BASE = 'appendonly.aof.1.base.aof';
const INCR1 = 'appendonly.aof.1.incr.aof';
const INCR2 = 'appendonly.aof.2.incr.aof';

/** An AOF dir: an AOF-format base and two incremental files, seconds 100 to 103. */
async function makeAof(dir: string, tail = ''): Promise<void> {
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  await writeFile(path.join(dir, BASE), cmd('SET', 'base', '0'));
  await writeFile(
    path.join(dir, INCR1),
    ts(100) + cmd('SELECT', '0') + cmd('SET', 'a', '1') + ts(101) + cmd('SET', 'b', '2'),
  );
  await writeFile(
    path.join(dir, INCR2),
    ts(102) + cmd('SET', 'c', '3') + ts(103) + cmd('SET', 'd', '4') + tail,
  );
  await writeFile(
    path.join(dir, 'appendonly.aof.manifest'),
    renderManifest([
      { file: BASE, seq: 1, type: 'b' },
      { file: INCR1, seq: 1, type: 'i' },
      { file: INCR2, seq: 2, type: 'i' },
    ]),
  );
}

describe('AOF handling', () => {
  let dir: string;
  let checkAof: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'pier-aof-'));
    checkAof = (await redisBinaries()).checkAof;
  });
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('parses and renders a manifest; refuses names that are not AOF files', () => {
    const text = `file ${BASE} seq 1 type b\nfile ${INCR1} seq 1 type i\n`;
    const entries = parseManifest(text);
    expect(entries).toEqual([
      { file: BASE, seq: 1, type: 'b' },
      { file: INCR1, seq: 1, type: 'i' },
    ]);
    expect(renderManifest(entries)).toBe(text);
    for (const bad of ['file ../x seq 1 type i', 'file id_rsa seq 1 type b', 'file a seq x']) {
      expect(() => parseManifest(bad)).toThrow(EngineError);
    }
  });

  it('cuts inside the last file at the first later second', async () => {
    const aof = path.join(dir, 'cut-inside');
    await makeAof(aof);
    await truncateAof(aof, 102, checkAof);
    expect(await readFile(path.join(aof, INCR2), 'utf8')).toBe(ts(102) + cmd('SET', 'c', '3'));
    expect((await readManifest(aof))?.map((e) => e.file)).toEqual([BASE, INCR1, INCR2]);
  });

  it('drops whole later files, which redis-check-aof refuses to cut', async () => {
    const aof = path.join(dir, 'cut-between');
    await makeAof(aof);
    await truncateAof(aof, 101, checkAof);
    expect((await readManifest(aof))?.map((e) => e.file)).toEqual([BASE, INCR1]);
    expect(await readdir(aof)).not.toContain(INCR2);
    await makeAof(aof);
    await truncateAof(aof, 100, checkAof);
    expect(await readFile(path.join(aof, INCR1), 'utf8')).toBe(
      ts(100) + cmd('SELECT', '0') + cmd('SET', 'a', '1'),
    );
    expect((await readManifest(aof))?.map((e) => e.file)).toEqual([BASE, INCR1]);
  });

  it('drops a later file without a leading #TS (a rewrite in the same second) or an empty one', async () => {
    const aof = path.join(dir, 'cut-untimed');
    for (const untimed of [cmd('SET', 'x', '9') + ts(103) + cmd('SET', 'd', '4'), '']) {
      await makeAof(aof);
      await writeFile(path.join(aof, INCR2), untimed);
      await truncateAof(aof, 100, checkAof);
      expect((await readManifest(aof))?.map((e) => e.file)).toEqual([BASE, INCR1]);
      expect(await readdir(aof)).not.toContain(INCR2);
      expect(await readFile(path.join(aof, INCR1), 'utf8')).toBe(
        ts(100) + cmd('SELECT', '0') + cmd('SET', 'a', '1'),
      );
    }
  });

  it('keeps only the base for a moment before the first write', async () => {
    const aof = path.join(dir, 'base-only');
    await makeAof(aof);
    await truncateAof(aof, 99, checkAof);
    expect((await readManifest(aof))?.map((e) => e.file)).toEqual([BASE]);
    expect((await readdir(aof)).sort()).toEqual([BASE, 'appendonly.aof.manifest']);
  });

  it('cuts a torn last command (a copy taken mid-write) when nothing later is cut', async () => {
    const aof = path.join(dir, 'torn');
    const torn = '*3\r\n$3\r\nSET\r\n$1\r\ne';
    await makeAof(aof, torn);
    await truncateAof(aof, 200, checkAof);
    const incr2 = await readFile(path.join(aof, INCR2), 'utf8');
    expect(incr2.endsWith(cmd('SET', 'd', '4'))).toBe(true);
    await makeAof(aof, torn);
    await truncateAof(aof, 102, checkAof); // the cut falls before the torn tail
    expect(await readFile(path.join(aof, INCR2), 'utf8')).toBe(ts(102) + cmd('SET', 'c', '3'));
  });

  it('dates the archive from its base, or from its first second without one', async () => {
    const aof = path.join(dir, 'oldest');
    await makeAof(aof);
    const when = new Date('2030-01-02T03:04:05.678Z');
    await utimes(path.join(aof, BASE), when, when);
    expect(await aofOldest(aof)).toEqual(when);
    await writeFile(
      path.join(aof, 'appendonly.aof.manifest'),
      renderManifest([{ file: INCR1, seq: 1, type: 'i' }]),
    );
    expect(await aofOldest(aof)).toEqual(new Date(100_000));
    expect(await aofOldest(path.join(dir, 'none'))).toBeUndefined();
  });

  it('copies in manifest order and never through a link', async () => {
    const src = path.join(dir, 'copy-src');
    await makeAof(src);
    const dst = path.join(dir, 'copy-dst');
    expect(await copyAof(src, dst)).toBe(true);
    expect((await readdir(dst)).sort()).toEqual((await readdir(src)).sort());
    expect(await readFile(path.join(dst, INCR2), 'utf8')).toBe(
      await readFile(path.join(src, INCR2), 'utf8'),
    );
    // A server that points its AOF at a file of root's gets nothing copied.
    const secret = path.join(dir, 'secret');
    await writeFile(secret, 'root only');
    await rm(path.join(src, INCR2));
    await symlink(secret, path.join(src, INCR2));
    await expect(copyAof(src, dst)).rejects.toThrow(/ELOOP|symbolic link/);
    expect(await copyAof(path.join(dir, 'nothing'), dst)).toBe(false);
  });
});
