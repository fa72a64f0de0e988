import { mkdir, mkdtemp, rm, symlink } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveInRoot } from './rootfs.js';

describe('resolveInRoot', () => {
  let root: string;
  beforeAll(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'pier-resolve-'));
    await mkdir(path.join(root, 'etc'));
    await mkdir(path.join(root, 'srv/app'), { recursive: true });
    await symlink('/etc', path.join(root, 'abs')); // absolute: restarts at the root
    await symlink('../../../../..', path.join(root, 'srv/up')); // climbs past the root
    await symlink('app', path.join(root, 'srv/rel'));
    await symlink('loop2', path.join(root, 'loop1'));
    await symlink('loop1', path.join(root, 'loop2'));
    await symlink('/srv/rel/missing/../x', path.join(root, 'via'));
  });
  afterAll(() => rm(root, { recursive: true, force: true }));

  it('keeps plain and missing paths as they are', async () => {
    expect(await resolveInRoot(root, '/data')).toBe('/data');
    expect(await resolveInRoot(root, '/srv/app/./cache/')).toBe('/srv/app/cache');
    expect(await resolveInRoot(root, '/')).toBe('/');
  });

  it('follows symlinks as the sandbox would, never out of the root', async () => {
    expect(await resolveInRoot(root, '/abs/ssl')).toBe('/etc/ssl');
    expect(await resolveInRoot(root, '/srv/up/etc')).toBe('/etc');
    expect(await resolveInRoot(root, '/srv/rel/data')).toBe('/srv/app/data');
    expect(await resolveInRoot(root, '/../../etc')).toBe('/etc');
    expect(await resolveInRoot(root, '/via')).toBe('/srv/app/x');
  });

  it('refuses loops and relative targets', async () => {
    await expect(resolveInRoot(root, '/loop1/x')).rejects.toThrow(/too many symlinks/);
    await expect(resolveInRoot(root, 'etc')).rejects.toThrow(/absolute/);
  });
});
