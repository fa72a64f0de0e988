import { defineConfig } from 'vitest/config';
import DurationSequencer from './test/helpers/sequencer.js';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts', 'src/**/*.test.ts'],
    globalSetup: ['test/helpers/global-setup.ts'],
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Each test file gets its own database, so files can run side by side.
    fileParallelism: true,
    // Two files at once even on a 2-core host (vitest's default is cores − 1, i.e. one):
    // most of a file's time is spent waiting on servers it started (PostgreSQL, runc
    // machines, pebble), not on the CPU. Three were tried: 5 % faster, with importing
    // (collect) half again as slow and timing-bound tests less sure.
    maxWorkers: 2,
    // One process per worker runs file after file, keeping its imported modules: a fresh
    // process per file spent ~2.6 s importing pier (and its SDKs) each time, a quarter of
    // the suite's time. Each file still has its own database, data dirs and servers.
    isolate: false,
    // Longest files first, by the seconds of the last full run (test/durations.json).
    sequence: { sequencer: DurationSequencer },
  },
});
