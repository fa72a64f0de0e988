/**
 * The SSH gateway (CONTRACT 8) with the stock OpenSSH client, against a real machine: the
 * exact command an SSH token's answer carries (host key pinned from GET /v1/ssh), a
 * registered key as `<app>@host` and `<app>.<machine>@host`, exit codes, a terminal and
 * its resize, the audit rows and the session cap of the exec route, a token deleted or
 * expiring and a key removed (sessions cut within 2 s), another organization's app, an
 * agent or read-only key (no SSH token at all), a token for one app aimed at another's
 * machine, a wrong host key, a flood of failed logins from one address, the channel cap,
 * and a port forward to a machine.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import http from 'node:http';
import net from 'node:net';
import { readdir, readFile } from 'node:fs/promises';
import * as pty from 'node-pty';
import ssh2 from 'ssh2';
import type { Authenticator } from '../../src/services/authenticator.js';
import { MAX_SESSIONS_PER_MACHINE } from '../../src/services/machines/exec-sessions.js';
import { SSH_LIMITS } from '../../src/ssh-gateway/limits.js';
import { platformCa, query } from '../databases/helpers.js';
import type { TestOrg } from '../helpers/platform.js';
import { canRunMachines, startMachineBed, type MachineBed } from '../machines/bed.js';
import { until } from '../machines/session.js';
import {
  SSH,
  SSH_BOX,
  baseOptions,
  runSsh,
  sshHome,
  startSsh,
  type SshHome,
  type SshRun,
} from './client.js';

let bed: MachineBed;
let home: SshHome;
let gateway: { host: string; port: number; hostKey: string };
let knownHosts: string;
let machineId: string;
let other: TestOrg;
let key: { path: string; publicKey: string; id: string };

beforeAll(async () => {
  if (!canRunMachines) return;
  bed = await startMachineBed('sg', 150);
  home = await sshHome();
  const image = await bed.image('sshbox:1', SSH_BOX);
  expect((await bed.req('POST', '/v1/apps', { name: 'sshbox' })).status).toBe(201);
  expect((await bed.req('POST', '/v1/apps', { name: 'sshempty' })).status).toBe(201);
  const made = await bed.req('POST', '/v1/apps/sshbox/machines', { image });
  expect(made.status, JSON.stringify(made.body)).toBe(201);
  machineId = made.body.id;
  const answer = await bed.req('GET', '/v1/ssh');
  gateway = answer.body;
  knownHosts = await home.knownHosts('known_hosts', gateway.host, gateway.port, gateway.hostKey);
  const pair = await home.keyPair('person');
  const added = await bed.req('POST', '/v1/ssh-keys', { publicKey: pair.publicKey });
  expect(added.status).toBe(201);
  key = { ...pair, id: added.body.id };
  other = await bed.tp.createOrg();
  const theirs = await bed.tp.request('POST', '/v1/apps', {
    token: other.token,
    body: { name: 'sshtheirs' },
  });
  expect(theirs.status).toBe(201);
});

afterAll(async () => {
  await home?.remove();
  await bed?.close();
});

/** Mints an SSH token; answers the token's record with its command. */
async function mintToken(body: Record<string, unknown> = { app: 'sshbox' }, token?: string) {
  const res = await bed.req('POST', '/v1/ssh/tokens', body, token);
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body as { id: string; token: string; command: string; expiresAt: string };
}

/** The token's command, as answered, with the test's options put in after `ssh`. */
function tokenArgs(command: string, ...remote: string[]): string[] {
  const [program, ...rest] = command.split(' ');
  expect(program).toBe('ssh');
  return [...baseOptions(knownHosts), ...rest, ...remote];
}

/** `ssh -p <port> <user>@<host>` with the registered key. */
function keyArgs(user: string, ...remote: string[]): string[] {
  return [
    ...baseOptions(knownHosts, key.path),
    '-p',
    String(gateway.port),
    `${user}@${gateway.host}`,
    ...remote,
  ];
}

