/**
 * Large-object throughput of the S3 gateway against the raw disk. For 1 MiB and 64 MiB
 * objects, 16 concurrent streams each write N objects, then read them back:
 *
 * - baseline: plain file I/O on the same filesystem as pier's data dir, each file fsynced
 *   before close (pier fsyncs every object before it answers; it also renames the temp
 *   file into place and fsyncs the directory, and commits a row in PostgreSQL). The same
 *   run without fsync is reported for context.
 * - pier: PUT then GET of presigned URLs (from the SDK's presigner) with plain node:http, as
 *   `curl` uses them: the cheapest client, so that the load generator, which shares the two
 *   cores, takes as little as it can. This is the headline and the goal's verdict.
 * - pier through the AWS SDK at its defaults (CRC32 checksum header, and over plain http a
 *   signed SHA-256 of each body), as most customers use it: printed for context.
 * - bare HTTP: a plain node:http server (lib/bare-object-server.ts) that writes, fsyncs and
 *   streams the same files, driven by the same plain client. What any Node HTTP server
 *   moves here: pier ÷ bare is the gateway's own cost.
 *
 * N is calibrated from the baseline's warm-up so that its PUT phase lasts about
 * BENCH_DURATION_S, and pier writes the same N × 16 objects of the very same bytes. The
 * load runs in a child process (lib/s3-worker.ts) so that the SDK's hashing and signing do
 * not take pier's event loop. The headline is the comparison with the lowest ratio; every
 * figure is printed and kept in `notes`.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import path from 'node:path';
import { compare, type Benchmark } from './lib/benchmark.js';
import type { LoadResult } from './lib/load.js';
import { startBareObjectServer } from './lib/bare-object-server.js';
import { createBenchOrg, startBenchPlatform } from './lib/platform.js';
import { withBenchBucket } from './lib/s3-bucket.js';
import { diskDirBeside, phaseBudget } from './lib/s3-disk.js';
import {
  machineBusy,
  runThroughputJob,
  type PhaseResult,
  type ThroughputJob,
  type ThroughputResult,
} from './lib/s3-load.js';

const STREAMS = 16;
const SIZES = [
  { label: '1 MiB', key: '1MiB', bytes: 1024 ** 2 },
  { label: '64 MiB', key: '64MiB', bytes: 64 * 1024 ** 2 },
] as const;
/** The goal: large-object throughput within 70 % of the raw disk. */
const MIN_RATIO = 0.7;

interface Comparison {
  size: (typeof SIZES)[number];
  op: 'PUT' | 'GET';
  disk: PhaseResult;
  diskNoFsync: PhaseResult;
  /** Presigned URLs over plain node:http: the headline. */
  pier: PhaseResult;
  pierSdk: PhaseResult;
  bare: PhaseResult;
  /** GETs only: the bare server answering from memory, the most any server moves here. */
  ceiling?: PhaseResult;
  ratio: number;
  serverCores: number;
  clientCores: number;
  sdkServerCores: number;
  sdkClientCores: number;
}

function asLoad(p: PhaseResult): LoadResult {
  return {
    requestsPerSec: p.objectsPerSec,
    p50Ms: p.p50Ms,
    p99Ms: p.p99Ms,
    non2xx: 0,
    errors: 0,
    requests: p.objects,
    durationS: p.seconds,
  };
}

const mb = (n: number) => n.toLocaleString('en-US', { maximumFractionDigits: 0 });

interface SizeRuns {
  disk: ThroughputResult;
  noFsync: ThroughputResult;
  pier: ThroughputResult;
  pierSdk: ThroughputResult;
  bare: ThroughputResult;
}

function comparisons(size: (typeof SIZES)[number], runs: SizeRuns): Comparison[] {
  return (['put', 'get'] as const).map((phase) => ({
    size,
    op: phase === 'put' ? 'PUT' : 'GET',
    disk: runs.disk[phase],
    diskNoFsync: runs.noFsync[phase],
    pier: runs.pier[phase],
    pierSdk: runs.pierSdk[phase],
    bare: runs.bare[phase],
    ceiling: phase === 'get' ? runs.bare.getFromMemory : undefined,
    ratio: runs.pier[phase].mbPerSec / runs.disk[phase].mbPerSec,
    serverCores: runs.pier.serverCores[phase],
    clientCores: runs.pier.workerCores[phase],
    sdkServerCores: runs.pierSdk.serverCores[phase],
    sdkClientCores: runs.pierSdk.workerCores[phase],
  }));
}

