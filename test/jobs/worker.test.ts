import { spawn } from 'node:child_process';
import pino from 'pino';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JobCatalogue } from '../../src/jobs/catalogue.js';
import { enqueue, getJob } from '../../src/jobs/queue.js';
import { JobWorker } from '../../src/jobs/worker.js';
import { openStore, type Store } from '../../src/store/db.js';
import { migrate } from '../../src/store/migrate.js';
import { createTestDatabase, type TestDatabase } from '../helpers/database.js';
import { prepareMarks, testJobs } from '../fixtures/test-jobs.js';

let tdb: TestDatabase;
let store: Store;
let catalogue: JobCatalogue;

beforeAll(async () => {
  tdb = await createTestDatabase();
  store = openStore(tdb.url);
  await migrate(store.pool);
  await prepareMarks(store.db);
  catalogue = new JobCatalogue(testJobs(store.db, { hangAfterFirstStep: false }));
});
afterAll(async () => {
  await store?.close();
  await tdb?.drop();
});

async function marks(label: string): Promise<string[]> {
  const r = await sql<{
    step: string;
  }>`SELECT step FROM job_marks WHERE job = ${label} ORDER BY at, step`.execute(store.db);
  return r.rows.map((x) => x.step);
}

async function until<T>(fn: () => Promise<T>, ok: (v: T) => boolean, ms = 15_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (ok(v) || Date.now() > end) return v;
    await new Promise((r) => setTimeout(r, 50));
  }
}

function worker(leaseMs = 1000): JobWorker {
  return new JobWorker({
    db: store.db,
    pool: store.pool,
    catalogue,
    log: pino({ level: 'silent' }),
    leaseMs,
    pollMs: 100,
  });
}

