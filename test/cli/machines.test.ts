/**
 * `pier machines …`, `pier exec` and `pier ssh` against a real pier running real machines
 * from images in a real local OCI registry: run with progress and with --no-wait, list,
 * show, the actions, wait and its timeout, logs and logs -f, a failed start with its
 * boot log, exec and cp over the machine routes, and the error paths.
 */
import { spawn } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import pty from 'node-pty';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { busyboxLayer, pushImage } from '../../src/runtime/images/build.test-helper.js';
import { waitFor } from '../databases/helpers.js';
import { type TestOrg, type TestPlatform } from '../helpers/platform.js';
import { startRegistry, type TestRegistry } from '../helpers/registry.js';
import { ENTRY, cleanEnv, pierWith, startCliBed, type CliBed } from './run-cli.js';
import { freeMachineCidr, removeMachinesNetwork } from '../machines/bed.js';

const root = process.getuid?.() === 0;

/** A bridge and network of this test file's own (removed at the end). */
const net = { bridge: `pc${process.pid % 100000}`, cidr: '' };

let registry: TestRegistry;
let tp: TestPlatform;
let org: TestOrg;
let tmp: CliBed['tmp'];
let env: Record<string, string>;
let web: string;
let silent: string;
const pier = pierWith(() => env);
const api = (method: string, p: string, body?: unknown) =>
  tp.request(method, p, { token: org.token, body });

/** Runs `pier …args` in the background, for commands that run until stopped (`logs -f`). */
function pierBackground(args: string[]) {
  const child = spawn(process.execPath, [...ENTRY, ...args], {
    env: cleanEnv(env),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code) => resolve(code)),
  );
  return { child, exited, out: () => stdout, err: () => stderr };
}

beforeAll(async () => {
  if (!root) return;
  registry = await startRegistry();
  const page = { path: 'www/index.html', content: 'hello from a machine\n' };
  await Promise.all([
    pushImage(registry.url, 'web:1', {
      layers: [busyboxLayer(), [{ path: 'www/' }, page]],
      config: { Cmd: ['/bin/httpd', '-f', '-p', '3000', '-h', '/www'] },
    }),
    pushImage(registry.url, 'silent:1', {
      layers: [busyboxLayer()],
      config: { Cmd: ['/bin/sleep', '3600'] },
    }),
  ]);
  web = `${registry.host}/web:1`;
  silent = `${registry.host}/silent:1`;
  ({ tp, org, tmp, env } = await startCliBed({
    machinesBridge: net.bridge,
    machinesCidr: (net.cidr = await freeMachineCidr(180)),
    // The registry on 127.0.0.1 is trusted explicitly: pulls still go through the guard.
    trustedRegistries: [registry.host],
  }));
  expect((await api('POST', '/v1/apps', { name: 'site' })).status).toBe(201);
}, 120_000);

afterAll(async () => {
  if (!root) return;
  for (const a of (await api('GET', '/v1/apps').catch(() => undefined))?.body ?? []) {
    for (const m of (await api('GET', `/v1/apps/${a.name}/machines`)).body ?? []) {
      await api('POST', `/v1/machines/${m.id}/destroy`);
    }
  }
  await tp?.close();
  await registry?.stop();
  await tmp?.remove();
  await removeMachinesNetwork(net.bridge, net.cidr);
}, 60_000);