/** The ceiling's share of the disk's figure, for GETs. */
function ceilingRatio(c: Comparison): number | undefined {
  return c.ceiling ? c.ceiling.mbPerSec / c.disk.mbPerSec : undefined;
}

function describe(c: Comparison): string {
  const ceiling = ceilingRatio(c);
  let verdict = c.ratio >= MIN_RATIO ? 'met' : 'NOT met';
  if (c.ratio < MIN_RATIO && ceiling !== undefined && ceiling < MIN_RATIO) {
    verdict += `, out of reach with this client: its ceiling is ${ceiling.toFixed(2)}`;
  }
  const disk =
    c.op === 'PUT'
      ? `disk+fsync ${mb(c.disk.mbPerSec)} MB/s (no fsync ${mb(c.diskNoFsync.mbPerSec)})`
      : `disk ${mb(c.disk.mbPerSec)} MB/s (no-fsync run ${mb(c.diskNoFsync.mbPerSec)})`;
  const ofBare = c.pier.mbPerSec / c.bare.mbPerSec;
  const ceilingText = c.ceiling
    ? `, loopback ceiling (bare server from memory) ${mb(c.ceiling.mbPerSec)} MB/s`
    : '';
  return (
    `  ${c.size.label.padStart(6)} ${c.op}: ${disk}, bare HTTP ${mb(c.bare.mbPerSec)} MB/s` +
    `${ceilingText}, ` +
    `pier ${mb(c.pier.mbPerSec)} MB/s: ratio ${c.ratio.toFixed(2)} of disk (${verdict}), ` +
    `${ofBare.toFixed(2)} of bare HTTP; pier p99 ${c.pier.p99Ms.toFixed(0)} ms per object, ` +
    `CPU pier ${c.serverCores.toFixed(2)} + client ${c.clientCores.toFixed(2)} cores\n` +
    `         with the AWS SDK: pier ${mb(c.pierSdk.mbPerSec)} MB/s ` +
    `(${(c.pierSdk.mbPerSec / c.disk.mbPerSec).toFixed(2)} of disk), ` +
    `CPU pier ${c.sdkServerCores.toFixed(2)} + SDK ${c.sdkClientCores.toFixed(2)} cores`
  );
}