async function sessionsOf(keyId: string, all = true) {
  const res = await bed.req('GET', `/v1/machines/${machineId}/exec-sessions?all=${all}`);
  return (res.body as { keyId: string; endReason?: string; exitCode?: number }[]).filter(
    (s) => s.keyId === keyId,
  );
}

async function processRuns(argv: string[]): Promise<boolean> {
  const want = argv.join('\0') + '\0';
  for (const pid of await readdir('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    if ((await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')) === want) return true;
  }
  return false;
}

describe.skipIf(!canRunMachines)('SSH tokens with the stock ssh client', () => {
  it('runs a command in the machine with the exact command answered: output and exit code', async () => {
    const t = await mintToken();
    expect(t.command).toBe(`ssh -p ${gateway.port} ${t.token}@${gateway.host}`);
    const run = await runSsh(tokenArgs(t.command, 'echo hi; id -u; pwd; exit 7'));
    expect(run).toMatchObject({ code: 7, stdout: 'hi\n1000\n/srv\n' });
    expect((await runSsh(tokenArgs(t.command, 'true'))).code).toBe(0);
    // stdin reaches the command and its end closes it; stderr stays apart.
    const piped = await runSsh(tokenArgs(t.command, 'cat; echo err >&2'), 'piped in\n');
    expect(piped).toMatchObject({ code: 0, stdout: 'piped in\n', stderr: 'err\n' });
    // Each session is audited like the exec route's, under the token's id.
    await expect
      .poll(async () => (await sessionsOf(t.id)).map((s) => s.exitCode).sort())
      .toEqual([0, 0, 7]);
  });

  it('opens a shell on a terminal of the client’s size, and follows its resize', async () => {
    const t = await mintToken();
    const term = pty.spawn(SSH, tokenArgs(t.command).slice(0), { cols: 100, rows: 30 });
    let out = '';
    term.onData((d) => (out += d));
    const exited = new Promise<number>((resolve) => term.onExit((e) => resolve(e.exitCode)));
    try {
      const asks = async (size: string) => {
        const end = Date.now() + 8000;
        while (!out.includes(size)) {
          if (Date.now() > end) throw new Error(`no ${size} in ${JSON.stringify(out)}`);
          term.write('stty size\r');
          await until(() => out.includes(size), 300).catch(() => undefined);
        }
      };
      await asks('30 100');
      term.resize(120, 40);
      await asks('40 120');
      term.write('exit 4\r');
      expect(await exited).toBe(4);
    } finally {
      term.kill();
    }
  });

  it('refuses a wrong token and a deleted one, and says nothing of the app', async () => {
    const t = await mintToken();
    const wrong = t.command.replace(/piers_\w{43}/, `piers_${'x'.repeat(43)}`);
    const refused = await runSsh(tokenArgs(wrong, 'true'));
    expect(refused.code).toBe(255);
    expect(refused.stderr).toContain('Permission denied');
    expect((await bed.req('DELETE', `/v1/ssh/tokens/${t.id}`)).status).toBe(204);
    expect((await runSsh(tokenArgs(t.command, 'true'))).code).toBe(255);
  });

  it('cuts an open session within 2 s when its token is deleted', async () => {
    const t = await mintToken();
    const argv = ['sleep', String(40_000 + Math.floor(Math.random() * 20_000))];
    const s = startSsh(tokenArgs(t.command, argv.join(' ')));
    await expect.poll(() => processRuns(argv), { timeout: 8000 }).toBe(true);
    const deletedAt = Date.now();
    expect((await bed.req('DELETE', `/v1/ssh/tokens/${t.id}`)).status).toBe(204);
    const run = await s.done;
    expect(Date.now() - deletedAt).toBeLessThan(2000);
    expect(run.code).toBe(255);
    expect(run.stderr).toContain('pier: unauthenticated:');
    await expect.poll(() => processRuns(argv), { timeout: 2000 }).toBe(false);
    await expect
      .poll(async () => (await sessionsOf(t.id)).map((x) => x.endReason))
      .toEqual(['revoked']);
  });

  it('cuts an open session within 2 s of its token’s expiry', async () => {
    const t = await mintToken();
    // 60 s is the shortest TTL a token is minted with: the row is brought nearer.
    const expiresAt = new Date(Date.now() + 2500);
    await bed.tp.platform.ctx.db
      .updateTable('ssh_tokens')
      .set({ expires_at: expiresAt })
      .where('id', '=', t.id)
      .execute();
    const s = startSsh(tokenArgs(t.command, 'sleep 600'));
    const run = await s.done;
    expect(Date.now() - expiresAt.getTime()).toBeLessThan(2000);
    expect(run.code).toBe(255);
    expect(run.stderr).toContain('expired');
    await expect
      .poll(async () => (await sessionsOf(t.id)).map((x) => x.endReason))
      .toEqual(['expired']);
    expect((await runSsh(tokenArgs(t.command, 'true'))).code).toBe(255);
  });

  it('keeps a session through the authenticator’s recheck, and cuts it when the org is suspended', async () => {
    const t = await mintToken();
    const argv = ['sleep', String(40_000 + Math.floor(Math.random() * 20_000))];
    const s = startSsh(tokenArgs(t.command, argv.join(' ')));
    await expect.poll(() => processRuns(argv), { timeout: 8000 }).toBe(true);
    // The backstop looks the token up in ssh_tokens (not api_keys): it is live.
    await (bed.tp.platform.ctx.auth as Authenticator).recheckInFlight();
    await new Promise((r) => setTimeout(r, 200));
    expect(await processRuns(argv)).toBe(true);
    let run: SshRun;
    try {
      const suspendedAt = Date.now();
      expect((await bed.tp.admin('POST', `/admin/v1/orgs/${bed.org.id}/suspend`)).status).toBe(200);
      run = await s.done;
      expect(Date.now() - suspendedAt).toBeLessThan(2000);
    } finally {
      await bed.tp.admin('POST', `/admin/v1/orgs/${bed.org.id}/unsuspend`);
    }
    expect(run.stderr).toContain('pier: org-suspended:');
    await expect.poll(() => processRuns(argv), { timeout: 2000 }).toBe(false);
    await expect
      .poll(async () => (await sessionsOf(t.id)).map((x) => x.endReason))
      .toEqual(['org-suspended']);
  });

  it('refuses a wrong host key in the client', async () => {
    const t = await mintToken();
    const forged = (await home.keyPair('forged-host')).publicKey.split(' ').slice(0, 2).join(' ');
    const wrongHosts = await home.knownHosts('wrong_hosts', gateway.host, gateway.port, forged);
    const [, ...rest] = t.command.split(' ');
    const run = await runSsh([...baseOptions(wrongHosts), ...rest, 'true']);
    expect(run.code).toBe(255);
    expect(run.stderr).toContain('REMOTE HOST IDENTIFICATION HAS CHANGED');
  });

  it('keeps a token to its app: no SSH token for agents or read-only keys, none of another app’s machine', async () => {
    const agent = await bed.req('POST', '/v1/tokens', {
      name: 'agent',
      agent: { class: 'sandbox', apps: ['sshempty'] },
    });
    const minted = await bed.req('POST', '/v1/ssh/tokens', { app: 'sshbox' }, agent.body.token);
    expect([minted.status, minted.body.code]).toEqual([403, 'agent-token-credential']);
    const reader = await bed.req('POST', '/v1/tokens', { name: 'reader', scopes: ['read'] });
    const read = await bed.req('POST', '/v1/ssh/tokens', { app: 'sshbox' }, reader.body.token);
    expect([read.status, read.body.code]).toEqual([403, 'token-scope']);
    // A token of an app without machines, naming another app's machine.
    const t = await mintToken({ app: 'sshempty', machine: machineId });
    const run = await runSsh(tokenArgs(t.command, 'echo reached'));
    expect(run.code).toBe(255);
    expect(run.stdout).toBe('');
    expect(run.stderr).toContain('pier: machine-not-found:');
    const none = await runSsh(tokenArgs((await mintToken({ app: 'sshempty' })).command, 'true'));
    expect([none.code, none.stderr]).toEqual([255, expect.stringContaining('machine-not-found')]);
    // Another organization's token cannot name this app.
    const foreign = await bed.req('POST', '/v1/ssh/tokens', { app: 'sshbox' }, other.token);
    expect(foreign.status).toBe(400);
  });

  it('answers too-many-sessions with the code of 7.6 when the machine is full', async () => {
    const t = await mintToken();
    const db = bed.tp.platform.ctx.db;
    // The cap counts the machine's open rows: filled as other sessions would.
    const ids = Array.from({ length: MAX_SESSIONS_PER_MACHINE }, (_, i) => `exs-fill${i}`);
    await db
      .insertInto('exec_sessions')
      .values(
        ids.map((id) => ({
          id,
          org_id: bed.org.id,
          machine_id: machineId,
          key_id: 'tok-fill',
          agent: false,
          tty: false,
          host: 'elsewhere', // not this host's: a restart would not take them for its own
        })),
      )
      .execute();
    try {
      const run = await runSsh(tokenArgs(t.command, 'echo in'));
      expect(run.code).toBe(255);
      expect(run.stdout).toBe('');
      expect(run.stderr).toMatch(/^pier: too-many-sessions: .*8 shell sessions open/);
    } finally {
      await db.deleteFrom('exec_sessions').where('id', 'in', ids).execute();
    }
  });
});

