import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveUser, UserError } from './users.js';

describe('image users', () => {
  let dir: string;
  let root: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'pier-users-'));
    root = path.join(dir, 'root');
    await mkdir(path.join(root, 'etc'), { recursive: true });
    await writeFile(
      path.join(root, 'etc/passwd'),
      '# comment\nroot:x:0:0:root:/root:/bin/sh\napp:x:1000:1001::/home/app:/bin/sh\n\nweb:x:33:33:www:/var/www:/bin/false\n',
    );
    await writeFile(path.join(root, 'etc/group'), 'root:x:0:\napp:x:1001:\nstaff:x:50:app\n');
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('resolves names, ids and pairs of them', async () => {
    expect(await resolveUser(root, undefined)).toEqual({ uid: 0, gid: 0, home: '/root' });
    expect(await resolveUser(root, '')).toEqual({ uid: 0, gid: 0, home: '/root' });
    // app is a member of staff (50) in /etc/group: a supplementary group, as Docker gives.
    expect(await resolveUser(root, 'app')).toEqual({
      uid: 1000,
      gid: 1001,
      groups: [50],
      home: '/home/app',
    });
    expect(await resolveUser(root, '33')).toEqual({ uid: 33, gid: 33, home: '/var/www' });
    expect(await resolveUser(root, '4242')).toEqual({ uid: 4242, gid: 0 });
    expect(await resolveUser(root, '4242:7')).toEqual({ uid: 4242, gid: 7 });
    expect(await resolveUser(root, 'app:staff')).toEqual({
      uid: 1000,
      gid: 50,
      home: '/home/app',
    });
    expect(await resolveUser(root, 'web:0')).toMatchObject({ uid: 33, gid: 0 });
  });

  it('refuses names and groups the image does not define', async () => {
    await expect(resolveUser(root, 'ghost')).rejects.toBeInstanceOf(UserError);
    await expect(resolveUser(root, 'app:ghosts')).rejects.toThrow(
      /"ghosts" is not in the image's \/etc\/group/,
    );
    await expect(resolveUser(root, '99999999999')).rejects.toThrow(/invalid uid/);
  });

  it('never reads a file outside the root through a symlink, nor blocks on a fifo', async () => {
    const evil = path.join(dir, 'evil');
    await mkdir(path.join(evil, 'etc'), { recursive: true });
    const outside = path.join(dir, 'outside-passwd');
    await writeFile(outside, 'ghost:x:7:7::/:/bin/sh\n');
    // Absolute and relative escapes: inside the machine both point into its own root.
    await symlink(outside, path.join(evil, 'etc/passwd'));
    await symlink('../../../../../../../../group-host', path.join(evil, 'etc/group'));
    await writeFile(path.join(dir, 'group-host'), 'ghosts:x:9:\n');
    await expect(resolveUser(evil, 'ghost')).rejects.toBeInstanceOf(UserError);
    await expect(resolveUser(evil, '0:ghosts')).rejects.toBeInstanceOf(UserError);

    const fifo = path.join(dir, 'fifo-root');
    await mkdir(path.join(fifo, 'etc'), { recursive: true });
    execFileSync('mkfifo', [path.join(fifo, 'etc/passwd')]);
    await expect(resolveUser(fifo, 'app')).rejects.toBeInstanceOf(UserError);
    expect(await resolveUser(fifo, '5')).toEqual({ uid: 5, gid: 0 });
  });
});
