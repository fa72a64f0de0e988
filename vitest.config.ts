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
    // Vitest's default is one worker fewer than the CPUs: one on a 2-core host, and the
    // suite then ran file after file (21 min). Most of a file's time is waiting on
    // servers, machines and child processes, so two files at once overlap that waiting.
    maxWorkers: 2,
    minWorkers: 1,
  },
});
