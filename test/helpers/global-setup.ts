/**
 * Gives the test run a PostgreSQL server: the one named by PIER_TEST_DATABASE_URL (CI
 * points it at the machine's server), or else a private cluster started here and
 * stopped at the end. Each test file then makes a fresh database on it.
 */
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { startEmbeddedCluster, type EmbeddedCluster } from '../../src/store/embedded.js';
import { buildCli } from './cli-build.js';
import { runIdentityPrefix, sweepDeadRuns, sweepRun } from './identities.js';

declare module 'vitest' {
  export interface ProvidedContext {
    adminDatabaseUrl: string;
    /** The run's transpiled CLI entry (cli-build.ts). */
    cliEntry: string;
  }
}

let cluster: EmbeddedCluster | undefined;
let dir: string | undefined;
/** This run's own: runs at once on one host must not overwrite each other's. */
const cliDir = path.resolve('.test-results', `cli-${process.pid}`);

export async function setup(project: TestProject): Promise<void> {
  // Database identities (OS users) that crashed runs left; this run's get its prefix.
  await sweepDeadRuns();
  project.provide('identityPrefix', runIdentityPrefix());
  project.provide('cliEntry', await buildCli(cliDir));
  let url = process.env.PIER_TEST_DATABASE_URL;
  if (!url) {
    dir = await mkdtemp(path.join(os.tmpdir(), 'pier-test-pg-'));
    await chmod(dir, 0o711); // the service user must pass through to its cluster
    cluster = await startEmbeddedCluster({
      dir: path.join(dir, 'store'),
      serviceUser: 'pier',
      ephemeral: true,
    });
    url = cluster.url;
  }
  const client = new pg.Client({ connectionString: url });
  await client.connect().catch((err: Error) => {
    throw new Error(
      `the test database server at PIER_TEST_DATABASE_URL is unreachable: ${err.message}`,
    );
  });
  await client.end();
  project.provide('adminDatabaseUrl', url);
}

export async function teardown(): Promise<void> {
  await sweepRun(runIdentityPrefix());
  await rm(cliDir, { recursive: true, force: true });
  await cluster?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
}
