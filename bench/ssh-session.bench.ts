/**
 * A command through the SSH gateway (issue 26, "Benchmarks"): the stock OpenSSH client
 * runs `ssh -p PORT <token>@HOST true` with the command an SSH token hands out (a new
 * connection each time: key exchange, host key check, login, a session channel, `runc
 * exec` of `true` in the machine, its exit status), timed from spawn to exit. Baseline,
 * in the same run, alternating: `runc exec <machine> true` by hand on the same sandbox,
 * the process pier's session starts. Goal: pier ≤ 3 × the baseline (mean).
 */
import { spawn } from 'node:child_process';
import { readdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Benchmark } from './lib/benchmark.js';
import { compare } from './lib/benchmark.js';
import {
  asLoad,
  describeSamples,
  fmtMs,
  mean,
  round,
  sampleNotes,
  Stopwatch,
  type Sample,
} from './lib/db-samples.js';
import { MACHINE_SAMPLES, withMachineBench, type MachinePier } from './lib/machine-pier.js';
import { machineBusy } from './lib/s3-load.js';

const GOAL_FACTOR = 3;
const APP = 'shell';
/** More samples than a machine create: each is some tens of ms. */
const SAMPLES = Math.max(20, MACHINE_SAMPLES * 3);

/** Runs `argv` to its end; throws unless it exits 0. */
function run(argv: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const [file, ...args] = argv as [string, ...string[]];
    const child = spawn(file, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.setEncoding('utf8').on('data', (s: string) => (err += s));
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0 ? resolve() : reject(new Error(`${file} exited ${code}: ${err.slice(-500)}`)),
    );
  });
}

async function timed(argv: string[]): Promise<Sample> {
  const watch = new Stopwatch();
  await run(argv);
  watch.step('spawn → exit 0');
  return watch.done();
}

/** `runc --root <root>` of the machine's sandbox: the state dir holding its id. */
async function runcOf(id: string): Promise<string[]> {
  const top = '/run/pier/sandboxes';
  for (const key of await readdir(top)) {
    const root = path.join(top, key, 'runc');
    if ((await readdir(root).catch(() => [] as string[])).includes(id))
      return ['runc', '--root', root];
  }
  throw new Error(`no runc state of machine ${id} under ${top}`);
}

/** The SSH token's command as argv, with the gateway's host key pinned (no prompt). */
async function sshCommand(b: MachinePier, id: string): Promise<string[]> {
  const gateway = await b.api('GET', '/v1/ssh');
  const hosts = path.join(b.workDir, 'known_hosts');
  await writeFile(hosts, `[${gateway.host}]:${gateway.port} ${gateway.hostKey}\n`);
  const token = await b.api('POST', '/v1/ssh/tokens', { app: APP, machine: id, ttlS: 3600 }, 201);
  const [ssh, ...rest] = String(token.command).split(' ') as [string, ...string[]];
  const options = [
    ...['-F', '/dev/null', '-o', `UserKnownHostsFile=${hosts}`],
    ...['-o', 'StrictHostKeyChecking=yes', '-o', 'BatchMode=yes', '-o', 'LogLevel=ERROR'],
  ];
  return [ssh === 'ssh' ? '/usr/bin/ssh' : ssh, ...options, ...rest, 'true'];
}

const benchmark: Benchmark = {
  name: 'ssh-session',
  description: `ssh <token>@gateway true (stock OpenSSH, a new connection each) vs runc exec <machine> true by hand, ${SAMPLES} samples each, alternating`,
  run: () =>
    withMachineBench('ssh-session', async (b) => {
      await b.createApp(APP);
      const id = (await b.createMachine(APP)).id as string;
      const runc = [...(await runcOf(id)), 'exec', id, 'true'];
      const ssh = await sshCommand(b, id);
      // Unmeasured: the first of each (caches, JIT, the session rate's first tokens).
      await timed(runc);
      await timed(ssh);
      const plain: Sample[] = [];
      const pier: Sample[] = [];
      for (let i = 0; i < SAMPLES; i++) {
        plain.push(await timed(runc));
        pier.push(await timed(ssh));
      }
      const factor = mean(pier.map((s) => s.ms)) / mean(plain.map((s) => s.ms));
      console.log(`  runc exec by hand: ${describeSamples(plain)}`);
      console.log(`  ssh through pier:  ${describeSamples(pier)}`);
      console.log(`  pier ÷ runc exec: ${factor.toFixed(2)} (goal ≤ ${GOAL_FACTOR})`);
      const worst = Math.max(...pier.map((s) => s.ms));
      return compare({
        name: benchmark.name,
        baselineLabel: 'runc exec <machine> true by hand',
        connections: 1,
        baseline: asLoad(plain),
        pier: asLoad(pier),
        // ratio = baseline ms ÷ pier ms: pier within 3 × is a ratio of at least 1/3.
        goal: { minRatio: 1 / GOAL_FACTOR, maxP99Ms: worst + 1 },
        notes: {
          store: b.store,
          headline: 'req/s are operations/s (1000 ÷ mean ms); the goal is on the mean',
          factor: round(factor, 2),
          goalFactor: GOAL_FACTOR,
          pierMeanMs: round(mean(pier.map((s) => s.ms))),
          pierWorst: fmtMs(worst),
          ...sampleNotes('baseline', plain),
          ...sampleNotes('pier', pier),
          ...(await machineBusy()),
        },
      });
    }),
};

export default benchmark;
