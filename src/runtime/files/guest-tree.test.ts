/**
 * Changes to a machine's tree through a root directory (what SFTP does besides reading
 * and writing files): stats, directories made, files and directories removed, renames;
 * confined, the kernel's places refused, FIFOs never opened, and as the machine's user.
 */
import { execFileSync } from 'node:child_process';
import { lstat, mkdir, mkdtemp, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PathEscapeError, ProtectedPathError } from './confined.js';
import type { FileUser } from './file-user.js';
import { GuestFiles } from './guest-files.js';

let base: string;
const r = (p: string) => path.join(base, 'root', p);

const machineRoot: FileUser = {
  uid: 200_000,
  gid: 200_000,
  groups: [],
  dacOverride: true,
  dacReadSearch: false,
  fowner: true,
};
const alice: FileUser = {
  ...machineRoot,
  uid: 201_000,
  gid: 201_000,
  dacOverride: false,
  fowner: false,
};
const bob: FileUser = { ...alice, uid: 201_001, gid: 201_001 };

async function as<T>(user: FileUser, fn: (f: GuestFiles) => Promise<T>): Promise<T> {
  const f = await GuestFiles.atDir(r(''), user);
  try {
    return await fn(f);
  } finally {
    await f.close();
  }
}
const denied = (action: string) => ({ name: 'PermissionDeniedError', action });

/** `p`, or a rejection after `ms`: a regression that blocks fails instead of hanging. */
function soon<T>(p: Promise<T>, ms = 2000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`still waiting after ${ms} ms`)), ms);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

beforeAll(async () => {
  base = await mkdtemp(path.join(tmpdir(), 'pier-tree-'));
  const made: [string, number, string, string?][] = [
    ['', 0o755, '200000:200000'],
    ['home', 0o755, '200000:200000'],
    ['home/alice', 0o755, '201000:201000'],
    ['home/alice/note', 0o644, '201000:201000', 'note\n'],
    ['home/alice/full', 0o755, '201000:201000'],
    ['home/alice/full/x', 0o644, '201000:201000', 'x'],
    ['shared', 0o755, '200000:200000'],
    ['tmp', 0o1777, '200000:200000'],
    ['tmp/alice', 0o666, '201000:201000', 'alice\n'],
    ['proc', 0o555, '200000:200000'],
    ['proc/1', 0o555, '200000:200000'],
  ];
  for (const [p, mode, ids, content] of made) {
    if (content === undefined) await mkdir(r(p), { recursive: true });
    else await writeFile(r(p), content);
    execFileSync('chown', [ids, r(p)]);
    execFileSync('chmod', [mode.toString(8), r(p)]);
  }
  execFileSync('mkfifo', [r('home/alice/fifo')]);
  await symlink('/home/alice/note', r('home/alice/link'));
  await symlink('../../../..', r('home/alice/climb'));
  execFileSync('chown', ['-h', '201000:201000', r('home/alice/fifo'), r('home/alice/link')]);
});

afterAll(async () => {
  if (base) await rm(base, { recursive: true, force: true });
});

describe('stat', () => {
  it('states a file, a link or its target, and a FIFO without opening it', async () => {
    await as(alice, async (f) => {
      const note = await f.stat('/home/alice/note', { follow: true });
      expect(note).toMatchObject({ size: 5, uid: 1000, gid: 1000 });
      expect(note.mode & 0o170000).toBe(0o100000);
      expect((await f.stat('/home/alice/link', { follow: true })).size).toBe(5);
      expect((await f.stat('/home/alice/link', { follow: false })).mode & 0o170000).toBe(0o120000);
      const fifo = await soon(f.stat('/home/alice/fifo', { follow: true }));
      expect(fifo.mode & 0o170000).toBe(0o010000);
      expect((await f.stat('/', { follow: true })).mode & 0o170000).toBe(0o040000);
    });
  });

  it('refuses the kernel’s places and a way out, and names a missing file', async () => {
    await as(alice, async (f) => {
      await expect(f.stat('/proc/1', { follow: true })).rejects.toBeInstanceOf(ProtectedPathError);
      await expect(f.stat('/home/alice/climb/x', { follow: true })).rejects.toBeInstanceOf(
        PathEscapeError,
      );
      await expect(f.stat('/../etc', { follow: true })).rejects.toBeInstanceOf(PathEscapeError);
      await expect(f.stat('/nope', { follow: true })).rejects.toMatchObject({ code: 'ENOENT' });
    });
    // The real /proc as a root stands for a proc mounted anywhere.
    const proc = await GuestFiles.atDir('/proc', machineRoot);
    try {
      await expect(proc.stat('/self/environ', { follow: true })).rejects.toMatchObject({
        fsType: 'proc',
      });
    } finally {
      await proc.close();
    }
  });
});