const benchmark: Benchmark = {
  name: 'buckets-throughput',
  description: `S3 PUT/GET of 1 MiB and 64 MiB objects (presigned, SDK), ${STREAMS} streams, vs plain file I/O with fsync and a bare HTTP server`,
  async run({ durationS, warmupS }) {
    const pier = await startBenchPlatform();
    let diskRoot: string | undefined;
    try {
      diskRoot = await diskDirBeside(pier.dataDir, 'pier-bench-disk');
      const org = await createBenchOrg(pier);
      // Only a hang limit: a slow pier takes longer than the calibrated baseline.
      const limitS = 20 * (durationS + warmupS) + 300;
      const all: Comparison[] = [];
      const notes: Record<string, string | number> = {
        store: pier.store,
        streams: STREAMS,
        baseline:
          'plain file I/O in a temp dir on the filesystem of the data dir: open, write, fsync, close; ' +
          'read back with 1 MiB reads (from the page cache, as pier reads)',
        client:
          'presigned URLs (SDK presigner) over plain node:http; also the AWS SDK v3 at its defaults ' +
          '(CRC32 in x-amz-checksum-crc32, signed SHA-256 payload over http, no retries)',
        bare: 'plain node:http server writing, fsyncing and streaming the same files, same client',
        ceiling:
          'GETs only: the bare server answering the same bytes from memory in one write, same client: ' +
          'the most any HTTP server moves over loopback here',
        load: 'a child process (lib/s3-worker.ts) for every side; pier and the bare server run in the benchmark process',
      };
      for (const size of SIZES) {
        const seed = `buckets-throughput-${size.bytes}`;
        const common = { size: size.bytes, streams: STREAMS, warmupS, seed };
        const disk = await runDisk(diskRoot, limitS, {
          ...common,
          kind: 'disk-throughput',
          fsync: true,
          targetS: durationS,
          maxBytes: await phaseBudget(diskRoot),
        });
        const perStream = disk.perStream;
        const throughS3 = (client: 'sdk' | 'presigned') =>
          withBenchBucket(pier, org, `bench-tp-${size.key.toLowerCase()}-${client}`, (b) =>
            runThroughputJob(
              {
                ...common,
                kind: 's3-throughput',
                client,
                perStream,
                target: b.target,
                prefix: 'tp/',
              },
              limitS,
            ),
          );
        const measured = await throughS3('presigned');
        const pierSdk = await throughS3('sdk');
        const bare = await runBare(diskRoot, limitS, { ...common, perStream });
        // Last, so that the dirty pages it leaves behind do not slow the fsync runs down.
        const noFsync = await runDisk(diskRoot, limitS, {
          ...common,
          kind: 'disk-throughput',
          fsync: false,
          perStream,
        });
        const found = comparisons(size, { disk, noFsync, pier: measured, pierSdk, bare });
        for (const c of found) console.log(describe(c));
        all.push(...found);
        notes[`${size.key}_objectsPerStream`] = perStream;
        notes[`${size.key}_bytesPerPhase`] = perStream * STREAMS * size.bytes;
        for (const c of found) {
          const k = `${size.key}_${c.op}`;
          notes[`${k}_diskFsyncMBps`] = round(c.disk.mbPerSec);
          notes[`${k}_diskNoFsyncMBps`] = round(c.diskNoFsync.mbPerSec);
          notes[`${k}_pierMBps`] = round(c.pier.mbPerSec);
          notes[`${k}_pierSdkMBps`] = round(c.pierSdk.mbPerSec);
          notes[`${k}_bareHttpMBps`] = round(c.bare.mbPerSec);
          notes[`${k}_ratioOfBareHttp`] = round(c.pier.mbPerSec / c.bare.mbPerSec, 3);
          if (c.ceiling) {
            notes[`${k}_ceilingMBps`] = round(c.ceiling.mbPerSec);
            notes[`${k}_ceilingRatioOfDisk`] = round(ceilingRatio(c)!, 3);
          }
          notes[`${k}_pierSdkCores`] = round(c.sdkServerCores, 2);
          notes[`${k}_sdkClientCores`] = round(c.sdkClientCores, 2);
          notes[`${k}_ratio`] = round(c.ratio, 3);
          notes[`${k}_diskP99Ms`] = round(c.disk.p99Ms);
          notes[`${k}_pierP99Ms`] = round(c.pier.p99Ms);
          notes[`${k}_pierCores`] = round(c.serverCores, 2);
          notes[`${k}_clientCores`] = round(c.clientCores, 2);
        }
      }

      Object.assign(notes, await machineBusy());
      const worst = all.reduce((a, b) => (b.ratio < a.ratio ? b : a));
      notes.headline = `${worst.size.label} ${worst.op}, the lowest ratio of the ${all.length} comparisons; req/s are objects/s`;
      return compare({
        name: benchmark.name,
        baselineLabel: `${worst.op === 'PUT' ? 'disk+fsync' : 'disk'} (${worst.size.label} ${worst.op})`,
        connections: STREAMS,
        baseline: asLoad(worst.disk),
        pier: asLoad(worst.pier),
        goal: { minRatio: MIN_RATIO, maxP99Ms: Infinity },
        notes,
      });
    } finally {
      if (diskRoot) await rm(diskRoot, { recursive: true, force: true });
      await pier.close();
    }
  },
};

/** Runs a raw-disk job in a fresh directory under `root`, removed again afterwards. */
async function runDisk(
  root: string,
  limitS: number,
  job: Omit<ThroughputJob, 'dir'>,
): Promise<ThroughputResult> {
  const dir = await mkdtemp(path.join(root, `${job.size}-${job.fsync ? 'fsync' : 'no-fsync'}-`));
  try {
    return await runThroughputJob({ ...job, dir }, limitS);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** The bare-HTTP reference over files in a fresh directory under `root`, removed afterwards. */
async function runBare(
  root: string,
  limitS: number,
  job: Omit<ThroughputJob, 'kind' | 'dir' | 'url'>,
): Promise<ThroughputResult> {
  const dir = await mkdtemp(path.join(root, `${job.size}-bare-http-`));
  const server = await startBareObjectServer(dir);
  try {
    return await runThroughputJob(
      { ...job, kind: 'bare-http-throughput', url: server.url },
      limitS,
    );
  } finally {
    await server.close();
    await rm(dir, { recursive: true, force: true });
  }
}

function round(n: number, digits = 1): number {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}

export default benchmark;