describe.skipIf(!canRunMachines)('registered keys', () => {
  it('logs in as <app>@host and <app>.<machine>@host with the key', async () => {
    const run = await runSsh(keyArgs('sshbox', 'echo as key; id -u'));
    expect(run).toMatchObject({ code: 0, stdout: 'as key\n1000\n' });
    const named = await runSsh(keyArgs(`sshbox.${machineId}`, 'exit 3'));
    expect(named.code).toBe(3);
    await expect
      .poll(async () => (await sessionsOf(key.id)).map((s) => s.exitCode).sort())
      .toEqual([0, 3]);
  });

  it('refuses another organization’s app, a missing one and a machine not the app’s, alike', async () => {
    const answers = [];
    for (const user of ['sshtheirs', 'sshnope', `sshbox.mch-nope`, `sshempty.${machineId}`]) {
      const run = await runSsh(keyArgs(user, 'echo reached'));
      answers.push([user, run.code, run.stdout, run.stderr.trim()]);
    }
    for (const [user, code, stdout, stderr] of answers) {
      expect([user, code, stdout]).toEqual([user, 255, '']);
      expect(stderr).toMatch(/Permission denied \(publickey\)\.$/);
    }
  });

  it('refuses a key the organization does not have, and the other org’s copy of ours', async () => {
    const stranger = await home.keyPair('stranger');
    const args = [
      ...baseOptions(knownHosts, stranger.path),
      '-p',
      String(gateway.port),
      `sshbox@${gateway.host}`,
      'true',
    ];
    expect((await runSsh(args)).code).toBe(255);
    // The other organization registers the stranger's key: it reaches its own apps only.
    const theirs = await bed.tp.request('POST', '/v1/ssh-keys', {
      token: other.token,
      body: { publicKey: stranger.publicKey },
    });
    expect(theirs.status).toBe(201);
    const again = await runSsh(args);
    expect([again.code, again.stderr]).toEqual([255, expect.stringContaining('Permission denied')]);
  });

  it('ends the key’s sessions within 2 s when the key is removed', async () => {
    const pair = await home.keyPair('removed');
    const added = await bed.req('POST', '/v1/ssh-keys', { publicKey: pair.publicKey });
    const argv = ['sleep', String(60_000 + Math.floor(Math.random() * 20_000))];
    const s = startSsh([
      ...baseOptions(knownHosts, pair.path),
      '-p',
      String(gateway.port),
      `sshbox@${gateway.host}`,
      argv.join(' '),
    ]);
    await expect.poll(() => processRuns(argv), { timeout: 8000 }).toBe(true);
    const removedAt = Date.now();
    expect((await bed.req('DELETE', `/v1/ssh-keys/${added.body.id}`)).status).toBe(204);
    const run = await s.done;
    expect(Date.now() - removedAt).toBeLessThan(2000);
    expect(run.code).toBe(255);
    await expect.poll(() => processRuns(argv), { timeout: 2000 }).toBe(false);
  });
});

