import { defineConfig } from 'vitest/config';

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
  },
});
