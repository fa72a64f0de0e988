/**
 * Small-object operations per second at the S3 gateway (1 KiB objects, 32 concurrent):
 *
 * - baseline: `fs.readFile` of 1 KiB files, 32 concurrent, in a child process.
 * - pier, the headline: GET of a presigned URL of a 1 KiB object, driven by autocannon
 *   (`measure()`), so that the load generator is cheap: this is the whole gateway path,
 *   SigV4 verification of the presigned query included, plus the metadata lookup in
 *   PostgreSQL and the blob read.
 * - context for PutObject: plain writes of new 1 KiB files (open, write, fsync, close).
 * - pier, for comparison: GetObject and PutObject with the AWS SDK (lib/s3-worker.ts), whose
 *   client-side cost per operation is far higher than autocannon's, so they may be bound by
 *   the client rather than by pier. Each PUT creates a new key.
 *
 * The goal is absolute: more than 2,000 small GETs per second on a 2-core machine.
 * It is expressed as a ratio, 2,000 ÷ the baseline's ops/s, so that the runner's verdict is
 * the goal's verdict.
 */
import { rm } from 'node:fs/promises';
import { compare, type Benchmark } from './lib/benchmark.js';
import { measure, type LoadResult } from './lib/load.js';
import { createBenchOrg, startBenchPlatform } from './lib/platform.js';
import { presignGet, withBenchBucket } from './lib/s3-bucket.js';
import { diskDirBeside } from './lib/s3-disk.js';
import { machineBusy, runSmallJob, type SmallResult } from './lib/s3-load.js';

const CONNECTIONS = 32;
const SIZE = 1024;
/** Distinct files (baseline) and keys (SDK GETs) the reads go round. */
const KEYS = 100;
/** The goal: more than this many small GETs per second. */
const MIN_GETS_PER_SEC = 2000;

function asLoad(r: SmallResult): LoadResult {
  return {
    requestsPerSec: r.opsPerSec,
    p50Ms: r.p50Ms,
    p99Ms: r.p99Ms,
    non2xx: 0,
    errors: 0,
    requests: r.ops,
    durationS: r.seconds,
  };
}

const num = (n: number) => Math.round(n).toLocaleString('en-US');

function round(n: number, digits = 1): number {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}

const benchmark: Benchmark = {
  name: 'buckets-small',
  description: `1 KiB GetObject (presigned, autocannon) vs fs.readFile, ${CONNECTIONS} concurrent; SDK GET and PUT ops/s`,
  async run({ durationS, warmupS }) {
    const pier = await startBenchPlatform();
    let dir: string | undefined;
    try {
      dir = await diskDirBeside(pier.dataDir, 'pier-bench-small');
      const org = await createBenchOrg(pier);
      const common = {
        size: SIZE,
        concurrency: CONNECTIONS,
        durationS,
        warmupS,
        seed: 'buckets-small',
        keys: KEYS,
      };
      const limitS = 3 * (durationS + warmupS) + 120;
      const baseline = await runSmallJob({ ...common, kind: 'disk-small-read', dir }, limitS);
      console.log(
        `  fs.readFile: ${num(baseline.opsPerSec)} ops/s, p99 ${baseline.p99Ms.toFixed(2)} ms`,
      );

      const diskPut = await runSmallJob({ ...common, kind: 'disk-small-write', dir }, limitS);
      console.log(
        `  write+fsync+close (context for PUT): ${num(diskPut.opsPerSec)} ops/s, p99 ${diskPut.p99Ms.toFixed(2)} ms`,
      );

      const { get, sdkGet, sdkPut } = await withBenchBucket(pier, org, 'bench-small', async (b) => {
        const job = { ...common, target: b.target, prefix: 'small/' };
        // Also writes the KEYS objects that the presigned GET reads one of.
        const sdkGet = await runSmallJob({ ...job, kind: 's3-small-get' }, limitS);
        const url = await presignGet(pier, org, b, 'small/get-0');
        const get = await measure({ url, connections: CONNECTIONS, durationS, warmupS });
        const sdkPut = await runSmallJob({ ...job, kind: 's3-small-put' }, limitS);
        return { get, sdkGet, sdkPut };
      });
      const verdict = get.requestsPerSec > MIN_GETS_PER_SEC ? 'met' : 'NOT met';
      console.log(
        `  pier presigned GET (autocannon): ${num(get.requestsPerSec)} ops/s, p99 ${get.p99Ms.toFixed(2)} ms ` +
          `(goal > ${num(MIN_GETS_PER_SEC)}/s: ${verdict})`,
      );
      for (const [what, r] of [
        ['GetObject', sdkGet],
        ['PutObject', sdkPut],
      ] as const) {
        console.log(
          `  pier SDK ${what}: ${num(r.opsPerSec)} ops/s, p99 ${r.p99Ms.toFixed(2)} ms; ` +
            `CPU pier ${r.serverCores.toFixed(2)} + SDK client ${r.workerCores.toFixed(2)} cores`,
        );
      }

      return compare({
        name: benchmark.name,
        baselineLabel: 'fs.readFile 1 KiB',
        connections: CONNECTIONS,
        baseline: asLoad(baseline),
        pier: get,
        goal: { minRatio: MIN_GETS_PER_SEC / baseline.opsPerSec, maxP99Ms: Infinity },
        notes: {
          store: pier.store,
          ...(await machineBusy()),
          goal: `> ${MIN_GETS_PER_SEC} GETs/s (absolute; minRatio is ${MIN_GETS_PER_SEC} ÷ this run's baseline ops/s)`,
          objectBytes: SIZE,
          pierGet: 'autocannon on a presigned GET URL of one 1 KiB object',
          baseline: `fs.readFile round ${KEYS} files of ${SIZE} bytes in a child process`,
          sdkGetOpsPerSec: round(sdkGet.opsPerSec),
          sdkGetP99Ms: round(sdkGet.p99Ms, 2),
          sdkGetPierCores: round(sdkGet.serverCores, 2),
          sdkGetClientCores: round(sdkGet.workerCores, 2),
          diskWriteFsyncOpsPerSec: round(diskPut.opsPerSec),
          diskWriteFsyncP99Ms: round(diskPut.p99Ms, 2),
          sdkPutOpsPerSec: round(sdkPut.opsPerSec),
          sdkPutP99Ms: round(sdkPut.p99Ms, 2),
          sdkPutPierCores: round(sdkPut.serverCores, 2),
          sdkPutClientCores: round(sdkPut.workerCores, 2),
          sdk: 'AWS SDK v3 defaults: CRC32 in x-amz-checksum-crc32, signed SHA-256 payload (http), no retries',
        },
      });
    } finally {
      if (dir) await rm(dir, { recursive: true, force: true });
      await pier.close();
    }
  },
};

export default benchmark;
