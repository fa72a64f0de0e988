/**
 * The crash points are a test hook: outside NODE_ENV=test their variables are ignored, so
 * a production process can never be stopped or traced by them.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect, it } from 'vitest';

const run = promisify(execFile);
let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'pier-crash-points-'));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

/** Calls crashPoint('k', 'p') in a process of its own with NODE_ENV `env`. */
async function callIn(env: string): Promise<{ out: string; trace: string; reached: string }> {
  const trace = path.join(dir, `${env}.trace`);
  const arm = path.join(dir, `${env}.arm`);
  await writeFile(arm, 'k:other\nk:p\n');
  const script = `import { crashPoint } from ${JSON.stringify(
    path.resolve('src/jobs/crash-points.ts'),
  )};
    await Promise.race([crashPoint('k', 'p'), new Promise((r) => setTimeout(r, 300))]);
    console.log('returned');`;
  const { stdout } = await run(
    process.execPath,
    ['--import', 'tsx', '--input-type=module', '-e', script],
    {
      env: { ...process.env, NODE_ENV: env, PIER_TEST_CRASH_TRACE: trace, PIER_TEST_CRASH_AT: arm },
    },
  );
  const read = (f: string) => readFile(f, 'utf8').catch(() => '');
  return { out: stdout, trace: await read(trace), reached: await read(`${arm}.reached`) };
}

it('ignores its variables outside NODE_ENV=test', async () => {
  expect(await callIn('production')).toEqual({ out: 'returned\n', trace: '', reached: '' });
});

it('under NODE_ENV=test traces the point and stops at an armed one', async () => {
  expect(await callIn('test')).toEqual({ out: 'returned\n', trace: 'k:p\n', reached: 'k:p\n' });
});
