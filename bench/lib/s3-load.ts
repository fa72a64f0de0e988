/**
 * Load for the object benchmarks: `runS3Job()` runs one job in a child process
 * (s3-worker.ts), for the reason `measure()` does: the S3 SDK's client work (signing,
 * SHA-256 and CRC32 of every body, XML, stream handling) must not take the event loop of
 * the pier under test, which lives in this process. The raw-disk baselines run in the same
 * worker, so both sides of a comparison are driven from the same kind of process. The
 * worker fails (exit code 1, message on stderr) on any error answer, short read or wrong
 * ETag; so does the job here.
 */
import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { S3Target } from './s3-bucket.js';

/** Throughput jobs: `streams` concurrent loops, each writing then reading `perStream` objects. */
export interface ThroughputJob {
  kind: 'disk-throughput' | 's3-throughput' | 'bare-http-throughput';
  size: number;
  streams: number;
  /** Objects per stream; absent = calibrated from the warm-up so a phase lasts `targetS`. */
  perStream?: number;
  /** With perStream absent: the intended length of the PUT phase. */
  targetS?: number;
  /** With perStream absent: the most bytes one phase may write (disk space). */
  maxBytes?: number;
  /** Length of the unmeasured warm-up (write then read, at least one object per stream). */
  warmupS: number;
  /** Seeds the body, so that every job writes the very same bytes. */
  seed: string;
  /** disk-throughput: the directory to write in; fsync each file before closing it. */
  dir?: string;
  fsync?: boolean;
  /** s3-throughput: the bucket, and the key prefix. */
  target?: S3Target;
  prefix?: string;
  /**
   * s3-throughput: the AWS SDK (the default), or presigned URLs driven by plain node:http,
   * which costs the load generator far less CPU.
   */
  client?: 'sdk' | 'presigned';
  /** bare-http-throughput: the bare server's base URL (bare-object-server.ts). */
  url?: string;
}

/** Small-object jobs: `concurrency` loops for `durationS`, after a warm-up of `warmupS`. */
export interface SmallJob {
  kind: 'disk-small-read' | 'disk-small-write' | 's3-small-get' | 's3-small-put';
  size: number;
  concurrency: number;
  durationS: number;
  warmupS: number;
  seed: string;
  /** How many distinct files or keys the reads go round (made before the measurement). */
  keys: number;
  dir?: string;
  target?: S3Target;
  prefix?: string;
}

export type S3Job = ThroughputJob | SmallJob;

export function isThroughputJob(job: S3Job): job is ThroughputJob {
  return (
    job.kind === 'disk-throughput' ||
    job.kind === 's3-throughput' ||
    job.kind === 'bare-http-throughput'
  );
}

/** One measured phase of a throughput job. */
export interface PhaseResult {
  objects: number;
  bytes: number;
  seconds: number;
  /** Decimal megabytes (10^6 bytes) per second. */
  mbPerSec: number;
  objectsPerSec: number;
  /** Per object, first byte sent to last byte done. */
  p50Ms: number;
  p99Ms: number;
}

export interface ThroughputResult {
  perStream: number;
  put: PhaseResult;
  get: PhaseResult;
  /**
   * bare-http-throughput only: the same GETs answered from the server's memory, the
   * loopback ceiling of every GET figure with this client.
   */
  getFromMemory?: PhaseResult;
  /** CPU the worker itself used during each measured phase, in cores (1.0 = one core busy). */
  workerCores: { put: number; get: number };
  /** CPU this (pier's) process used during each measured phase, in cores. */
  serverCores: { put: number; get: number };
}

/** What the worker prints: everything but pier's CPU, which the parent measures. */
export type ThroughputWorkerResult = Omit<ThroughputResult, 'serverCores'>;
export type SmallWorkerResult = Omit<SmallResult, 'serverCores'>;

export interface SmallResult {
  ops: number;
  seconds: number;
  opsPerSec: number;
  p50Ms: number;
  p99Ms: number;
  workerCores: number;
  serverCores: number;
}

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const workerPath = fileURLToPath(new URL('./s3-worker.ts', import.meta.url));

/**
 * Marks the worker prints on stderr as it enters and leaves each measured phase, so that
 * this process can measure its own CPU over exactly that phase.
 */
