/**
 * The child process of the object benchmarks (see s3-load.ts): runs one job given as a
 * JSON argument and prints its result as one JSON line on stdout. Jobs drive either pier's
 * S3 gateway with the AWS SDK (as customers do: default settings, so CRC32 checksums and,
 * over plain http, a signed SHA-256 of every body) or plain file I/O on the same
 * filesystem, the raw-disk baseline. Around each measured phase it prints a mark on stderr
 * (`@@phase start|end NAME`) so that the parent can measure pier's CPU over that phase.
 *
 * Any error answer, short read or wrong ETag throws: the worker exits 1 with the reason on
 * stderr, and the benchmark fails. The SDK does not retry (maxAttempts 1), so no error is
 * hidden behind a successful retry.
 */
import {
  GetObjectCommand,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import http from 'node:http';
import { createCipheriv, createHash } from 'node:crypto';
import { open, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { createHistogram, type RecordableHistogram } from 'node:perf_hooks';
import { Readable } from 'node:stream';
import type { S3Target } from './s3-bucket.js';
import {
  PHASE_MARK,
  isThroughputJob,
  type PhaseResult,
  type S3Job,
  type SmallJob,
  type SmallWorkerResult,
  type ThroughputJob,
  type ThroughputWorkerResult,
} from './s3-load.js';

/** Reads move 1 MiB at a time, as pier's blob store reads them. */
const READ_CHUNK = 1024 * 1024;

/** `size` pseudo-random bytes, the same for the same seed (AES-256-CTR of zeros). */
function bodyOf(seed: string, size: number): Buffer {
  const key = createHash('sha256').update(seed).digest();
  const cipher = createCipheriv('aes-256-ctr', key, Buffer.alloc(16));
  return Buffer.concat([cipher.update(Buffer.alloc(size)), cipher.final()]);
}

function nowUs(): number {
  return Number(process.hrtime.bigint() / 1000n);
}

/** Reads and writes of whole objects by name: one side of a comparison. */
interface ObjectIo {
  /** Writes the body under `name`. */
  put(name: string): Promise<void>;
  /** Reads `name` to its end without keeping it; answers the bytes read. */
  get(name: string): Promise<number>;
  close(): void;
}

function diskIo(dir: string, body: Buffer, fsync: boolean): ObjectIo {
  return {
    async put(name) {
      const handle = await open(path.join(dir, name), 'w', 0o600);
      try {
        for (let at = 0; at < body.length;) {
          const { bytesWritten } = await handle.write(body, at, body.length - at);
          at += bytesWritten;
        }
        if (fsync) await handle.sync();
      } finally {
        await handle.close();
      }
    },
    async get(name) {
      const handle = await open(path.join(dir, name), 'r');
      const chunk = Buffer.allocUnsafe(READ_CHUNK);
      let bytes = 0;
      try {
        for (;;) {
          const { bytesRead } = await handle.read(chunk, 0, chunk.length, null);
          if (bytesRead === 0) return bytes;
          bytes += bytesRead;
        }
      } finally {
        await handle.close();
      }
    },
    close() {},
  };
}

/** An SDK client for the bucket; it does not retry, so no error hides behind a retry. */
function clientOf(target: S3Target): S3Client {
  return new S3Client({
    endpoint: target.endpoint,
    region: target.region,
    forcePathStyle: true,
    credentials: { accessKeyId: target.accessKeyId, secretAccessKey: target.secretAccessKey },
    maxAttempts: 1,
  });
}

function s3Io(target: S3Target, prefix: string, body: Buffer): ObjectIo {
  const client = clientOf(target);
  const etag = `"${createHash('md5').update(body).digest('hex')}"`;
  const Bucket = target.bucket;
  return {
    async put(name) {
      const out = await client.send(
        new PutObjectCommand({ Bucket, Key: prefix + name, Body: body }),
      );
      if (out.ETag !== etag) throw new Error(`PUT ${prefix}${name} answered ETag ${out.ETag}`);
    },
    async get(name) {
      const out = await client.send(new GetObjectCommand({ Bucket, Key: prefix + name }));
      if (out.ETag !== etag) throw new Error(`GET ${prefix}${name} answered ETag ${out.ETag}`);
      if (!(out.Body instanceof Readable)) throw new Error('GetObject answered no stream');
      let bytes = 0;
      for await (const chunk of out.Body as AsyncIterable<Uint8Array>) bytes += chunk.byteLength;
      return bytes;
    },
    close: () => client.destroy(),
  };
}

/** The bytes of an http answer, failing on any status but 200. */
function answer(
  res: http.IncomingMessage,
  what: string,
): Promise<{ bytes: number; etag?: string }> {
  return new Promise((resolve, reject) => {
    let bytes = 0;
    const chunks: Buffer[] = [];
    res.on('data', (c: Buffer) => {
      bytes += c.length;
      if (res.statusCode !== 200) chunks.push(c);
    });
    res.on('error', reject);
    res.on('end', () => {
      if (res.statusCode !== 200) {
        reject(new Error(`${what}: HTTP ${res.statusCode} ${Buffer.concat(chunks).toString()}`));
        return;
      }
      resolve({ bytes, etag: res.headers.etag });
    });
  });
}

/**
 * Plain node:http PUTs and GETs, as `curl` makes them: the body sent as it is, the answer
 * counted and dropped. `urlOf` names each request's URL; `etag`, when given, must be
 * answered by both.
 */
function plainHttpIo(
  urlOf: (method: 'PUT' | 'GET', name: string) => Promise<string>,
  body: Buffer,
  etag?: string,
): ObjectIo {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  const send = (method: 'PUT' | 'GET', url: string) =>
    new Promise<http.IncomingMessage>((resolve, reject) => {
      const headers = method === 'PUT' ? { 'content-length': body.length } : {};
      const req = http.request(url, { method, agent, headers });
      req.on('response', resolve).on('error', reject);
      req.end(method === 'PUT' ? body : undefined);
    });
  const call = async (method: 'PUT' | 'GET', name: string) => {
    const out = await answer(await send(method, await urlOf(method, name)), `${method} ${name}`);
    if (etag !== undefined && out.etag !== etag) {
      throw new Error(`${method} ${name} answered ETag ${out.etag}`);
    }
    return out.bytes;
  };
  return {
    put: async (name) => void (await call('PUT', name)),
    get: (name) => call('GET', name),
    close: () => agent.destroy(),
  };
}

/** Presigned URLs (signed here by the SDK's presigner) driven by plain node:http. */
function presignedIo(target: S3Target, prefix: string, body: Buffer): ObjectIo {
  const client = clientOf(target);
  const Bucket = target.bucket;
  const io = plainHttpIo(
    (method, name) => {
      const params = { Bucket, Key: prefix + name };
      const command =
        method === 'PUT' ? new PutObjectCommand(params) : new GetObjectCommand(params);
      return getSignedUrl(client, command);
    },
    body,
    `"${createHash('md5').update(body).digest('hex')}"`,
  );
  return {
    ...io,
    close: () => {
      io.close();
      client.destroy();
    },
  };
}

function ioOf(job: S3Job, body: Buffer): ObjectIo {
  if (job.kind.startsWith('disk-')) {
    if (!job.dir) throw new Error(`${job.kind} needs dir`);
    const fsync = job.kind === 'disk-small-write' || ('fsync' in job && job.fsync === true);
    return diskIo(job.dir, body, fsync);
  }
  if (job.kind === 'bare-http-throughput') {
    const base = job.url;
    if (!base) throw new Error(`${job.kind} needs url`);
    return plainHttpIo((_method, name) => Promise.resolve(base + name), body);
  }
  if (!job.target) throw new Error(`${job.kind} needs target`);
  if ('client' in job && job.client === 'presigned') {
    return presignedIo(job.target, job.prefix ?? '', body);
  }
  return s3Io(job.target, job.prefix ?? '', body);
}

/** Reads `name` and fails unless it is exactly `size` bytes. */
async function getChecked(io: ObjectIo, name: string, size: number): Promise<void> {
  const bytes = await io.get(name);
  if (bytes !== size) throw new Error(`read ${bytes} bytes of ${name}, expected ${size}`);
}

function phaseMark(edge: 'start' | 'end', name: string): void {
  process.stderr.write(`${PHASE_MARK}${edge} ${name}\n`);
}

/** Runs `fn` as the measured phase `name`; answers its wall time and the worker's CPU. */
async function measured<T>(
  name: string,
  fn: () => Promise<T>,
): Promise<{ value: T; seconds: number; cores: number }> {
  phaseMark('start', name);
  const cpu = process.cpuUsage();
  const started = nowUs();
  const value = await fn();
  const wallUs = nowUs() - started;
  const used = process.cpuUsage(cpu);
  phaseMark('end', name);
  return { value, seconds: wallUs / 1e6, cores: (used.user + used.system) / wallUs };
}

function range(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i);
}

/** `streams` loops over `perStream` objects each; `op` is timed per object. */
async function fixedRound(
  streams: number,
  perStream: number,
  latencyUs: RecordableHistogram,
  op: (stream: number, index: number) => Promise<void>,
): Promise<void> {
  await Promise.all(
    range(streams).map(async (s) => {
      for (let i = 0; i < perStream; i++) {
        const started = nowUs();
        await op(s, i);
        latencyUs.record(Math.max(1, nowUs() - started));
      }
    }),
  );
}

function phaseResult(
  objects: number,
  size: number,
  seconds: number,
  latencyUs: RecordableHistogram,
): PhaseResult {
  const bytes = objects * size;
  return {
    objects,
    bytes,
    seconds,
    mbPerSec: bytes / seconds / 1e6,
    objectsPerSec: objects / seconds,
    p50Ms: latencyUs.percentile(50) / 1000,
    p99Ms: latencyUs.percentile(99) / 1000,
  };
}

async function throughput(job: ThroughputJob): Promise<ThroughputWorkerResult> {
  const body = bodyOf(job.seed, job.size);
  const io = ioOf(job, body);
  try {
    // Warm-up, unmeasured: each stream writes objects until warmupS is over (at least one),
    // then reads them back. Its write rate calibrates perStream when it is not given.
    const warmEnd = Date.now() + job.warmupS * 1000;
    const written: number[] = range(job.streams).map(() => 0);
    const warmStarted = nowUs();
    await Promise.all(
      range(job.streams).map(async (s) => {
        do await io.put(`warm-${s}-${written[s]!++}`);
        while (Date.now() < warmEnd);
      }),
    );
    const warmSeconds = (nowUs() - warmStarted) / 1e6;
    await Promise.all(
      range(job.streams).map(async (s) => {
        for (let i = 0; i < written[s]!; i++) await getChecked(io, `warm-${s}-${i}`, job.size);
      }),
    );

    let perStream = job.perStream;
    if (perStream === undefined) {
      const rate = (written.reduce((a, b) => a + b, 0) * job.size) / warmSeconds;
      const roundBytes = job.streams * job.size;
      const wanted = Math.round(((job.targetS ?? 5) * rate) / roundBytes);
      const room = Math.floor((job.maxBytes ?? Infinity) / roundBytes);
      perStream = Math.max(1, Math.min(wanted, room));
    }
    const n = perStream;

    const putLatency = createHistogram();
    const put = await measured('put', () =>
      fixedRound(job.streams, n, putLatency, (s, i) => io.put(`obj-${s}-${i}`)),
    );
    const getLatency = createHistogram();
    const get = await measured('get', () =>
      fixedRound(job.streams, n, getLatency, (s, i) => getChecked(io, `obj-${s}-${i}`, job.size)),
    );
    const objects = job.streams * n;
    const result: ThroughputWorkerResult = {
      perStream: n,
      put: phaseResult(objects, job.size, put.seconds, putLatency),
      get: phaseResult(objects, job.size, get.seconds, getLatency),
      workerCores: { put: put.cores, get: get.cores },
    };
    if (job.kind === 'bare-http-throughput') {
      // The ceiling: the same GETs, answered from the bare server's memory.
      const memoryLatency = createHistogram();
      const memory = await measured('get-memory', () =>
        fixedRound(job.streams, n, memoryLatency, (s, i) =>
          getChecked(io, `obj-${s}-${i}?from=memory`, job.size),
        ),
      );
      result.getFromMemory = phaseResult(objects, job.size, memory.seconds, memoryLatency);
    }
    return result;
  } finally {
    io.close();
  }
}

/** `concurrency` loops calling `op` until `seconds` are over; answers the ops completed. */
async function timedLoops(
  concurrency: number,
  seconds: number,
  latencyUs: RecordableHistogram | undefined,
  op: (n: number) => Promise<void>,
): Promise<number> {
  const end = Date.now() + seconds * 1000;
  let next = 0;
  let done = 0;
  await Promise.all(
    range(concurrency).map(async () => {
      while (Date.now() < end) {
        const started = nowUs();
        await op(next++);
        latencyUs?.record(Math.max(1, nowUs() - started));
        done++;
      }
    }),
  );
  return done;
}

async function small(job: SmallJob): Promise<SmallWorkerResult> {
  const body = bodyOf(job.seed, job.size);
  const io = ioOf(job, body);
  try {
    let op: (n: number) => Promise<void>;
    let warmOp: ((n: number) => Promise<void>) | undefined;
    if (job.kind === 'disk-small-read') {
      const dir = job.dir!;
      await Promise.all(range(job.keys).map((i) => writeFile(path.join(dir, `small-${i}`), body)));
      op = async (n) => {
        const bytes = await readFile(path.join(dir, `small-${n % job.keys}`));
        if (bytes.length !== job.size) throw new Error(`readFile answered ${bytes.length} bytes`);
      };
    } else if (job.kind === 'disk-small-write') {
      // A new file per write: open, write, fsync, close (as the throughput baseline).
      op = (n) => io.put(`put-${n}`);
      warmOp = (n) => io.put(`put-warm-${n}`);
    } else if (job.kind === 's3-small-get') {
      await Promise.all(range(job.keys).map((i) => io.put(`get-${i}`)));
      op = (n) => getChecked(io, `get-${n % job.keys}`, job.size);
    } else {
      // Every PUT makes a new object (no overwrite, so no blob-deletion job per write).
      op = (n) => io.put(`put-${n}`);
      warmOp = (n) => io.put(`put-warm-${n}`);
    }
    if (job.warmupS > 0) await timedLoops(job.concurrency, job.warmupS, undefined, warmOp ?? op);
    const latencyUs = createHistogram();
    const run = await measured('run', () =>
      timedLoops(job.concurrency, job.durationS, latencyUs, op),
    );
    return {
      ops: run.value,
      seconds: run.seconds,
      opsPerSec: run.value / run.seconds,
      p50Ms: latencyUs.percentile(50) / 1000,
      p99Ms: latencyUs.percentile(99) / 1000,
      workerCores: run.cores,
    };
  } finally {
    io.close();
  }
}

function describe(err: unknown): string {
  if (err instanceof S3ServiceException) {
    const status = err.$metadata.httpStatusCode ?? 'no status';
    return `S3 error answer: HTTP ${status} ${err.name}: ${err.message}`;
  }
  return err instanceof Error ? (err.stack ?? err.message) : String(err);
}

const arg = process.argv[2];
if (!arg) throw new Error('usage: s3-worker.ts <S3Job as JSON>');
const job = JSON.parse(arg) as S3Job;
try {
  const result = isThroughputJob(job) ? await throughput(job) : await small(job);
  process.stdout.write(`${JSON.stringify(result)}\n`);
} catch (err) {
  // At once: the other streams would go on for the rest of the phase. (Writes to a pipe are
  // synchronous on Linux, so the message is out before the exit.)
  process.stderr.write(`${job.kind} failed: ${describe(err)}\n`);
  process.exit(1);
}
