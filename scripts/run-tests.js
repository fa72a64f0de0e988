// Runs every test with vitest and ends with the plain closing line "N passed, N failed"
// (plus skipped), which CI reads; the exit code is vitest's.
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync } from 'node:fs';

mkdirSync('.test-results', { recursive: true });
const out = '.test-results/vitest.json';
rmSync(out, { force: true });
const run = spawnSync(
  process.execPath,
  [
    'node_modules/vitest/vitest.mjs',
    'run',
    '--reporter=default',
    '--reporter=json',
    `--outputFile.json=${out}`,
    ...process.argv.slice(2),
  ],
  { stdio: 'inherit' },
);
let summary = 'no test results were written';
try {
  const r = JSON.parse(readFileSync(out, 'utf8'));
  const skipped = r.numPendingTests + r.numTodoTests;
  summary = `${r.numPassedTests} passed, ${r.numFailedTests} failed${skipped ? `, ${skipped} skipped` : ''}`;
} catch {
  // vitest died before writing its report: the exit code says enough
}
console.log(summary);
process.exit(run.status ?? 1);
