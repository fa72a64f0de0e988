/**
 * Files of a machine through a root directory: reading, writing and listing inside it,
 * symlinks followed as the machine would follow them, and every way out refused.
 */
import { execFileSync } from 'node:child_process';
import { closeSync, constants, openSync } from 'node:fs';
import {
  lstat,
  mkdir,
  mkdtemp,
  open,
  readdir,
  readFile,
  rm,
  stat,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  openRegular,
  PathError,
  PathEscapeError,
  ProtectedPathError,
  SpecialFileError,
} from './confined.js';
import { type FileUser } from './file-user.js';
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
const owner = { mode: 0o644 };
/** Machine root: host uid 200000 with Docker's capabilities inside its namespace. */
export const machineRoot: FileUser = {
  uid: 200_000,
  gid: 200_000,
  groups: [],
  dacOverride: true,
  dacReadSearch: false,
  fowner: true,
};

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
  // The machine's files are its range's, as an unpacked image's are.
  execFileSync('chown', ['-hR', '200000:200000', root]);
  files = await GuestFiles.atDir(root, machineRoot);
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
    // Owned, with the directories made for it, by machine root: host uid 200000.
    for (const p of ['new', 'new/dir', 'new/dir/file']) {
      const st = await stat(path.join(root, p));
      expect([st.uid, st.gid]).toEqual([200_000, 200_000]);
    }
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

/** `p`, or a rejection after `ms`: a regression that blocks fails instead of hanging. */
function soon<T>(p: Promise<T>, ms = 2000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`still waiting after ${ms} ms`)), ms);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