describe.skipIf(!canRunMachines)('forwards and bounds', () => {
  it('forwards a local port to a port of the app’s machine, and refuses what is not the app’s', async () => {
    const t = await mintToken();
    const [local, refused] = [await freePort(), await freePort()];
    const [, ...rest] = t.command.split(' ');
    const fwd = startSsh([
      ...baseOptions(knownHosts),
      '-N',
      '-o',
      'ExitOnForwardFailure=yes',
      '-L',
      `127.0.0.1:${local}:${machineId}:3000`,
      '-L',
      `127.0.0.1:${refused}:mch-nope:3000`,
      ...rest,
    ]);
    try {
      await expect.poll(() => httpGet(local), { timeout: 8000 }).toBe('served\n');
      // The refused destination: ssh accepts locally, the gateway refuses the channel.
      expect(await httpGet(refused)).toBe('failed');
    } finally {
      fwd.child.kill();
    }
  });

  it('forwards a local port to a database once it is attached to the app', async () => {
    const made = await bed.req('POST', '/v1/resources', { name: 'sshdb', kind: 'postgres' });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    await expect
      .poll(async () => (await bed.req('GET', '/v1/resources/sshdb')).body.state, {
        timeout: 60_000,
      })
      .toBe('ready');
    const ca = await platformCa(bed.tp);
    const t = await mintToken();
    const local = await freePort();
    const [, ...rest] = t.command.split(' ');
    const fwd = startSsh([
      ...baseOptions(knownHosts),
      '-N',
      '-L',
      `127.0.0.1:${local}:sshdb:5432`,
      ...rest,
    ]);
    const url = new URL(made.body.url);
    url.hostname = '127.0.0.1';
    url.port = String(local);
    const select = () =>
      query<{ one: number }>(url.toString(), ca, 'SELECT 1 AS one').then(
        (rows) => rows[0]?.one,
        () => 'refused',
      );
    try {
      await until(() => (fwd.child.exitCode === null ? true : false));
      // Not attached: the gateway refuses the channel, as for a database of no one's.
      await new Promise((r) => setTimeout(r, 300));
      expect(await select()).toBe('refused');
      const attached = await bed.req('POST', '/v1/apps/sshbox/attach', { database: 'sshdb' });
      expect(attached.status).toBe(200);
      await expect.poll(select, { timeout: 10_000 }).toBe(1);
    } finally {
      fwd.child.kill();
    }
  });

  it('caps the channels one connection holds', async () => {
    const t = await mintToken();
    const client = new ssh2.Client();
    await new Promise<void>((resolve, reject) => {
      client.once('ready', () => resolve()).once('error', reject);
      client.connect({ host: gateway.host, port: gateway.port, username: t.token });
    });
    try {
      const opened = await Promise.all(
        Array.from(
          { length: SSH_LIMITS.channelsPerConnection + 2 },
          () => new Promise<boolean>((resolve) => client.exec('sleep 5', (err) => resolve(!err))),
        ),
      );
      expect(opened.filter(Boolean).length).toBe(SSH_LIMITS.channelsPerConnection);
    } finally {
      client.end();
    }
  });

  it('cuts a connection that has not logged in in time, and one that tries too often', async () => {
    const saved = SSH_LIMITS.loginWithinMs;
    SSH_LIMITS.loginWithinMs = 300;
    try {
      // Not even a version line: cut all the same.
      const idle = net.connect({
        host: gateway.host,
        port: gateway.port,
        localAddress: '127.0.0.7',
      });
      const openedAt = Date.now();
      idle.resume(); // the gateway's version line is read, and its end seen
      await new Promise((resolve) => idle.on('close', resolve).on('error', () => undefined));
      expect(Date.now() - openedAt).toBeLessThan(2000);
    } finally {
      SSH_LIMITS.loginWithinMs = saved;
    }
    // Passwords, again and again, on one connection: dropped after 20 requests.
    let tries = 0;
    const client = new ssh2.Client();
    const outcome = await new Promise<string>((resolve) => {
      client.on('ready', () => resolve('logged in'));
      client.on('error', (err) => resolve(err.message));
      client.on('close', () => resolve('closed'));
      client.connect({
        host: gateway.host,
        port: gateway.port,
        localAddress: '127.0.0.7',
        username: 'sshbox',
        authHandler: (_methods, _partial, next) => {
          tries++;
          next({ type: 'password', username: 'sshbox', password: `guess${tries}` });
        },
      });
    });
    client.end();
    expect(outcome).not.toBe('logged in');
    // The 21st request is refused and the connection ended (the client asks once more).
    expect(tries).toBeGreaterThan(SSH_LIMITS.authRequestsPerConnection);
    expect(tries).toBeLessThanOrEqual(SSH_LIMITS.authRequestsPerConnection + 2);
  });

  it('limits failed logins per address: past the limit the address is dropped, others are not', async () => {
    const saved = SSH_LIMITS.failuresPerMinute;
    SSH_LIMITS.failuresPerMinute = 5;
    try {
      const t = await mintToken();
      const wrong = t.command.replace(/piers_\w{43}/, `piers_${'y'.repeat(43)}`);
      const from = (ip: string, command: string) =>
        runSsh(['-b', ip, ...tokenArgs(command, 'echo in')]);
      for (let i = 0; i < 5; i++) expect((await from('127.0.0.5', wrong)).code).toBe(255);
      // The right token from that address is dropped now, before it may try.
      const dropped = await from('127.0.0.5', t.command);
      expect([dropped.code, dropped.stdout]).toEqual([255, '']);
      expect(dropped.stderr).not.toContain('Permission denied');
      // Another address is not concerned.
      expect(await from('127.0.0.6', t.command)).toMatchObject({ code: 0, stdout: 'in\n' });
    } finally {
      SSH_LIMITS.failuresPerMinute = saved;
    }
  });
});