describe('durable jobs', () => {
  it('commits a job only with the transaction that enqueued it', async () => {
    await expect(
      store.db.transaction().execute(async (tx) => {
        await enqueue(tx, catalogue, 'test.two-steps', { label: 'rolled-back' });
        throw new Error('the change failed');
      }),
    ).rejects.toThrow('the change failed');
    const { rows } = await sql`SELECT 1 FROM jobs WHERE payload->>'label' = 'rolled-back'`.execute(
      store.db,
    );
    expect(rows).toHaveLength(0);
  });

  it('checks the payload against the kind schema at enqueue time', async () => {
    await expect(enqueue(store.db, catalogue, 'test.two-steps', { label: 5 })).rejects.toThrow();
    await expect(enqueue(store.db, catalogue, 'no.such.kind', {})).rejects.toThrow(
      'unknown job kind',
    );
  });

  it('retries with backoff, and fails for good after the last try', async () => {
    const w = worker();
    await w.start();
    try {
      const ok = (await enqueue(store.db, catalogue, 'test.flaky', {
        label: 'flaky-ok',
        failTimes: 2,
      }))!;
      const bad = (await enqueue(store.db, catalogue, 'test.flaky', {
        label: 'flaky-bad',
        failTimes: 9,
      }))!;
      const okJob = await until(
        () => getJob(store.db, ok),
        (j) => j?.state === 'done',
      );
      expect(okJob).toMatchObject({ state: 'done', attempts: 3 });
      const badJob = await until(
        () => getJob(store.db, bad),
        (j) => j?.state === 'failed',
      );
      expect(badJob).toMatchObject({
        state: 'failed',
        attempts: 3,
        last_error: 'planned failure 3',
      });
      expect(await marks('flaky-bad')).toEqual(['try-1', 'try-2', 'try-3']);
    } finally {
      await w.stop();
    }
  });

  it('deduplicates queued jobs by key', async () => {
    const first = await enqueue(
      store.db,
      catalogue,
      'test.two-steps',
      { label: 'd1' },
      { dedupeKey: 'k', runAt: new Date(Date.now() + 60_000) },
    );
    const second = await enqueue(
      store.db,
      catalogue,
      'test.two-steps',
      { label: 'd2' },
      { dedupeKey: 'k' },
    );
    expect(first).toBeDefined();
    expect(second).toBeUndefined();
    await sql`DELETE FROM jobs WHERE id = ${first!}`.execute(store.db);
  });

  it('runs a burst of more jobs than its places, and a job enqueued once idle, without its tick', async () => {
    // No tick within the test: only the NOTIFY of each enqueue and the places jobs free
    // may wake the worker, so a job left waiting for the tick would not run.
    const w = new JobWorker({
      db: store.db,
      pool: store.pool,
      catalogue,
      log: pino({ level: 'silent' }),
      leaseMs: 5000,
      pollMs: 600_000,
      concurrency: 2,
    });
    await w.start();
    try {
      const labels = ['b1', 'b2', 'b3', 'b4', 'b5'];
      await store.db.transaction().execute(async (tx) => {
        for (const label of labels) await enqueue(tx, catalogue, 'test.two-steps', { label });
      });
      for (const label of labels) {
        expect(
          await until(
            () => marks(label),
            (m) => m.length === 2,
            10_000,
          ),
        ).toHaveLength(2);
      }
      await enqueue(store.db, catalogue, 'test.two-steps', { label: 'b6' });
      expect(
        await until(
          () => marks('b6'),
          (m) => m.length === 2,
          10_000,
        ),
      ).toHaveLength(2);
    } finally {
      await w.stop();
    }
  });

  it('finishes a job whose worker was killed mid-job, without redoing finished steps', async () => {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', 'test/fixtures/job-worker-process.ts', tdb.url, '1000'],
      {
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    try {
      await new Promise<void>((resolve, reject) => {
        child.stdout.on('data', (d) => String(d).includes('ready') && resolve());
        child.on('exit', (code) => reject(new Error(`worker exited early (${code})`)));
      });
      const id = (await enqueue(store.db, catalogue, 'test.two-steps', { label: 'killed' }))!;
      // Wait until the first step is recorded, then kill the worker without warning.
      await until(
        () => getJob(store.db, id),
        (j) => j?.steps?.one === 'one-done',
      );
      expect((await getJob(store.db, id))!.state).toBe('running');
      child.kill('SIGKILL');
      await new Promise((r) => child.once('exit', r));
    } finally {
      child.kill('SIGKILL');
    }
    // A new worker (the platform after a restart) takes the job once the lease lapses.
    const w = worker();
    await w.start();
    try {
      const row = await sql<{
        id: number;
      }>`SELECT id FROM jobs WHERE payload->>'label' = 'killed'`.execute(store.db);
      const job = await until(
        () => getJob(store.db, row.rows[0]!.id),
        (j) => j?.state === 'done',
      );
      expect(job).toMatchObject({ state: 'done', attempts: 2 });
      expect(await marks('killed')).toEqual(['one', 'two']);
    } finally {
      await w.stop();
    }
  });

  it('hands unfinished jobs back on a graceful stop, so a restart resumes at once', async () => {
    const hanging = new JobCatalogue(testJobs(store.db, { hangAfterFirstStep: true }));
    const w = new JobWorker({
      db: store.db,
      pool: store.pool,
      catalogue: hanging,
      log: pino({ level: 'silent' }),
      leaseMs: 60_000,
      pollMs: 100,
    });
    await w.start();
    const id = (await enqueue(store.db, hanging, 'test.two-steps', { label: 'graceful' }))!;
    await until(
      () => getJob(store.db, id),
      (j) => j?.steps?.one === 'one-done',
    );
    await w.stop(200);
    expect(await getJob(store.db, id)).toMatchObject({ state: 'queued', attempts: 0 });
    const w2 = worker(60_000);
    await w2.start();
    try {
      expect(
        await until(
          () => getJob(store.db, id),
          (j) => j?.state === 'done',
          5000,
        ),
      ).toMatchObject({ state: 'done' });
      expect(await marks('graceful')).toEqual(['one', 'two']);
    } finally {
      await w2.stop();
    }
  });
});
