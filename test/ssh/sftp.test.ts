/**
 * `scp` and `sftp` (the stock OpenSSH 9 clients; its scp speaks SFTP) through the SSH
 * gateway against a real machine, under the files route's rules: a file up and down
 * byte for byte (read back inside the machine, owned by its user), a listing, a
 * directory made, a rename and removals, relative paths from the working directory, and
 * refused: the machine's /proc, `..` above its root, a FIFO (at once), an upload past the
 * cap, another organization's app, and a `git` login.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { readFile, stat, truncate, writeFile } from 'node:fs/promises';
import ssh2, { type SFTPWrapper } from 'ssh2';
import path from 'node:path';
import { FILE_CAP_BYTES } from '../../src/services/machines/files.js';
import type { TestOrg } from '../helpers/platform.js';
import { canRunMachines, startMachineBed, type MachineBed } from '../machines/bed.js';
import { baseOptions, runSsh, SSH_BOX, sshHome, type SshHome, type SshRun } from './client.js';

let bed: MachineBed;
let home: SshHome;
let gateway: { host: string; port: number; hostKey: string };
let knownHosts: string;
let key: { path: string; publicKey: string };
let other: TestOrg;

beforeAll(async () => {
  if (!canRunMachines) return;
  bed = await startMachineBed('sf', 110);
  home = await sshHome();
  const image = await bed.image('sftpbox:1', SSH_BOX);
  expect((await bed.req('POST', '/v1/apps', { name: 'sftpbox' })).status).toBe(201);
  const made = await bed.req('POST', '/v1/apps/sftpbox/machines', { image });
  expect(made.status, JSON.stringify(made.body)).toBe(201);
  gateway = (await bed.req('GET', '/v1/ssh')).body;
  knownHosts = await home.knownHosts('known_hosts', gateway.host, gateway.port, gateway.hostKey);
  key = await home.keyPair('person');
  expect((await bed.req('POST', '/v1/ssh-keys', { publicKey: key.publicKey })).status).toBe(201);
  other = await bed.tp.createOrg();
  const theirs = await bed.tp.request('POST', '/v1/apps', {
    token: other.token,
    body: { name: 'sftptheirs' },
  });
  expect(theirs.status).toBe(201);
  // The machine takes sessions once it runs.
  for (let tries = 0; (await inMachine('true')).code !== 0; tries++) {
    if (tries > 40) throw new Error('the machine never ran');
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
});

afterAll(async () => {
  await home?.remove();
  await bed?.close();
});

/** Runs a stock client to its end, killed past `ms`: a refusal that hangs fails the test. */
function run(program: string, args: string[], input = '', ms = 20_000): Promise<SshRun> {
  const child = spawn(program, args, { stdio: ['pipe', 'pipe', 'pipe'], timeout: ms });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  child.stdin.end(input);
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

const remote = (user = 'sftpbox') => `${user}@${gateway.host}`;
/** `scp` with the registered key: `from` and `to` as scp takes them (`host:` marks the remote). */
const scp = (from: string, to: string, user?: string) =>
  run('scp', [
    ...baseOptions(knownHosts, key.path),
    '-P',
    String(gateway.port),
    from.replace(/^host:/, `${remote(user)}:`),
    to.replace(/^host:/, `${remote(user)}:`),
  ]);
/** `sftp -b -` with the registered key: `batch` is its commands, one a line. */
const sftp = (batch: string, user?: string) =>
  run(
    'sftp',
    [...baseOptions(knownHosts, key.path), '-P', String(gateway.port), '-b', '-', remote(user)],
    batch,
  );
/** A command in the machine over the gateway's ssh. */
const inMachine = (command: string) =>
  runSsh([...baseOptions(knownHosts, key.path), '-p', String(gateway.port), remote(), command]);
const local = (name: string) => path.join(home.dir, name);

/** Runs `fn` on an SFTP session of ssh2's client (the host key checked against the gateway's). */
async function withSftp(fn: (s: SFTPWrapper) => Promise<void>): Promise<void> {
  const client = new ssh2.Client();
  const pinned = gateway.hostKey.split(' ')[1];
  await new Promise<void>((resolve, reject) => {
    client.once('ready', resolve).once('error', reject);
    client.connect({
      host: gateway.host,
      port: gateway.port,
      username: 'sftpbox',
      privateKey: readFileSync(key.path),
      hostVerifier: (k: Buffer) => k.toString('base64') === pinned,
    });
  });
  try {
    const s = await new Promise<SFTPWrapper>((resolve, reject) =>
      client.sftp((err, sftp) => (err ? reject(err) : resolve(sftp))),
    );
    await fn(s);
  } finally {
    client.end();
  }
}

describe.skipIf(!canRunMachines)('scp and sftp through the gateway', () => {
  it('scp: a file up, read back inside the machine as its user’s, and down byte for byte', async () => {
    // Large enough for many WRITEs and READs at once (OpenSSH sends 32 KiB each).
    const bytes = randomBytes(700 * 1024 + 123);
    await writeFile(local('up.bin'), bytes, { mode: 0o664 });
    const up = await scp(local('up.bin'), 'host:/srv/up.bin');
    expect(up, up.stderr).toMatchObject({ code: 0 });
    const inside = await inMachine('md5sum < /srv/up.bin; stat -c "%u:%g %a %s" /srv/up.bin');
    const md5 = (await import('node:crypto')).createHash('md5').update(bytes).digest('hex');
    // The client's mode, less a server's usual umask (022); the machine's user owns it.
    expect(inside.stdout).toBe(`${md5}  -\n1000:1000 644 ${bytes.length}\n`);
    const down = await scp('host:/srv/up.bin', local('down.bin'));
    expect(down, down.stderr).toMatchObject({ code: 0 });
    expect((await readFile(local('down.bin'))).equals(bytes)).toBe(true);
    // A relative path starts where a shell does: the machine's working directory.
    expect((await scp(local('up.bin'), 'host:rel.bin')).code).toBe(0);
    expect((await inMachine('cmp /srv/up.bin /srv/rel.bin && echo same')).stdout).toBe('same\n');
  });

  it('sftp: lists, makes a directory, puts, renames, gets and removes', async () => {
    await writeFile(local('note.txt'), 'a note\n');
    const batch = [
      'ls -l /srv',
      'mkdir /srv/dir',
      `put ${local('note.txt')} /srv/dir/note.txt`,
      'rename /srv/dir/note.txt /srv/dir/renamed.txt',
      'cd dir',
      'ls',
      `get renamed.txt ${local('got.txt')}`,
      'rm renamed.txt',
      'cd ..',
      'rmdir dir',
      'ls',
    ].join('\n');
    const res = await sftp(batch);
    expect(res, res.stderr).toMatchObject({ code: 0 });
    expect(res.stdout).toMatch(/-rw-r--r-- +1 0 +0 +7 .* index\.html/);
    expect(res.stdout).toContain('renamed.txt');
    expect(await readFile(local('got.txt'), 'utf8')).toBe('a note\n');
    expect((await inMachine('ls /srv')).stdout).not.toContain('dir');
    // An SSH token logs in as the key does (it needs no key).
    const t = await bed.req('POST', '/v1/ssh/tokens', { app: 'sftpbox' });
    expect(t.status).toBe(201);
    const byToken = await run(
      'sftp',
      [...baseOptions(knownHosts), '-P', String(gateway.port), '-b', '-', remote(t.body.token)],
      'ls /srv',
    );
    expect(byToken, byToken.stderr).toMatchObject({ code: 0 });
    expect(byToken.stdout).toContain('index.html');
  });

  it('refuses the machine’s /proc and a path that climbs out of its root', async () => {
    for (const p of ['/proc/self/environ', '/proc/1/environ', '/srv/../../etc/passwd']) {
      const res = await scp(`host:${p}`, local('stolen'));
      expect([p, res.code]).toEqual([p, 1]);
      await expect(stat(local('stolen'))).rejects.toMatchObject({ code: 'ENOENT' });
    }
    const listed = await sftp('ls /proc/1');
    expect(listed.code).toBe(1);
    expect(listed.stdout).not.toContain('environ');
    const put = await sftp(`put ${local('note.txt')} /../note.txt`);
    expect(put.code).toBe(1);
  });

  it('refuses a FIFO at once instead of waiting on it', async () => {
    expect((await inMachine('mkfifo /srv/pipe && echo made')).stdout).toBe('made\n');
    const started = Date.now();
    const res = await scp('host:/srv/pipe', local('pipe'));
    expect(res.code).toBe(1);
    expect(Date.now() - started).toBeLessThan(5000);
    const over = await scp(local('note.txt'), 'host:/srv/pipe');
    expect(over.code).toBe(1);
    expect((await inMachine('test -p /srv/pipe && echo fifo')).stdout).toBe('fifo\n');
  });

  it('says pier’s code in each refusal, for clients that show the server’s words', async () => {
    // OpenSSH shows only the status's own words (and states before it opens: a FIFO is
    // "not a regular file" to scp); ssh2's client shows the message, and opens at once.
    await withSftp(async (s) => {
      const refusal = (p: string) =>
        new Promise<string>((resolve, reject) => {
          const timer = setTimeout(() => reject(new Error(`${p}: no answer`)), 5000);
          s.open(p, 'r', (err) => {
            clearTimeout(timer);
            resolve(err ? err.message : 'opened');
          });
        });
      expect(await refusal('/proc/self/environ')).toMatch(/^forbidden: .*\/proc/);
      expect(await refusal('/srv/pipe')).toMatch(/^unprocessable: \/srv\/pipe is a FIFO/);
      expect(await refusal('/srv/../../etc/passwd')).toMatch(/^bad-request: .*outside/);
      expect(await refusal('/srv/nope')).toMatch(/^not-found: /);
    });
  });

  it('refuses an upload past the cap, and leaves nothing behind', async () => {
    await writeFile(local('big.bin'), '');
    await truncate(local('big.bin'), FILE_CAP_BYTES + 1);
    const res = await scp(local('big.bin'), 'host:/srv/big.bin');
    expect(res.code).toBe(1);
    expect((await inMachine('ls -a /srv')).stdout).not.toMatch(/big\.bin|pier-upload/);
  });

  it('refuses another organization’s app at login, and sftp to a git login', async () => {
    const theirs = await sftp('ls /', 'sftptheirs');
    expect(theirs.code).toBe(255);
    expect(theirs.stderr).toContain('Permission denied (publickey)');
    const git = await sftp('ls /', 'git');
    expect(git.code).not.toBe(0);
    expect(git.stdout).not.toContain('srv');
  });
});
