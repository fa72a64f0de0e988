/**
 * Files of a machine through a root directory: reading, writing and listing inside it,
 * symlinks followed as the machine would follow them, and every way out refused.
 */
import { mkdir, mkdtemp, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PathError, PathEscapeError } from './confined.js';
import { FileTooLargeError, GuestFiles } from './guest-files.js';

let base: string;
let root: string;
let outside: string;
let files: GuestFiles;

async function text(p: string, cap = 1024): Promise<string> {
  const { stream } = await files.read(p, cap);
  let out = '';
  for await (const c of stream) out += String(c);
  return out;
}

const bytes = (s: string) => Readable.from([Buffer.from(s)]);
const owner = { mode: 0o644, uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0 };

beforeAll(async () => {
  base = await mkdtemp(path.join(tmpdir(), 'pier-files-'));
  root = path.join(base, 'root');
  outside = path.join(base, 'secret');
  await writeFile(outside, 'host secret\n');
  await mkdir(path.join(root, 'etc'), { recursive: true });
  await mkdir(path.join(root, 'data/sub'), { recursive: true });
  await writeFile(path.join(root, 'etc/hostname'), 'machine\n');
  await writeFile(path.join(root, 'data/sub/note'), 'note\n');
  // Links as images hold them: absolute (meant for the machine's root) and relative.
  await symlink('/etc/hostname', path.join(root, 'data/abs'));
  await symlink('../etc', path.join(root, 'data/rel'));
  await symlink('../../..' + outside, path.join(root, 'data/climb'));
  await symlink(outside, path.join(root, 'data/host'));
  await symlink('loop', path.join(root, 'data/loop'));
  files = await GuestFiles.atDir(root);
});

afterAll(async () => {
  await files?.close();
  await rm(base, { recursive: true, force: true });
});

describe('reading', () => {
  it('reads a file, through absolute and relative links inside the root', async () => {
    expect(await text('/etc/hostname')).toBe('machine\n');
    expect(await text('/data/abs')).toBe('machine\n');
    expect(await text('/data/rel/hostname')).toBe('machine\n');
    expect(await text('/data/sub/../sub/./note')).toBe('note\n');
  });

  it('reads an absolute link to a host path as the machine would: inside the root', async () => {
    await expect(text('/data/host')).rejects.toBeInstanceOf(PathError);
  });

  it('refuses .. above the root, in the path or in a link', async () => {
    await expect(text('/../secret')).rejects.toBeInstanceOf(PathEscapeError);
    await expect(text('/data/../../secret')).rejects.toBeInstanceOf(PathEscapeError);
    await expect(text('/data/climb')).rejects.toBeInstanceOf(PathEscapeError);
  });

  it('names missing files, directories and loops', async () => {
    await expect(text('/nope')).rejects.toMatchObject({ code: 'ENOENT' });
    await expect(text('/etc')).rejects.toMatchObject({ code: 'EISDIR' });
    await expect(text('/etc/hostname/x')).rejects.toMatchObject({ code: 'ENOTDIR' });
    await expect(text('/data/loop')).rejects.toMatchObject({ code: 'ELOOP' });
    await expect(text('relative')).rejects.toBeInstanceOf(PathError);
  });

  it('refuses a file above the cap', async () => {
    await expect(text('/etc/hostname', 3)).rejects.toBeInstanceOf(FileTooLargeError);
  });
});

describe('writing', () => {
  it('writes a file, making its directories, and replaces it whole', async () => {
    await files.write('/new/dir/file', bytes('one'), { ...owner, cap: 100 });
    expect(await readFile(path.join(root, 'new/dir/file'), 'utf8')).toBe('one');
    await files.write('/new/dir/file', bytes('two'), { ...owner, mode: 0o600, cap: 100 });
    expect(await readFile(path.join(root, 'new/dir/file'), 'utf8')).toBe('two');
    expect((await stat(path.join(root, 'new/dir/file'))).mode & 0o777).toBe(0o600);
  });

  it('replaces a symlink in the file’s place instead of writing through it', async () => {
    await files.write('/data/host', bytes('mine'), { ...owner, cap: 100 });
    expect(await readFile(outside, 'utf8')).toBe('host secret\n');
    expect(await readFile(path.join(root, 'data/host'), 'utf8')).toBe('mine');
  });

  it('never writes outside the root, and leaves nothing behind over the cap', async () => {
    await expect(
      files.write('/data/climb/x', bytes('x'), { ...owner, cap: 100 }),
    ).rejects.toBeInstanceOf(PathEscapeError);
    await expect(
      files.write('/data/big', bytes('0123456789'), { ...owner, cap: 5 }),
    ).rejects.toBeInstanceOf(FileTooLargeError);
    const names = (await files.list('/data')).map((e) => e.name);
    expect(names.some((n) => n.startsWith('.pier-upload') || n === 'big')).toBe(false);
  });
});

describe('listing', () => {
  it('lists a directory with types, sizes, modes and link targets', async () => {
    const entries = await files.list('/data');
    const byName = Object.fromEntries(entries.map((e) => [e.name, e]));
    expect(byName.sub).toMatchObject({ type: 'dir' });
    expect(byName.abs).toMatchObject({ type: 'symlink', target: '/etc/hostname' });
    expect(entries.map((e) => e.name)).toEqual([...entries.map((e) => e.name)].sort());
    expect((await files.list('/')).map((e) => e.name)).toContain('etc');
    expect((await files.list('/data/rel')).map((e) => e.name)).toEqual(['hostname']);
    await expect(files.list('/data/climb')).rejects.toBeInstanceOf(PathEscapeError);
  });
});