describe('mkdir', () => {
  it('makes a directory owned by the machine’s user with the mode asked', async () => {
    await as(alice, (f) => f.mkdir('/home/alice/made', 0o750));
    const st = await stat(r('home/alice/made'));
    expect([st.isDirectory(), st.uid, st.gid, st.mode & 0o7777]).toEqual([
      true,
      201_000,
      201_000,
      0o750,
    ]);
    await expect(as(alice, (f) => f.mkdir('/home/alice/made', 0o755))).rejects.toMatchObject({
      code: 'EEXIST',
    });
  });

  it('refuses where the user may not write, in the kernel’s places and outside', async () => {
    await expect(as(bob, (f) => f.mkdir('/home/alice/bobs', 0o755))).rejects.toMatchObject(
      denied('write'),
    );
    await expect(as(machineRoot, (f) => f.mkdir('/proc/new', 0o755))).rejects.toBeInstanceOf(
      ProtectedPathError,
    );
    await expect(as(alice, (f) => f.mkdir('/home/alice/climb/x', 0o755))).rejects.toBeInstanceOf(
      PathEscapeError,
    );
    await expect(lstat(r('home/alice/bobs'))).rejects.toMatchObject({ code: 'ENOENT' });
    await expect(lstat(r('proc/new'))).rejects.toMatchObject({ code: 'ENOENT' });
  });
});

describe('remove', () => {
  it('removes a file, a link (never its target) and an empty directory', async () => {
    await writeFile(r('home/alice/gone'), 'x');
    execFileSync('chown', ['201000:201000', r('home/alice/gone')]);
    await symlink('/home/alice/note', r('home/alice/link2'));
    await as(alice, async (f) => {
      await f.remove('/home/alice/gone', { dir: false });
      await f.remove('/home/alice/link2', { dir: false });
      await f.mkdir('/home/alice/empty', 0o755);
      await f.remove('/home/alice/empty', { dir: true });
    });
    expect(await readFile(r('home/alice/note'), 'utf8')).toBe('note\n');
    for (const p of ['gone', 'link2', 'empty']) {
      await expect(lstat(r(`home/alice/${p}`))).rejects.toMatchObject({ code: 'ENOENT' });
    }
  });

  it('refuses a directory that is not empty, the wrong kind, and what the user may not', async () => {
    await as(alice, async (f) => {
      await expect(f.remove('/home/alice/full', { dir: true })).rejects.toMatchObject({
        code: 'ENOTEMPTY',
      });
      await expect(f.remove('/home/alice/full', { dir: false })).rejects.toMatchObject({
        code: 'EISDIR',
      });
      await expect(f.remove('/home/alice/note', { dir: true })).rejects.toMatchObject({
        code: 'ENOTDIR',
      });
    });
    await expect(
      as(bob, (f) => f.remove('/home/alice/note', { dir: false })),
    ).rejects.toMatchObject(denied('remove'));
    // The sticky bit: bob may write /tmp, not remove alice's file from it.
    await expect(as(bob, (f) => f.remove('/tmp/alice', { dir: false }))).rejects.toMatchObject(
      denied('remove'),
    );
    expect(await readFile(r('tmp/alice'), 'utf8')).toBe('alice\n');
    expect(await readFile(r('home/alice/note'), 'utf8')).toBe('note\n');
  });
});

describe('rename', () => {
  it('renames within and across directories, a FIFO included', async () => {
    await as(alice, async (f) => {
      await f.rename('/home/alice/fifo', '/home/alice/fifo2');
      await f.rename('/tmp/alice', '/home/alice/from-tmp');
    });
    expect((await lstat(r('home/alice/fifo2'))).isFIFO()).toBe(true);
    expect(await readFile(r('home/alice/from-tmp'), 'utf8')).toBe('alice\n');
  });

  it('refuses an existing target, another user’s file, a way out and the kernel’s places', async () => {
    await as(alice, async (f) => {
      await expect(f.rename('/home/alice/note', '/home/alice/from-tmp')).rejects.toMatchObject({
        code: 'EEXIST',
      });
      await expect(f.rename('/home/alice/note', '/home/alice/climb/x')).rejects.toBeInstanceOf(
        PathEscapeError,
      );
      await expect(f.rename('/home/alice/note', '/shared/note')).rejects.toMatchObject(
        denied('rename'),
      );
    });
    await expect(as(bob, (f) => f.rename('/home/alice/note', '/tmp/n'))).rejects.toMatchObject(
      denied('rename'),
    );
    await expect(
      as(machineRoot, (f) => f.rename('/home/alice/note', '/proc/1/note')),
    ).rejects.toBeInstanceOf(ProtectedPathError);
    expect(await readFile(r('home/alice/note'), 'utf8')).toBe('note\n');
  });
});
