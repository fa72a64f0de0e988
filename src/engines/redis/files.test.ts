import { execFileSync } from 'node:child_process';
import { chown, lstat, mkdir, mkdtemp, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { copyRegularFile, seizeTree } from './files.js';
import { redisPaths } from './paths.js';

describe('engine file handling', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'pier-redis-files-'));
  });
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('takes over a copied tree: links, fifos and sockets go, files stay', async () => {
    const tree = path.join(dir, 'tree');
    await mkdir(path.join(tree, 'appendonlydir'), { recursive: true });
    await writeFile(path.join(tree, 'dump.rdb'), 'data');
    await writeFile(path.join(tree, 'appendonlydir', 'appendonly.aof.1.incr.aof'), 'data');
    await symlink('/etc/passwd', path.join(tree, 'appendonlydir', 'appendonly.aof.manifest'));
    await symlink('/etc', path.join(tree, 'etc'));
    execFileSync('mkfifo', [path.join(tree, 'fifo')]);
    await seizeTree(tree);
    expect((await readdir(tree)).sort()).toEqual(['appendonlydir', 'dump.rdb']);
    expect(await readdir(path.join(tree, 'appendonlydir'))).toEqual(['appendonly.aof.1.incr.aof']);
    expect((await lstat(tree)).mode & 0o777).toBe(0o700);
  });

  it.skipIf(process.getuid?.() !== 0)('copies only files of the expected owner', async () => {
    const src = path.join(dir, 'owned');
    await writeFile(src, 'x');
    await chown(src, 0, 0);
    await expect(copyRegularFile(src, path.join(dir, 'copy1'), 12345)).rejects.toThrow(
      /does not belong/,
    );
    await copyRegularFile(src, path.join(dir, 'copy2'), 0);
    expect((await lstat(path.join(dir, 'copy2'))).size).toBe(1);
  });

  it('keeps the socket of a deep volume in a short directory', () => {
    const shallow = redisPaths('/var/lib/pier/pool/volumes/redis-dbi-1');
    expect(shallow.socket).toBe('/var/lib/pier/pool/volumes/redis-dbi-1/run/redis.sock');
    expect(shallow.socketRoot).toBeUndefined();
    const deep = redisPaths(`/srv/${'d'.repeat(100)}/volumes/redis-dbi-1`);
    expect(deep.socketRoot).toMatch(/^\/tmp\/pier-redis-[0-9a-f]{16}$/);
    expect(deep.socket).toBe(`${deep.socketRoot}/run/redis.sock`);
    expect(redisPaths(`/srv/${'d'.repeat(100)}/volumes/redis-dbi-1`).socket).toBe(deep.socket);
  });
});