describe('special files and the kernel’s places', () => {
  let server: Server;
  const fifo = () => path.join(root, 'tmp/fifo');

  beforeAll(async () => {
    await mkdir(path.join(root, 'tmp'), { recursive: true });
    execFileSync('mkfifo', [fifo()]);
    server = createServer();
    await new Promise<void>((resolve) => server.listen(path.join(root, 'tmp/sock'), resolve));
    // What the machine's own /proc would hold, so that a reach into it would succeed.
    await mkdir(path.join(root, 'proc/1'), { recursive: true });
    await writeFile(path.join(root, 'proc/1/environ'), 'SECRET=machine\n');
    await mkdir(path.join(root, 'sys/kernel'), { recursive: true });
    await writeFile(path.join(root, 'sys/kernel/notes'), 'kernel\n');
    await mkdir(path.join(root, 'dev'), { recursive: true });
    await writeFile(path.join(root, 'dev/null'), 'not a device\n');
    await symlink('/proc/self/environ', path.join(root, 'tmp/env'));
    await symlink('../proc/1/environ', path.join(root, 'tmp/rel-env'));
    await symlink('/proc', path.join(root, 'tmp/proc'));
    await symlink('/', path.join(root, 'tmp/top'));
    await writeFile(path.join(root, 'tmp/plain'), 'plain\n');
    execFileSync('chown', ['-hR', '200000:200000', path.join(root, 'tmp')]);
  });

  afterAll(async () => {
    // A regression leaves opens of the FIFO blocked in the thread pool: a writer frees them.
    try {
      closeSync(openSync(fifo(), constants.O_WRONLY | constants.O_NONBLOCK));
    } catch {
      // ENXIO: nobody is waiting on it, as it should be.
    }
    await new Promise((resolve) => server?.close(resolve));
  });

  it('refuses to read a FIFO at once, and the thread pool stays free', async () => {
    for (let i = 0; i < 10; i++) {
      await expect(soon(text('/tmp/fifo'))).rejects.toMatchObject({
        name: 'SpecialFileError',
        kind: 'FIFO',
      });
    }
    // Ten blocked opens would hold every thread of libuv's pool (4): this would wait.
    expect(await soon(readFile(path.join(root, 'tmp/plain'), 'utf8'))).toBe('plain\n');
    await expect(soon(files.list('/tmp/fifo'))).rejects.toMatchObject({ code: 'ENOTDIR' });
  });

  it('refuses sockets and devices without opening them', async () => {
    await expect(soon(text('/tmp/sock'))).rejects.toMatchObject({
      name: 'SpecialFileError',
      kind: 'socket',
    });
    // The host's /dev as a root: /null is a character device, looked at through O_PATH.
    const dev = await GuestFiles.atDir('/dev', machineRoot);
    try {
      const read = dev.read('/null', 10).then(() => 'read');
      await expect(soon(read)).rejects.toMatchObject({ kind: 'character device' });
    } finally {
      await dev.close();
    }
  });

  it('refuses /proc, /sys and /dev as the machine resolves them, links included', async () => {
    for (const p of [
      '/proc/1/environ',
      '/sys/kernel/notes',
      '/dev/null',
      '/tmp/env',
      '/tmp/rel-env',
      '/tmp/proc/1/environ',
      '/tmp/top/proc/1/environ',
      '/tmp/../proc/1/environ',
    ]) {
      await expect(soon(text(p)), p).rejects.toBeInstanceOf(ProtectedPathError);
    }
    for (const p of ['/proc', '/proc/1', '/sys/kernel', '/dev', '/tmp/proc']) {
      await expect(soon(files.list(p)), p).rejects.toBeInstanceOf(ProtectedPathError);
    }
  });

  it('refuses whatever sits on a pseudo file system, wherever it is mounted', async () => {
    // The host's /proc and /sys as roots stand for a proc or sysfs mounted anywhere.
    const proc = await GuestFiles.atDir('/proc', machineRoot);
    const sys = await GuestFiles.atDir('/sys', machineRoot);
    try {
      await expect(soon(proc.read('/version', 1 << 20))).rejects.toMatchObject({
        name: 'ProtectedPathError',
        fsType: 'proc',
      });
      await expect(soon(proc.read('/self/environ', 1 << 20))).rejects.toMatchObject({
        fsType: 'proc',
      });
      await expect(soon(proc.list('/'))).rejects.toMatchObject({ fsType: 'proc' });
      await expect(soon(sys.list('/kernel'))).rejects.toMatchObject({ fsType: 'sysfs' });
    } finally {
      await proc.close();
      await sys.close();
    }
    // A file of a pseudo file system in an ordinary directory (a bind mount) is refused
    // after its O_PATH handle is looked at, before it is opened.
    const dir = await open('/proc', constants.O_RDONLY | constants.O_DIRECTORY);
    try {
      await expect(soon(openRegular(dir, 'version', '/x/version'))).rejects.toMatchObject({
        fsType: 'proc',
      });
    } finally {
      await dir.close();
    }
  });

  it('never writes over a FIFO or socket, nor into the kernel’s places', async () => {
    await expect(
      soon(files.write('/tmp/fifo', bytes('x'), { ...owner, cap: 100 })),
    ).rejects.toBeInstanceOf(SpecialFileError);
    expect((await lstat(fifo())).isFIFO()).toBe(true);
    await expect(
      soon(files.write('/tmp/sock', bytes('x'), { ...owner, cap: 100 })),
    ).rejects.toBeInstanceOf(SpecialFileError);
    for (const p of ['/proc/1/new', '/proc/2/new', '/sys/x', '/dev/x', '/tmp/proc/1/new']) {
      await expect(
        soon(files.write(p, bytes('x'), { ...owner, cap: 100 })),
        p,
      ).rejects.toBeInstanceOf(ProtectedPathError);
    }
    await expect(stat(path.join(root, 'proc/1/new'))).rejects.toMatchObject({ code: 'ENOENT' });
    await expect(stat(path.join(root, 'proc/2'))).rejects.toMatchObject({ code: 'ENOENT' });
    await expect(stat(path.join(root, 'dev/x'))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('still reads, lists and writes ordinary files, directories and links', async () => {
    expect(await text('/tmp/plain')).toBe('plain\n');
    const byName = Object.fromEntries((await files.list('/tmp')).map((e) => [e.name, e]));
    expect(byName.fifo).toMatchObject({ type: 'other' });
    expect(byName.env).toMatchObject({ type: 'symlink', target: '/proc/self/environ' });
    expect((await files.list('/')).map((e) => e.name)).toEqual(
      expect.arrayContaining(['proc', 'sys', 'dev', 'tmp']),
    );
    await files.write('/tmp/top/tmp/made', bytes('made'), { ...owner, cap: 100 });
    expect(await text('/tmp/made')).toBe('made');
  });
});

describe('as the machine’s user', () => {
  let base2: string;
  const alice: FileUser = {
    uid: 201_000,
    gid: 201_000,
    groups: [],
    dacOverride: false,
    dacReadSearch: false,
    fowner: false,
  };
  const bob: FileUser = { ...alice, uid: 201_001, gid: 201_001, groups: [202_000] }; // in "team"

  const as = (user: FileUser) => GuestFiles.atDir(path.join(base2, 'root'), user);
  const r = (p: string) => path.join(base2, 'root', p);
  /** Runs `fn` with the files opened as `user`. */
  async function withUser<T>(user: FileUser, fn: (f: GuestFiles) => Promise<T>): Promise<T> {
    const f = await as(user);
    try {
      return await fn(f);
    } finally {
      await f.close();
    }
  }
  const readAs = (user: FileUser, p: string) =>
    withUser(user, async (f) => {
      let out = '';
      for await (const c of (await f.read(p, 1024)).stream) out += String(c);
      return out;
    });
  const writeAs = (user: FileUser, p: string, body: string) =>
    withUser(user, (f) => f.write(p, bytes(body), { mode: 0o644, cap: 100 }));
  const listAs = (user: FileUser, p: string) =>
    withUser(user, async (f) => (await f.list(p)).map((e) => e.name));
  const denied = (action: string) => ({ name: 'PermissionDeniedError', action });

  beforeAll(async () => {
    base2 = await mkdtemp(path.join(tmpdir(), 'pier-files-user-'));
    const made: [string, number, string, string?][] = [
      // path, mode, owner (host ids), content (a directory without)
      ['', 0o755, '200000:200000'],
      ['home', 0o755, '200000:200000'],
      ['home/alice', 0o700, '201000:201000'],
      ['home/alice/diary', 0o644, '201000:201000', 'dear diary\n'],
      ['data', 0o755, '200000:200000'],
      ['data/alice.key', 0o600, '201000:201000', 'alice key\n'],
      ['data/open', 0o644, '201000:201000', 'open\n'],
      ['shared', 0o755, '200000:200000'],
      ['shared/conf', 0o666, '200000:200000', 'conf\n'],
      ['srv', 0o755, '201001:201001'],
      ['srv/mine', 0o600, '201001:201001', 'mine\n'],
      ['team', 0o770, '200000:202000'],
      ['tmp', 0o1777, '200000:200000'],
      ['tmp/alice', 0o666, '201000:201000', 'alice tmp\n'],
      // What the platform binds into a machine: the host's, outside the machine's range.
      ['etc', 0o755, '200000:200000'],
      ['etc/pier', 0o755, '200000:200000'],
      ['etc/pier/ca.crt', 0o644, '0:0', 'platform ca\n'],
      ['platform', 0o755, '0:0'],
    ];
    for (const [p, mode, ids, content] of made) {
      if (content === undefined) await mkdir(r(p), { recursive: true });
      else await writeFile(r(p), content);
      execFileSync('chown', [ids, r(p)]);
      execFileSync('chmod', [mode.toString(8), r(p)]);
    }
  });

  afterAll(async () => {
    if (base2) await rm(base2, { recursive: true, force: true });
  });

  it('refuses to read another user’s 0600 file, or anything under their 0700 directory', async () => {
    await expect(readAs(bob, '/data/alice.key')).rejects.toMatchObject(denied('read'));
    await expect(readAs(bob, '/home/alice/diary')).rejects.toMatchObject(denied('search'));
    // Nor through a link, nor by climbing back out of it.
    await expect(readAs(bob, '/home/alice/../alice/diary')).rejects.toMatchObject(denied('search'));
    expect(await readAs(bob, '/data/open')).toBe('open\n');
    expect(await readAs(alice, '/data/alice.key')).toBe('alice key\n');
    expect(await readAs(alice, '/home/alice/diary')).toBe('dear diary\n');
  });

  it('refuses to list another user’s 0700 directory', async () => {
    await expect(listAs(bob, '/home/alice')).rejects.toMatchObject(denied('list'));
    expect(await listAs(alice, '/home/alice')).toEqual(['diary']);
    expect(await listAs(bob, '/srv')).toEqual(['mine']);
  });

  it('refuses to write where the user may not, and leaves nothing behind', async () => {
    await expect(writeAs(bob, '/shared/new', 'x')).rejects.toMatchObject(denied('write'));
    // Nor may it make a directory there, nor write a file it may write into a directory it may not.
    await expect(writeAs(bob, '/shared/dir/new', 'x')).rejects.toMatchObject(denied('write'));
    await expect(writeAs(bob, '/shared/conf', 'x')).rejects.toMatchObject(denied('write'));
    await expect(writeAs(bob, '/data/open', 'x')).rejects.toMatchObject(denied('write'));
    expect(await readFile(r('data/open'), 'utf8')).toBe('open\n');
    expect((await readdir(r('shared'))).sort()).toEqual(['conf']);
    expect((await readdir(r('data'))).filter((n) => n.startsWith('.pier-upload'))).toEqual([]);
  });

  it('keeps the sticky bit’s rule: another user’s file in /tmp is not replaced', async () => {
    await expect(writeAs(bob, '/tmp/alice', 'bob')).rejects.toMatchObject(denied('replace'));
    expect(await readFile(r('tmp/alice'), 'utf8')).toBe('alice tmp\n');
    await writeAs(bob, '/tmp/bob', 'bob');
    expect(await readAs(bob, '/tmp/bob')).toBe('bob');
  });

  it('writes, reads and lists the user’s own files, and those of its groups', async () => {
    expect(await readAs(bob, '/srv/mine')).toBe('mine\n');
    await writeAs(bob, '/srv/mine', 'changed');
    await writeAs(bob, '/srv/new/deep', 'deep');
    for (const p of ['srv/mine', 'srv/new', 'srv/new/deep']) {
      const st = await stat(r(p));
      expect([p, st.uid, st.gid]).toEqual([p, 201_001, 201_001]);
    }
    expect(await listAs(bob, '/srv')).toEqual(['mine', 'new']);
    // team (0770, group 202000): bob is in the group, alice is not.
    await writeAs(bob, '/team/plan', 'plan');
    expect(await listAs(bob, '/team')).toEqual(['plan']);
    await expect(listAs(alice, '/team')).rejects.toMatchObject(denied('list'));
    await expect(writeAs(alice, '/team/x', 'x')).rejects.toMatchObject(denied('search'));
  });

  it('lets machine root read and write every file of the machine’s range', async () => {
    expect(await readAs(machineRoot, '/data/alice.key')).toBe('alice key\n');
    expect(await readAs(machineRoot, '/home/alice/diary')).toBe('dear diary\n');
    expect(await listAs(machineRoot, '/home/alice')).toEqual(['diary']);
    await writeAs(machineRoot, '/home/alice/note', 'from root');
    await writeAs(machineRoot, '/tmp/alice', 'root may');
    expect(await readFile(r('tmp/alice'), 'utf8')).toBe('root may');
  });

  it('never lets machine root write the host’s files bound into the machine', async () => {
    expect(await readAs(machineRoot, '/etc/pier/ca.crt')).toBe('platform ca\n');
    await expect(writeAs(machineRoot, '/etc/pier/ca.crt', 'evil')).rejects.toMatchObject(
      denied('write'),
    );
    expect(await readFile(r('etc/pier/ca.crt'), 'utf8')).toBe('platform ca\n');
    await expect(writeAs(machineRoot, '/platform/x', 'evil')).rejects.toMatchObject(
      denied('write'),
    );
    expect(await readdir(r('platform'))).toEqual([]);
    expect(await readdir(r('etc/pier'))).toEqual(['ca.crt']);
  });
});
