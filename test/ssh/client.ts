/**
 * The stock OpenSSH client against pier's gateway, as a person would run it: no config
 * file, the gateway's host key pinned in a known_hosts file of the test's own, and no
 * question asked (BatchMode): a host key that does not match fails, as it must.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { busyboxLayer, type ImageSpec } from '../../src/runtime/images/build.test-helper.js';

const execFileP = promisify(execFile);

/**
 * The image the gateway tests shell into: busybox httpd on 3000 as user `web` (1000) in
 * `/srv`, which that user owns.
 */
export const SSH_BOX: ImageSpec = {
  layers: [
    busyboxLayer(),
    [
      {
        path: 'etc/passwd',
        content: 'root:x:0:0::/root:/bin/sh\nweb:x:1000:1000::/srv:/bin/sh\n',
      },
      { path: 'etc/group', content: 'root:x:0:\nweb:x:1000:\n' },
      { path: 'srv/', uid: 1000, gid: 1000 },
      { path: 'srv/index.html', content: 'served\n' },
    ],
  ],
  config: { Cmd: ['httpd', '-f', '-p', '3000', '-h', '/srv'], User: 'web', WorkingDir: '/srv' },
};

export const SSH = '/usr/bin/ssh';

export interface SshRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** A scratch directory with known_hosts files and client keys; `remove()` at the end. */
export interface SshHome {
  dir: string;
  /** Writes a known_hosts file pinning `hostKey` for `[host]:port`; answers its path. */
  knownHosts(name: string, host: string, port: number, hostKey: string): Promise<string>;
  /** Makes an ed25519 key pair with ssh-keygen; answers the private key's path and the public line. */
  keyPair(name: string): Promise<{ path: string; publicKey: string }>;
  remove(): Promise<void>;
}

export async function sshHome(): Promise<SshHome> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'pier-ssh-test-'));
  return {
    dir,
    async knownHosts(name, host, port, hostKey) {
      const file = path.join(dir, name);
      await writeFile(file, `[${host}]:${port} ${hostKey}\n`);
      return file;
    },
    async keyPair(name) {
      const file = path.join(dir, name);
      await execFileP('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', name, '-f', file]);
      return { path: file, publicKey: (await readFile(`${file}.pub`, 'utf8')).trim() };
    },
    remove: () => rm(dir, { recursive: true, force: true }),
  };
}

/** Options every run takes: no user config, a pinned host key, never a prompt. */
export function baseOptions(knownHosts: string, identity?: string): string[] {
  return [
    '-F',
    '/dev/null',
    '-o',
    `UserKnownHostsFile=${knownHosts}`,
    '-o',
    'StrictHostKeyChecking=yes',
    '-o',
    'BatchMode=yes',
    '-o',
    'LogLevel=ERROR',
    '-o',
    'ConnectTimeout=10',
    ...(identity ? ['-o', 'IdentitiesOnly=yes', '-i', identity] : ['-o', 'IdentityFile=none']),
  ];
}

/** Starts `ssh` with `args`; `done` resolves with its exit code and output. */
export function startSsh(args: string[]): { child: ChildProcess; done: Promise<SshRun> } {
  const child = spawn(SSH, args, { stdio: ['pipe', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const done = new Promise<SshRun>((resolve) =>
    child.on('close', (code) => resolve({ code, stdout, stderr })),
  );
  return { child, done };
}

/** Runs `ssh` to the end; stdin is closed at once unless `input` is given. */
export async function runSsh(args: string[], input?: string): Promise<SshRun> {
  const { child, done } = startSsh(args);
  child.stdin!.end(input ?? '');
  return done;
}