describe.skipIf(!canRunMachines)('shutdown', () => {
  // Last: the restarted pier listens on another port.
  it('ends every session at once when pier stops, and listens again after a restart', async () => {
    const argv = ['sleep', String(80_000 + Math.floor(Math.random() * 10_000))];
    const s = startSsh(keyArgs('sshbox', argv.join(' ')));
    await expect.poll(() => processRuns(argv), { timeout: 8000 }).toBe(true);
    const stoppingAt = Date.now();
    let exitedAt = 0;
    void s.done.then(() => (exitedAt = Date.now()));
    await bed.restart();
    expect((await s.done).code).toBe(255);
    expect(exitedAt - stoppingAt).toBeLessThan(2000);
    expect(await processRuns(argv)).toBe(false);
    gateway = (await bed.req('GET', '/v1/ssh')).body;
    knownHosts = await home.knownHosts('known_hosts', gateway.host, gateway.port, gateway.hostKey);
    expect(await runSsh(keyArgs('sshbox', 'echo back'))).toMatchObject({
      code: 0,
      stdout: 'back\n',
    });
  });
});

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

/** GET / on a local port: the body, or `failed` when the connection breaks. */
function httpGet(port: number): Promise<string> {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/index.html', timeout: 3000 }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => resolve(body));
      res.on('error', () => resolve('failed'));
    });
    req.on('error', () => resolve('failed'));
    req.on('timeout', () => req.destroy());
  });
}
