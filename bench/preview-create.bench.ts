/**
 * A preview of an app with a big database → first 200 on the preview's address (issue
 * 26, "Benchmarks"). App `shop` runs the web image (a live release) with a Postgres
 * database attached, filled with BENCH_PREVIEW_DB_MB (default 1024) of rows. pier:
 * `POST /v1/apps/shop/previews` (a copy-on-write branch of the database attached in its
 * place, the release deployed to `shop--<name>`), then GETs through the proxy on
 * `shop--<name>` until the first 200. Baseline, alternating with it in the same run: a
 * plain deploy of the same image and config to a new app → its first 200 on its address.
 * Goal: pier ≤ 1.5 × the baseline (mean), and independent of the database's size: the
 * same preview of app `tiny` (a database of 1 MB) is measured too, and the two compared.
 * Each sample's preview (or app) is deleted after it, untimed.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { compare, type Benchmark } from './lib/benchmark.js';
import {
  asLoad,
  describeSamples,
  mean,
  round,
  sampleNotes,
  Stopwatch,
  type Sample,
} from './lib/db-samples.js';
import { deployAndWait } from './lib/deploy-ops.js';
import {
  firstOk,
  MACHINE_CONFIG,
  MACHINE_SAMPLES,
  proxiedGet,
  withMachineBench,
  type MachinePier,
} from './lib/machine-pier.js';
import { machineBusy } from './lib/s3-load.js';

const GOAL_FACTOR = 1.5;
const DB_MB = Number(process.env.BENCH_PREVIEW_DB_MB ?? 1024);
const SAMPLES = Math.max(3, Math.round(MACHINE_SAMPLES / 2));
const CONFIG = { ...MACHINE_CONFIG, killTimeoutS: 1 };
/** Rows of ~1 kB: the fill of `mb` megabytes. */
const fill = (mb: number) =>
  `CREATE TABLE t AS SELECT g, repeat('x', 1000) AS pad FROM generate_series(1, ${mb * 1000}) g`;

/** Runs `sql` on the database at `url`, verifying its certificate against `ca`. */
async function run(url: string, ca: string, sql: string): Promise<void> {
  const u = new URL(url);
  const c = new pg.Client({
    host: u.hostname,
    port: Number(u.port),
    user: decodeURIComponent(u.username),
    password: decodeURIComponent(u.password),
    database: u.pathname.slice(1),
    ssl: { ca, servername: 'localhost' },
  });
  c.on('error', () => undefined);
  await c.connect();
  try {
    await c.query(sql);
  } finally {
    await c.end();
  }
}

/** App `app` with database `<app>db` of `mb` MB attached and the web image live. */
async function appWithDatabase(b: MachinePier, ca: string, app: string, mb: number) {
  await b.createApp(app);
  const db = await b.api('POST', '/v1/resources', { name: `${app}db`, kind: 'postgres' }, 201);
  await run(db.url, ca, fill(mb));
  await b.api('POST', `/v1/apps/${app}/attach`, { database: `${app}db` });
  await deployAndWait(b, app, { image: b.image, config: CONFIG });
}

/** A preview of `app` → its first 200; the preview is deleted after, untimed. */
async function previewSample(b: MachinePier, app: string, name: string): Promise<Sample> {
  const watch = new Stopwatch();
  await b.api('POST', `/v1/apps/${app}/previews`, { name }, 202);
  watch.step('POST');
  await firstOk(() => proxiedGet(b.url, `${app}--${name}`), 120_000);
  watch.step('→ first 200');
  const sample = watch.done();
  // Its job marks it ready a moment after its deploy: deleted then, untimed.
  for (let i = 0; i < 600; i++) {
    const p = (await b.api('GET', `/v1/apps/${app}/previews/${name}`)) as { state: string };
    if (p.state !== 'creating') break;
    await sleep(50);
  }
  await b.api('DELETE', `/v1/apps/${app}/previews/${name}`, undefined, 204);
  return sample;
}

