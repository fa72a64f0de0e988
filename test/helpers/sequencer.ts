/**
 * The order test files start in: longest first, by the seconds each took in a full run
 * (test/durations.json, written by `npm run test:durations` from the last run's report).
 *
 * Why: two workers share the files, and the run ends when the later worker does. vitest's
 * own order needs its result cache, which a fresh clone (CI) does not have; it then starts
 * the largest files first, which put a 5-minute file at the end of a 35-minute run. Longest
 * first leaves only short files for the end, so both workers finish close together.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/** What a file not in the list is taken to last: about a file with a machine bed. */
const UNKNOWN_SECONDS = 20;

export default class DurationSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const root = this.ctx.config.root;
    const seconds = durations(path.join(root, 'test', 'durations.json'));
    const of = (f: TestSpecification) =>
      seconds[path.relative(root, f.moduleId).split(path.sep).join('/')] ?? UNKNOWN_SECONDS;
    return [...files].sort((a, b) => of(b) - of(a));
  }
}

function durations(file: string): Record<string, number> {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as Record<string, number>;
  } catch {
    return {};
  }
}
