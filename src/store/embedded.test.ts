/**
 * The embedded store listens only where pier reaches it (issue 13, item 11): a Unix
 * socket in a directory of the service user's (0700), no TCP address at all, and it runs
 * as the service user, which no database identity is.
 */
import { chmod, lstat, mkdtemp, readdir, readFile, readlink, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveServiceUser } from '../host/service-user.js';
import { startEmbeddedCluster, type EmbeddedCluster } from './embedded.js';

let dir: string;
let cluster: EmbeddedCluster;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'pier-store-'));
  await chmod(dir, 0o711); // the service user passes through to its cluster
  cluster = await startEmbeddedCluster({
    dir: path.join(dir, 'store'),
    serviceUser: 'pier',
    ephemeral: true,
  });
}, 120_000);

afterAll(async () => {
  await cluster?.stop();
  await rm(dir, { recursive: true, force: true });
});

/** The pid in the first line of the cluster's postmaster.pid. */
async function postmasterPid(): Promise<number> {
  const text = await readFile(path.join(cluster.dataDir, 'postmaster.pid'), 'utf8');
  return Number(text.split('\n')[0]);
}

/** Inodes of the TCP sockets (v4 and v6) listening on this host. */
async function listeningTcpInodes(): Promise<Set<string>> {
  const out = new Set<string>();
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    const text = await readFile(file, 'utf8').catch(() => '');
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols[3] === '0A') out.add(cols[9]!); // 0A: LISTEN
    }
  }
  return out;
}

describe('the embedded store', () => {
  it('has no TCP address: only a Unix socket in a private directory', async () => {
    const client = new pg.Client({ connectionString: cluster.url });
    await client.connect();
    try {
      const { rows } = await client.query<{ a: string; p: string }>(
        `SELECT current_setting('listen_addresses') AS a,
                current_setting('unix_socket_permissions') AS p`,
      );
      expect(rows[0]).toEqual({ a: '', p: '0700' });
    } finally {
      await client.end();
    }
    const user = await resolveServiceUser('pier');
    const st = await lstat(cluster.socketDir);
    expect(st.uid).toBe(user.uid);
    expect(st.mode & 0o777).toBe(0o700);
    // No socket the postmaster holds is a listening TCP socket.
    const pid = await postmasterPid();
    const listening = await listeningTcpInodes();
    for (const fd of await readdir(`/proc/${pid}/fd`)) {
      const target = await readlink(`/proc/${pid}/fd/${fd}`).catch(() => '');
      const inode = /^socket:\[(\d+)\]$/.exec(target)?.[1];
      if (inode) expect(listening.has(inode), `fd ${fd} listens on TCP`).toBe(false);
    }
  });

  it('runs as the service user, which is not root', async () => {
    const status = await readFile(`/proc/${await postmasterPid()}/status`, 'utf8');
    const uid = Number(/^Uid:\s+(\d+)/m.exec(status)![1]);
    const user = await resolveServiceUser('pier');
    expect(uid).toBe(user.uid);
    if (process.getuid?.() === 0) expect(uid).not.toBe(0);
  });
});
