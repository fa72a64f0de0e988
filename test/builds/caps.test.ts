/**
 * A build's caps (issue #25 item 3, operator settings made small here so each is reached
 * in seconds): a RUN step that fills the disk past the app's build volume, one that
 * allocates past the memory cap, a fork bomb (the process cap), and one that runs past the
 * time cap. Each ends the build `failed` with an `error` naming the cap, and leaves none
 * of its processes, runc state, RUN bundles or network behind. The four builds run at once (four
 * apps), started before the tests, so the file costs about the time cap.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { busyboxLayer, DEFAULT_APPLETS } from '../../src/runtime/images/build.test-helper.js';
import { canRunMachines, startMachineBed, type MachineBed } from '../machines/bed.js';
import { sourceArchive, uploadSource } from './archive.js';
import { existingPaths } from '../helpers/existing-paths.js';
import { buildNetworkLeft } from './network-left.js';

const execFileP = promisify(execFile);
const APPLETS = [...DEFAULT_APPLETS, 'dd', 'watch', 'mkfifo', 'seq'];

const CAPS = { buildTimeoutS: 30, buildPids: 32, buildDiskGb: 0.25, buildMemoryMb: 64 };

let bed: MachineBed;
const builds = new Map<string, Promise<{ build: any; log: string; ms: number }>>();

/** What a build of this file left on the host: its bundles, its runc state. */
function leftoversOf(id: string): Promise<string[]> {
  const lower = id.toLowerCase();
  return existingPaths([`/var/tmp/pier-${lower}`, `/run/pier/build-runc/${lower}`]);
}

/** Builds `dockerfile` as app `app`; answers the ended build, its log and how long it took. */
async function build(app: string, dockerfile: string) {
  expect((await bed.req('POST', '/v1/apps', { name: app })).status).toBe(201);
  const up = await uploadSource(
    bed.tp.url,
    bed.org.token,
    app,
    sourceArchive({ Dockerfile: dockerfile }),
  );
  expect(up.status).toBe(201);
  const started = Date.now();
  const made = await bed.req('POST', `/v1/apps/${app}/builds`, { source: up.body.id });
  expect(made.status).toBe(202);
  const logs = await fetch(`${bed.tp.url}/v1/builds/${made.body.id}/logs?follow=1`, {
    headers: { authorization: `Bearer ${bed.org.token}` },
    signal: AbortSignal.timeout(120_000),
  });
  const log = await logs.text();
  const ms = Date.now() - started;
  return { build: (await bed.req('GET', `/v1/builds/${made.body.id}`)).body, log, ms };
}

beforeAll(async () => {
  if (!canRunMachines) return;
  bed = await startMachineBed('bc', 245, CAPS);
  const base = await bed.image('capbase:1', {
    layers: [busyboxLayer(APPLETS)],
    config: { Cmd: ['/bin/sh'] },
  });
  const from = `FROM ${base}\n`;
  const run = (name: string, step: string) => {
    const p = build(name, `${from}RUN ${step}\nRUN echo after > /after\n`);
    p.catch(() => undefined); // awaited by its test
    builds.set(name, p);
  };
  // 400 MiB into a volume of 256 MiB.
  // (What a step prints after its cap is split in the Dockerfile, which the log repeats.)
  run('disk', 'dd if=/dev/zero of=/fill bs=1M count=400 && echo "disk: not" cut');
  // A buffer of 200 MiB, filled at once, under a cap of 64 MiB.
  run('memory', 'dd if=/dev/zero of=/dev/null bs=200M count=1 && echo "memory: not" cut');
  // The classic (every call forks two more), seeded again every 0.2 s by watchers that fill
  // the cap: alone, a shell's bomb collapses within a second or two at a process cap (each
  // refused fork ends its shell), and the step would then just wait for the time cap. The
  // step waits on a FIFO (`read` is a builtin: no fork needed at the cap; a child's end
  // interrupts the open, hence the loop).
  run(
    'forks',
    'mkfifo /hold; (for i in $(seq 40); do watch -n 0.2 "f() { f | f & }; f" >/dev/null 2>&1 & done); while :; do read x </hold; done; echo "forks: not" cut',
  );
  run('slow', 'echo pier-slow-step && sleep 3001');
}, 120_000);

afterAll(async () => {
  await bed?.close();
}, 120_000);

describe.skipIf(!canRunMachines)('build caps', () => {
  it('fails a build whose RUN step fills the disk past the cap, saying so', async () => {
    const { build: b, log } = await builds.get('disk')!;
    expect(b.state, log).toBe('failed');
    expect(b.error, log).toBe(
      "The build ran out of disk: an app's builds (its layer cache and work) may use 0.25 GiB.",
    );
    expect(log).toMatch(/Disk quota exceeded|No space left on device/);
    expect(log).not.toContain('disk: not cut');
  });

  it('fails a build whose RUN step allocates past the memory cap, saying so', async () => {
    const { build: b, log } = await builds.get('memory')!;
    expect(b.state, log).toBe('failed');
    expect(b.error, log).toBe("A RUN step ran out of memory: the build's memory cap is 64 MiB.");
    expect(log).not.toContain('memory: not cut');
  });

  it('cuts a fork bomb (the process cap) before the time cap', async () => {
    const { build: b, log } = await builds.get('forks')!;
    expect(b.state, log).toBe('failed');
    expect(b.error, log).toBe(
      "A RUN step kept forking past the build's process cap of 32 (a fork bomb); the build was stopped.",
    );
    expect(log).not.toContain('forks: not cut');
  });

  it('fails a build past the time cap, and leaves none of its processes, runc state, bundles or network', async () => {
    const { build: b, log, ms } = await builds.get('slow')!;
    expect(b.state, log).toBe('failed');
    expect(b.error, log).toBe(`The build ran past its time cap of ${CAPS.buildTimeoutS} s.`);
    expect(log).toContain('pier-slow-step');
    expect(ms).toBeLessThan(CAPS.buildTimeoutS * 1000 + 30_000);
    // Every build of the file has ended: nothing of theirs is left on the host.
    const ended = await Promise.all(builds.values());
    const ps = (await execFileP('ps', ['-eo', 'args'])).stdout;
    expect(ps).not.toContain('sleep 3001');
    expect(ps).not.toContain('sleep 600');
    for (const e of ended) {
      expect(await leftoversOf(e.build.id)).toEqual([]);
      // Nor of the network lent to it: a failed build returns it as a done one does.
      expect(await buildNetworkLeft(bed.tp.dataDir, e.build.id)).toEqual([]);
    }
  });
});