/** A new app, the same image deployed → its first 200; the app is deleted after, untimed. */
async function deploySample(b: MachinePier, app: string): Promise<Sample> {
  const watch = new Stopwatch();
  await b.createApp(app);
  await b.api('POST', `/v1/apps/${app}/deploys`, { image: b.image, config: CONFIG }, 202);
  watch.step('POST app, POST deploy');
  await firstOk(() => proxiedGet(b.url, app), 120_000);
  watch.step('→ first 200');
  const sample = watch.done();
  // The deploy may still be retiring nothing or recording: wait for it to end first.
  for (let i = 0; i < 100; i++) {
    const [d] = (await b.api('GET', `/v1/apps/${app}/deploys`)) as { status: string }[];
    if (d?.status === 'done' || d?.status === 'error') break;
    await sleep(100);
  }
  await b.api('DELETE', `/v1/apps/${app}`, undefined, 204);
  return sample;
}

/** Deletes the bench's previews and databases (databases outlive `pier serve`). */
async function removeDatabases(b: MachinePier): Promise<void> {
  for (const app of ['shop', 'tiny']) {
    const previews = (await b.api('GET', `/v1/apps/${app}/previews`).catch(() => [])) as {
      name: string;
    }[];
    for (const p of previews)
      await b.api('DELETE', `/v1/apps/${app}/previews/${p.name}`, undefined, 204).catch(() => {});
  }
  const list = (await b.api('GET', '/v1/resources').catch(() => [])) as { name: string }[];
  for (const d of list)
    await b.api('DELETE', `/v1/resources/${d.name}`, undefined, 204).catch(() => {});
}

const benchmark: Benchmark = {
  name: 'preview-create',
  description: `POST /v1/apps/:name/previews of an app with a ${DB_MB} MB Postgres database → first 200 on the preview's address vs a plain deploy of the same image to a new app → first 200, ${SAMPLES} samples each, alternating`,
  run: () =>
    withMachineBench('preview-create', async (b) => {
      try {
        const ca = await b.platformCa();
        const filled = Date.now();
        await appWithDatabase(b, ca, 'shop', DB_MB);
        console.log(`  app shop with ${DB_MB} MB of rows ready in ${Date.now() - filled} ms`);
        await appWithDatabase(b, ca, 'tiny', 1);
        // Unmeasured: the first of each.
        await deploySample(b, 'plain-0');
        await previewSample(b, 'shop', 'warm');
        const plain: Sample[] = [];
        const big: Sample[] = [];
        const small: Sample[] = [];
        for (let i = 1; i <= SAMPLES; i++) {
          plain.push(await deploySample(b, `plain-${i}`));
          big.push(await previewSample(b, 'shop', `p${i}`));
          small.push(await previewSample(b, 'tiny', `p${i}`));
        }
        const ms = (s: Sample[]) => mean(s.map((x) => x.ms));
        const factor = ms(big) / ms(plain);
        const sizeFactor = ms(big) / ms(small);
        console.log(`  plain deploy to a new app: ${describeSamples(plain)}`);
        console.log(`  preview, ${DB_MB} MB database: ${describeSamples(big)}`);
        console.log(`  preview, 1 MB database:    ${describeSamples(small)}`);
        console.log(
          `  preview ÷ plain deploy: ${factor.toFixed(2)} (goal ≤ ${GOAL_FACTOR}); ` +
            `${DB_MB} MB ÷ 1 MB database: ${sizeFactor.toFixed(2)} (independent of size: ≈ 1)`,
        );
        return compare({
          name: benchmark.name,
          baselineLabel: 'a plain deploy of the same image to a new app → first 200',
          connections: 1,
          baseline: asLoad(plain),
          pier: asLoad(big),
          // ratio = baseline ms ÷ pier ms: pier within 1.5 × is a ratio of at least 1/1.5.
          goal: { minRatio: 1 / GOAL_FACTOR, maxP99Ms: Number.MAX_SAFE_INTEGER },
          notes: {
            store: b.store,
            headline: 'req/s are operations/s (1000 ÷ mean ms); the goal is on the mean',
            databaseMb: DB_MB,
            factor: round(factor, 2),
            goalFactor: GOAL_FACTOR,
            bigOverSmallDatabase: round(sizeFactor, 2),
            ...sampleNotes('baseline', plain),
            ...sampleNotes('pier', big),
            ...sampleNotes('smallDatabase', small),
            ...(await machineBusy()),
          },
        });
      } finally {
        await removeDatabases(b);
      }
    }),
};

export default benchmark;