describe.skipIf(!root)('pier machines', () => {
  /** The web machine made by `run`; later tests act on it. */
  let id = '';
  /** A machine that prints a line every 200 ms, made with --no-wait. */
  let talker = '';

  it('runs a machine with progress, and another with --no-wait, a command and env', async () => {
    const [ran, queued] = await Promise.all([
      pier(['machines', 'run', 'site', web]),
      pier([
        'machines',
        'run',
        'site',
        silent,
        '--no-wait',
        '--json',
        '--readiness',
        'boot',
        '--memory',
        '256',
        '--env',
        'WHO=pier',
        '--env',
        'EMPTY=',
        '--',
        '/bin/sh',
        '-c',
        'i=0; while true; do echo "tick $i $WHO"; i=$((i+1)); sleep 0.2; done',
      ]),
    ]);
    expect(ran.code, ran.stderr).toBe(0);
    const m =
      /^Machine (mch-\w+) is running \(booted in \d+ ms\), private IP (10\.\d+\.\d+\.\d+)\.\n$/.exec(
        ran.stdout,
      );
    expect(m, ran.stdout).not.toBeNull();
    id = m![1]!;
    expect(ran.stderr).toMatch(/^Machine mch-\w+ created; Ctrl-C stops waiting/m);
    expect(ran.stderr).toMatch(/^mch-\w+: (queued|pulling the image and booting)…/m);
    const page = await fetch(`http://${m![2]}:3000/index.html`);
    expect(await page.text()).toBe('hello from a machine\n');

    expect(queued.code, queued.stderr).toBe(0);
    const created = JSON.parse(queued.stdout);
    expect(created).toMatchObject({
      appName: 'site',
      config: {
        image: silent,
        memoryMb: 256,
        readiness: 'boot',
        env: { WHO: 'pier', EMPTY: '' },
        command: ['/bin/sh', '-c', expect.stringContaining('tick')],
      },
    });
    expect(['requested', 'starting', 'running']).toContain(created.observedState);
    talker = created.id;
    const waited = await pier(['machines', 'wait', talker, '--timeout', '60']);
    expect(waited.code, waited.stderr).toBe(0);
    expect(waited.stdout).toBe(`Machine ${talker} is running.\n`);
  });

  it('lists and shows machines, as tables and as JSON', async () => {
    const [table, json, show, showJson] = await Promise.all([
      pier(['machines', 'list', 'site']),
      pier(['machines', 'list', 'site', '--json']),
      pier(['machines', 'show', id]),
      pier(['machines', 'show', id, '--json']),
    ]);
    for (const out of [table, json, show, showJson]) expect(out.code, out.stderr).toBe(0);
    const lines = table.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^ID\s+STATE\s+IMAGE\s+PRIVATE-IP\s+REGION\s+CREATED$/);
    expect(table.stdout).toContain(id);
    expect(table.stdout).toMatch(new RegExp(`^${id}\\s+running\\s+\\S+/web:1\\s+10\\.`, 'm'));
    expect(
      JSON.parse(json.stdout)
        .map((x: { id: string }) => x.id)
        .sort(),
    ).toEqual([id, talker].sort());
    expect(show.stdout).toMatch(new RegExp(`^ID: +${id}$`, 'm'));
    expect(show.stdout).toMatch(/^State: +running$/m);
    expect(show.stdout).toMatch(/^Size: +1 vCPU, 512 MB$/m);
    expect(show.stdout).toMatch(/^Boot: +\d+ ms$/m);
    expect(JSON.parse(showJson.stdout)).toMatchObject({ id, observedState: 'running' });
  });

  it('prints the logs, and -f follows new lines with the cursor', async () => {
    const once = await waitFor(async () => {
      const r = await pier(['machines', 'logs', 'site', '--machine', talker, '-n', '5']);
      return r.stdout.split('\n').length > 3 ? r : undefined;
    }, 'log lines');
    expect(once.code, once.stderr).toBe(0);
    const lines = once.stdout.trimEnd().split('\n');
    expect(lines.length).toBeLessThanOrEqual(5);
    for (const l of lines) {
      expect(l).toMatch(new RegExp(`^\\d{4}-\\S+ ${talker} stdout tick \\d+ pier$`));
    }
    const json = await pier(['machines', 'logs', 'site', '--machine', talker, '-n', '2', '--json']);
    const entries = json.stdout
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(entries).toHaveLength(2);
    expect(entries[0]).toMatchObject({ machineId: talker, stream: 'stdout' });

    const follow = pierBackground([
      'machines',
      'logs',
      'site',
      '-f',
      '--machine',
      talker,
      '-n',
      '1',
    ]);
    const ticks = () => [...follow.out().matchAll(/tick (\d+)/g)].map((x) => Number(x[1]));
    await waitFor(async () => ticks().length >= 8, 'followed lines', 20_000);
    const seen = ticks();
    // Consecutive: the cursor neither skipped nor repeated a line.
    expect(seen).toEqual(seen.map((_, i) => seen[0]! + i));
    follow.child.kill('SIGINT');
    await follow.exited;
    expect(follow.err()).toBe('');
  });

  it('stops, starts, suspends and resumes; a refused action prints its code', async () => {
    const stopped = await pier(['machines', 'stop', id]);
    expect(stopped.code, stopped.stderr).toBe(0);
    expect(stopped.stdout).toMatch(
      new RegExp(`^Machine ${id} is stopped \\(stopped, after \\d+\\.\\ds\\)\\.\n$`),
    );
    const refused = await pier(['machines', 'suspend', id]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^pier: .*cannot be suspended.* \(conflict\)\n$/m);
    const started = await pier(['machines', 'start', id, '--json']);
    expect(JSON.parse(started.stdout)).toMatchObject({ id, observedState: 'running' });
    const suspended = await pier(['machines', 'suspend', id]);
    expect(suspended.stdout).toMatch(/is suspended \(suspended, after/);
    expect((await pier(['machines', 'list', 'site'])).stdout).toMatch(
      new RegExp(`^${id}\\s+suspended\\s`, 'm'),
    );
    const resumed = await pier(['machines', 'start', id]);
    expect(resumed.stdout).toMatch(/is running \(running, after/);
  });

  it('waits with a timeout: exit 1 and a clear message when the state never comes', async () => {
    const timedOut = await pier(['machines', 'wait', id, '--state', 'stopped', '--timeout', '1']);
    expect(timedOut.code).toBe(1);
    expect(timedOut.stderr).toMatch(
      new RegExp(
        `^pier: machine ${id} is running; it did not become stopped within 1s \\(wait-timeout\\)\n$`,
        'm',
      ),
    );
    const badState = await pier(['machines', 'wait', id, '--state', 'asleep']);
    expect(badState.code).toBe(1);
    expect(badState.stderr).toMatch(/argument 'asleep' is invalid/);
  });

  it('ends a failed start with its code and boot log, keeping the machine', async () => {
    const failed = await pier([
      'machines',
      'run',
      'site',
      silent,
      '--start',
      'echo doomed >&2; exit 3',
    ]);
    expect(failed.code).toBe(1);
    expect(failed.stderr).toMatch(/^Boot log of mch-\w+:$/m);
    expect(failed.stderr).toContain('doomed');
    expect(failed.stderr).toMatch(
      /^The machine (mch-\w+) is kept; `pier machines destroy \1` removes it\.$/m,
    );
    expect(failed.stderr).toMatch(/^pier: .+ \(guest-exited\)\n$/m);
    const failedId = /^The machine (mch-\w+) is kept/m.exec(failed.stderr)![1]!;
    const show = await pier(['machines', 'show', failedId]);
    expect(show.stdout).toMatch(/^State: +failed$/m);
    expect(show.stdout).toMatch(/^Error: +.+ \(guest-exited\)$/m);
    expect(show.stdout).toMatch(/^Boot log:\ndoomed/m);
    const waitFailed = await pier(['machines', 'wait', failedId]);
    expect(waitFailed.code).toBe(1);
    expect(waitFailed.stderr).toMatch(
      new RegExp(
        `^pier: machine ${failedId} is failed, so it will not become running: .*code 3`,
        'm',
      ),
    );
    const gone = await pier(['machines', 'destroy', failedId, '--yes']);
    expect(gone.code, gone.stderr).toBe(0);

    const missing = await pier(['machines', 'run', 'site', `${registry.host}/nope:1`]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^pier: .+ \(create-failed\)\n$/m);
    const missingId = /^The machine (mch-\w+) is kept/m.exec(missing.stderr)![1]!;
    await api('POST', `/v1/machines/${missingId}/destroy`);
  });

  it('reports unknown machines and apps, bad flags and a missing key plainly', async () => {
    const [show, stop, wait, list, logs, badMemory, badEnv, noKey, refuse] = await Promise.all([
      pier(['machines', 'show', 'mch-nope']),
      pier(['machines', 'stop', 'mch-nope']),
      pier(['machines', 'wait', 'mch-nope', '--timeout', '1']),
      pier(['machines', 'list', 'nosuch']),
      pier(['machines', 'logs', 'site', '--machine', 'mch-nope']),
      pier(['machines', 'run', 'site', silent, '--memory', '64']),
      pier(['machines', 'run', 'site', silent, '--env', 'NOEQUALS']),
      pier(['machines', 'list', 'site'], { env: { PIER_API_KEY: undefined } }),
      pier(['machines', 'destroy', id]),
    ]);
    for (const out of [show, stop, wait]) {
      expect(out.code).toBe(1);
      expect(out.stderr).toMatch(/^pier: Machine 'mch-nope' not found\. \(not-found\)\n$/m);
    }
    // Progress lines go to stderr, before the error.
    expect(stop.stderr).toBe(
      "Stopping mch-nope…\npier: Machine 'mch-nope' not found. (not-found)\n",
    );
    expect(list.code).toBe(1);
    expect(list.stderr).toMatch(/^pier: .*nosuch.* \(not-found\)\n$/);
    expect(logs.code).toBe(1);
    expect(logs.stderr).toMatch(/^pier: Machine 'mch-nope' not found in 'site'\. \(not-found\)\n$/);
    expect(badMemory.code).toBe(1);
    expect(badMemory.stderr).toMatch(/\(bad-request\)\n {2}- memoryMb: /);
    expect(badEnv.code).toBe(1);
    expect(badEnv.stderr).toBe("pier: --env wants NAME=value, got 'NOEQUALS'\n");
    expect(noKey.code).toBe(1);
    expect(noKey.stderr).toMatch(/^pier: no API key for /);
    expect(refuse.code).toBe(1);
    expect(refuse.stderr).toBe(
      `pier: refusing to destroy ${id} without --yes (no terminal to ask on)\n`,
    );
  });

  it('checks cp and exec arguments before calling the API', async () => {
    const [bothLocal, bothRemote, relative, noFile, dir, noId] = await Promise.all([
      pier(['machines', 'cp', 'a', 'b']),
      pier(['machines', 'cp', 'mch-one:/a', 'mch-two:/b']),
      pier(['machines', 'cp', 'a', 'mch-one:relative/path']),
      pier(['machines', 'cp', path.join(tmp.dir, 'absent'), 'mch-one:/tmp/x']),
      pier(['machines', 'cp', 'mch-one:/tmp/', '-']),
      pier(['exec']),
    ]);
    expect(dir.stderr).toBe('pier: give the path of one file: mch-one:/…\n');
    expect(noId.stderr).toMatch(/missing required argument 'id'/);
    expect(bothLocal.stderr).toBe("pier: one side must be MACHINE:/PATH (got 'a' and 'b')\n");
    expect(bothRemote.stderr).toBe('pier: one side must be local; copy through this computer\n');
    expect(relative.stderr).toBe(`pier: give an absolute path on the machine: mch-one:/…\n`);
    expect(noFile.stderr).toMatch(/^pier: cannot read .+absent: ENOENT\n$/);
    for (const out of [bothLocal, bothRemote, relative, noFile, dir, noId])
      expect(out.code).toBe(1);
  });

  it('destroys with --yes', async () => {
    const destroyed = await pier(['machines', 'destroy', talker, '--yes']);
    expect(destroyed.code, destroyed.stderr).toBe(0);
    expect(destroyed.stdout).toMatch(
      new RegExp(`^Machine ${talker} is destroyed \\(deleted, after`),
    );
    const list = JSON.parse((await pier(['machines', 'list', 'site', '--json'])).stdout);
    expect(list.map((x: { id: string }) => x.id)).toEqual([id]);
  });
});

describe.skipIf(!root)('pier machines exec|cp and pier ssh', () => {
  let id = '';

  beforeAll(async () => {
    if (!root) return;
    const res = await api('POST', '/v1/apps/site/machines', {
      image: silent,
      readiness: 'boot',
    });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    id = res.body.id;
    expect((await api('POST', '/v1/apps', { name: 'empty' })).status).toBe(201);
  }, 60_000);

  it('runs a command with stdin piped through, and passes its exit code on', async () => {
    const echoed = await pier(['machines', 'exec', id, '--', 'cat'], { input: 'piped in\n' });
    expect(echoed.code, echoed.stderr).toBe(0);
    expect(echoed.stdout).toBe('piped in\n');
    const failed = await pier(['exec', id, '--', 'sh', '-c', 'echo out; echo err >&2; exit 7']);
    expect(failed.code).toBe(7);
    expect(failed.stdout).toBe('out\n');
    expect(failed.stderr).toBe('err\n');
    const killed = await pier(['exec', id, '--', 'sh', '-c', 'kill -TERM $$']);
    expect(killed.code).toBe(128 + 15);
    const shell = await pier(['ssh', 'site', '-T'], { input: 'echo from-ssh $((6*7))\nexit 3\n' });
    expect(shell.stdout).toBe('from-ssh 42\n');
    expect(shell.code).toBe(3);
  });

  it('opens an interactive shell on a terminal: its size, resizes, and the exit code', async () => {
    const term = pty.spawn(process.execPath, [...ENTRY, 'ssh', 'site'], {
      cols: 100,
      rows: 30,
      cwd: process.cwd(),
      env: cleanEnv(env) as Record<string, string>,
    });
    let screen = '';
    term.onData((d) => (screen += d));
    const exited = new Promise<number>((resolve) => term.onExit((e) => resolve(e.exitCode)));
    // Typed before the shell is up: the keys wait in the session, as on a slow ssh.
    term.write('stty size\r');
    await waitFor(async () => screen.includes('30 100'), 'the first size', 20_000);
    term.resize(120, 40);
    await new Promise((r) => setTimeout(r, 200));
    term.write('stty size\r');
    await waitFor(async () => screen.includes('40 120'), 'the new size', 10_000);
    // Raw mode: Ctrl-C reaches the remote shell (which survives it) instead of ending pier.
    term.write('sleep 30\r');
    await new Promise((r) => setTimeout(r, 300));
    term.write('\x03');
    term.write('exit 5\r');
    expect(await exited).toBe(5);
  });

  it('copies a file up and back down, and reports a missing file', async () => {
    const local = path.join(tmp.dir, 'up.bin');
    const bytes = Buffer.from(Array.from({ length: 300_000 }, (_, i) => i % 251));
    await writeFile(local, bytes);
    const up = await pier(['machines', 'cp', local, `${id}:/tmp/`]);
    expect(up.code, up.stderr).toBe(0);
    expect(up.stdout).toBe(`Copied ${local} to ${id}:/tmp/up.bin (300.0 kB).\n`);
    const down = await pier([
      'machines',
      'cp',
      `${id}:/tmp/up.bin`,
      path.join(tmp.dir, 'down.bin'),
    ]);
    expect(down.code, down.stderr).toBe(0);
    expect((await readFile(path.join(tmp.dir, 'down.bin'))).equals(bytes)).toBe(true);
    const hello = await pier(['machines', 'cp', '-', `${id}:/tmp/hello.txt`], { input: 'hi\n' });
    expect(hello.stdout).toBe(`Copied stdin to ${id}:/tmp/hello.txt (3 B).\n`);
    const toStdout = await pier(['machines', 'cp', `${id}:/tmp/hello.txt`, '-']);
    expect(toStdout.stdout).toBe('hi\n');
    expect(toStdout.stderr).toBe('');
    const missing = await pier(['machines', 'cp', `${id}:/no/such/file`, tmp.dir]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^pier: .+ \([a-z-]+\)\n$/);
  });

  it('reports an unknown machine and an app without a running machine', async () => {
    const [exec, cp, ssh] = await Promise.all([
      pier(['exec', 'mch-nope', '--', 'true']),
      pier(['machines', 'cp', 'mch-nope:/etc/hostname', '-']),
      pier(['ssh', 'empty']),
    ]);
    expect(exec.code).toBe(1);
    expect(exec.stderr).toBe(
      "pier: No machine 'mch-nope' in this organization. (machine-not-found)\n",
    );
    expect(cp.code).toBe(1);
    expect(cp.stderr).toBe(
      "pier: No machine 'mch-nope' in this organization. (machine-not-found)\n",
    );
    expect(ssh.code).toBe(1);
    expect(ssh.stderr).toBe('pier: no running machine in empty\n');
  });
});
