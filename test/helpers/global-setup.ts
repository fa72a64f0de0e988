/**
 * Gives the test run a PostgreSQL server: the one named by PIER_TEST_DATABASE_URL (CI
 * points it at the machine's server), or else a private cluster started here and
 * stopped at the end. Each test file then makes a fresh database on it.
 */
import { chmod, mkdtemp, readdir, rm, rmdir } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { startEmbeddedCluster, type EmbeddedCluster } from '../../src/store/embedded.js';
import { buildCli } from './cli-build.js';
import { runIdentityPrefix, sweepDeadRuns, sweepRun } from './identities.js';
import { sweepStaleDataDirs } from './stale-data-dirs.js';
import { sweepStaleNetns } from './stale-netns.js';
import { dropTemplateDatabase, makeTemplateDatabase } from './template-database.js';

declare module 'vitest' {
  export interface ProvidedContext {
    adminDatabaseUrl: string;
    /** The migrated database each test file's own is copied from (template-database.ts). */
    templateDatabase: string;
    /** The run's transpiled CLI entry (cli-build.ts). */
    cliEntry: string;
  }
}

let cluster: EmbeddedCluster | undefined;
let template: { url: string; name: string } | undefined;
let dir: string | undefined;
/** This run's own: runs at once on one host must not overwrite each other's. */
const cliDir = path.resolve('.test-results', `cli-${process.pid}`);

export async function setup(project: TestProject): Promise<void> {
  // Database identities (OS users), data dirs (mounted pools) and machine network
  // namespaces that crashed runs left;
  // this run's identities get its prefix.
  await sweepDeadRuns();
  await sweepStaleDataDirs();
  await sweepStaleNetns();
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
  template = { url, name: await makeTemplateDatabase(url) };
  project.provide('templateDatabase', template.name);
}

/**
 * Removes the empty directories under `dir`, deepest first: each test bed's sandboxes
 * keep runc's state and bundles under /run/pier/sandboxes/<hash of its run dir>, empty
 * once its machines are gone, and the bed's data dir (whose hash names it) is gone with
 * the bed. A live pier's directory is either not empty or made again on its next start.
 */
async function removeEmptyDirs(dir: string): Promise<void> {
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  for (const e of entries) if (e.isDirectory()) await removeEmptyDirs(path.join(dir, e.name));
  await rmdir(dir).catch(() => {}); // not empty: kept
}

export async function teardown(): Promise<void> {
  await removeEmptyDirs('/run/pier/sandboxes');
  await sweepRun(runIdentityPrefix());
  await rm(cliDir, { recursive: true, force: true });
  if (template) await dropTemplateDatabase(template.url, template.name).catch(() => {});
  await cluster?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
}