export const PHASE_MARK = '@@phase ';

export function runThroughputJob(job: ThroughputJob, limitS: number): Promise<ThroughputResult> {
  return runWorker(job, limitS).then(({ output, server }) => {
    const r = output as ThroughputWorkerResult;
    if (!isPhase(r.put) || !isPhase(r.get) || typeof r.perStream !== 'number') {
      throw new Error(`the ${job.kind} worker printed an unexpected result`);
    }
    return { ...r, serverCores: { put: server.put ?? 0, get: server.get ?? 0 } };
  });
}

export function runSmallJob(job: SmallJob, limitS: number): Promise<SmallResult> {
  return runWorker(job, limitS).then(({ output, server }) => {
    const r = output as SmallWorkerResult;
    if (typeof r.opsPerSec !== 'number' || typeof r.p99Ms !== 'number') {
      throw new Error(`the ${job.kind} worker printed an unexpected result`);
    }
    return { ...r, serverCores: server.run ?? 0 };
  });
}

function isPhase(v: unknown): v is PhaseResult {
  if (typeof v !== 'object' || v === null) return false;
  const p = v as Record<string, unknown>;
  return ['objects', 'bytes', 'seconds', 'mbPerSec', 'p99Ms'].every(
    (k) => typeof p[k] === 'number',
  );
}

/**
 * Spawns the worker with the job as its argument and resolves with what it printed on
 * stdout, plus the CPU this process used between the worker's phase marks (in cores).
 */
function runWorker(
  job: S3Job,
  limitS: number,
): Promise<{ output: unknown; server: Record<string, number> }> {
  const limitMs = limitS * 1000 + 60_000; // tsx start-up, set-up and wind-down
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', workerPath, JSON.stringify(job)], {
      cwd: root,
      stdio: ['ignore', 'pipe', 'pipe'],
      // The SDK warns on Node 20 that releases after January 2027 will need Node 22; the
      // notice would bury a real failure's message on stderr.
      env: { ...process.env, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
    });
    let stdout = '';
    let stderr = '';
    const server: Record<string, number> = {};
    const open = new Map<string, { cpu: NodeJS.CpuUsage; at: bigint }>();
    let pending = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s));
    child.stderr.setEncoding('utf8').on('data', (s: string) => {
      pending += s;
      let nl: number;
      while ((nl = pending.indexOf('\n')) >= 0) {
        const line = pending.slice(0, nl);
        pending = pending.slice(nl + 1);
        if (!line.startsWith(PHASE_MARK)) {
          stderr += `${line}\n`;
          continue;
        }
        const [edge, name] = line.slice(PHASE_MARK.length).split(' ');
        if (!name) continue;
        if (edge === 'start')
          open.set(name, { cpu: process.cpuUsage(), at: process.hrtime.bigint() });
        const began = open.get(name);
        if (edge === 'end' && began) {
          const cpu = process.cpuUsage(began.cpu);
          const wallUs = Number(process.hrtime.bigint() - began.at) / 1000;
          server[name] = (cpu.user + cpu.system) / wallUs;
        }
      }
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), limitMs);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      stderr += pending;
      if (code !== 0) {
        const why = signal ? `was killed by ${signal}` : `exited with ${code}`;
        reject(new Error(`${job.kind} worker ${why}:\n${stderr.trim()}`));
        return;
      }
      try {
        resolve({ output: JSON.parse(stdout) as unknown, server });
      } catch (err) {
        reject(new Error(`${job.kind} worker printed no result (${String(err)}):\n${stdout}`));
      }
    });
  });
}

/**
 * How busy the machine was over the last minute, for the notes: the load average and,
 * where Linux reports it, the share of time some task waited for a CPU (PSI, percent).
 * On a shared 2-core machine this moves the figures more than anything pier does.
 */
export async function machineBusy(): Promise<Record<string, number>> {
  const busy: Record<string, number> = { loadAverage1m: Math.round(os.loadavg()[0]! * 100) / 100 };
  const psi = await readFile('/proc/pressure/cpu', 'utf8').catch(() => '');
  const some = /^some avg10=[\d.]+ avg60=([\d.]+)/m.exec(psi);
  if (some) busy.cpuPressureSomeAvg60Pct = Number(some[1]);
  return busy;
}
