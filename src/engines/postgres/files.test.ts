import { mkdtemp, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openAppend, readText, writeOwned } from './files.js';

describe('root file access inside service-user directories', () => {
  let dir: string;
  let victim: string;
  const me = { uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0 };

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'pier-pg-files-'));
    victim = path.join(dir, 'victim');
    await writeFile(victim, 'precious', { mode: 0o644 });
  });

  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('writes through a fresh file, never through a planted link', async () => {
    const file = path.join(dir, 'pier.conf');
    await symlink(victim, `${file}.tmp`);
    await writeOwned(me, file, 'port = 1\n');
    expect(await readFile(file, 'utf8')).toBe('port = 1\n');
    expect(await readFile(victim, 'utf8')).toBe('precious');
    expect((await stat(file)).mode & 0o777).toBe(0o600);
  });

  it('refuses to read or append through a link', async () => {
    const link = path.join(dir, 'postgres.log');
    await symlink(victim, link);
    await expect(readText(link)).rejects.toThrow(/ELOOP|symbolic link/);
    await expect(openAppend(me, link)).rejects.toThrow(/ELOOP|symbolic link/);
    expect(await readText(path.join(dir, 'missing'))).toBeUndefined();
    expect((await stat(victim)).mode & 0o777).toBe(0o644);
  });
});
