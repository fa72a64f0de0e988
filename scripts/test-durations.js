// Writes test/durations.json, the seconds each test file took in the last full run
// (.test-results/vitest.json), which test/helpers/sequencer.ts orders files by. Run it after
// a full `npm test` and commit the file when the order should change.
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const report = JSON.parse(readFileSync('.test-results/vitest.json', 'utf8'));
const seconds = {};
for (const r of report.testResults) {
  // From the checkout's root (the report may come from another clone: CI's, say).
  const file = r.name
    .split(path.sep)
    .join('/')
    .replace(/^.*?\/(?=(test|src)\/)/, '');
  seconds[file] = Math.round((r.endTime - r.startTime) / 100) / 10;
}
const sorted = Object.fromEntries(Object.entries(seconds).sort(([, a], [, b]) => b - a));
writeFileSync('test/durations.json', `${JSON.stringify(sorted, null, 2)}\n`);
console.log(`test/durations.json: ${Object.keys(sorted).length} files`);
