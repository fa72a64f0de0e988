/**
 * Shared pieces of the bucket tests: buckets and credentials through the API, an S3 client
 * from the AWS SDK, S3 XML errors, a raw SigV4 signer and streaming byte generators.
 */
import { createHash, createHmac, type Hash, type Hmac } from 'node:crypto';
import http from 'node:http';
import { Readable } from 'node:stream';
import { S3Client, S3ServiceException } from '@aws-sdk/client-s3';
import { SignatureV4 } from '@smithy/signature-v4';
import { expect } from 'vitest';
import type { TestOrg, TestPlatform } from '../helpers/platform.js';

export interface Credentials {
  accessKeyId: string;
  secretAccessKey: string;
  endpoint: string;
  region: string;
  bucket: string;
}

export async function createBucket(tp: TestPlatform, org: TestOrg, name: string): Promise<void> {
  const res = await tp.request('POST', '/v1/buckets', { token: org.token, body: { name } });
  if (res.status !== 201)
    throw new Error(`bucket create failed: ${res.status} ${JSON.stringify(res.body)}`);
}

/** Person credentials of a bucket through `POST /v1/buckets/:name/credentials`. */
export async function credentialsFor(
  tp: TestPlatform,
  org: TestOrg,
  bucket: string,
): Promise<Credentials> {
  const res = await tp.request('POST', `/v1/buckets/${bucket}/credentials`, { token: org.token });
  if (res.status !== 201)
    throw new Error(`credentials failed: ${res.status} ${JSON.stringify(res.body)}`);
  return { ...res.body, bucket };
}

export function s3Client(
  c: Pick<Credentials, 'accessKeyId' | 'secretAccessKey' | 'endpoint' | 'region'>,
  extra: Partial<ConstructorParameters<typeof S3Client>[0]> = {},
): S3Client {
  return new S3Client({
    endpoint: c.endpoint,
    region: c.region,
    forcePathStyle: true,
    credentials: { accessKeyId: c.accessKeyId, secretAccessKey: c.secretAccessKey },
    maxAttempts: 1,
    ...extra,
  });
}

/** The S3 error code and status an SDK call failed with (fails the test if it succeeded). */
export async function sdkError(
  p: Promise<unknown>,
): Promise<{ code: string; status: number | undefined; err: S3ServiceException }> {
  try {
    await p;
  } catch (err) {
    if (err instanceof S3ServiceException)
      return { code: err.name, status: err.$metadata.httpStatusCode, err };
    throw err;
  }
  throw new Error('expected the S3 call to fail, it succeeded');
}

export interface S3ErrorBody {
  status: number;
  code: string | undefined;
  message: string | undefined;
  text: string;
  headers: Headers;
}

/** A fetch answer read as an S3 XML error. */
export async function s3ErrorOf(res: Response): Promise<S3ErrorBody> {
  const text = await res.text();
  return {
    status: res.status,
    code: /<Code>([^<]*)<\/Code>/.exec(text)?.[1],
    message: /<Message>([^<]*)<\/Message>/.exec(text)?.[1],
    text,
    headers: res.headers,
  };
}

export async function expectS3Error(
  res: Response | Promise<Response>,
  status: number,
  code: string,
): Promise<S3ErrorBody> {
  const e = await s3ErrorOf(await res);
  expect({ status: e.status, code: e.code }, e.text).toEqual({ status, code });
  expect(e.headers.get('content-type')).toContain('application/xml');
  expect(e.text).toMatch(/^<\?xml version="1.0" encoding="UTF-8"\?>\n<Error>/);
  return e;
}

/** What the SDK's hash interface passes in (smithy's `SourceData`). */
type SourceData = string | ArrayBuffer | ArrayBufferView;

function bytes(d: SourceData): string | Buffer {
  if (typeof d === 'string') return d;
  if (ArrayBuffer.isView(d)) return Buffer.from(d.buffer, d.byteOffset, d.byteLength);
  return Buffer.from(d);
}

/** SHA-256 and HMAC-SHA256 in the shape `@smithy/signature-v4` wants, from node:crypto. */
class NodeSha256 {
  private h: Hash | Hmac;
  constructor(private readonly secret?: SourceData) {
    this.h = this.fresh();
  }
  private fresh(): Hash | Hmac {
    return this.secret ? createHmac('sha256', bytes(this.secret)) : createHash('sha256');
  }
  update(data: SourceData): void {
    this.h.update(bytes(data));
  }
  digest(): Promise<Uint8Array> {
    return Promise.resolve(new Uint8Array(this.h.digest()));
  }
  reset(): void {
    this.h = this.fresh();
  }
}

export interface RawSignedRequest {
  method: string;
  /** The path after the endpoint, already encoded: `/bucket/key`. */
  path: string;
  /** Another spelling of `path` to send (same canonical form, e.g. `%2e` for `.`). */
  sendPath?: string;
  query?: Record<string, string>;
  headers?: Record<string, string>;
  body?: string | Buffer;
  /** The x-amz-content-sha256 to sign; the body's real hash when unset. */
  payloadHash?: string;
  signingDate?: Date;
  /** Changes the signed headers before sending (to tamper with or drop one). */
  mutate?: (headers: Record<string, string>) => void;
}

/**
 * Signs a request with `@smithy/signature-v4` (the SDK's own signer, driven directly) and
 * sends it with node:http, exactly as given: for what the SDK would not let a test do.
 */
export async function signedFetch(c: Credentials, r: RawSignedRequest): Promise<Response> {
  const url = new URL(c.endpoint);
  const body = r.body === undefined ? undefined : Buffer.from(r.body);
  const signer = new SignatureV4({
    credentials: { accessKeyId: c.accessKeyId, secretAccessKey: c.secretAccessKey },
    region: c.region,
    service: 's3',
    sha256: NodeSha256,
    uriEscapePath: false,
    applyChecksum: false,
  });
  const payloadHash =
    r.payloadHash ??
    createHash('sha256')
      .update(body ?? '')
      .digest('hex');
  const headers: Record<string, string> = {
    host: url.host,
    'x-amz-content-sha256': payloadHash,
    ...r.headers,
  };
  if (body !== undefined) headers['content-length'] = String(body.length);
  const signed = await signer.sign(
    {
      method: r.method,
      protocol: url.protocol,
      hostname: url.hostname,
      port: Number(url.port),
      path: `${url.pathname}${r.path}`,
      query: r.query ?? {},
      headers,
      body,
    },
    { signingDate: r.signingDate },
  );
  const qs = new URLSearchParams(r.query ?? {}).toString();
  const sent = { ...signed.headers };
  delete sent.host;
  r.mutate?.(sent);
  return rawRequest(`${url.origin}${url.pathname}${r.sendPath ?? r.path}${qs ? `?${qs}` : ''}`, {
    method: r.method,
    headers: sent,
    body,
  });
}

/**
 * A request sent with node:http, the path exactly as given: fetch would resolve `..` and
 * `.` segments before sending, which the path traversal tests must not have done for them.
 */
export function rawRequest(
  target: string,
  opts: { method?: string; headers?: Record<string, string>; body?: Buffer | string } = {},
): Promise<Response> {
  const u = new URL(target);
  // URL resolves dot segments too: take the path from the string itself.
  const pathAndQuery = target.slice(u.origin.length);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: u.hostname,
        port: u.port,
        method: opts.method ?? 'GET',
        path: pathAndQuery,
        headers: opts.headers,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const headers = new Headers();
          for (const [k, v] of Object.entries(res.headers)) {
            if (Array.isArray(v)) for (const x of v) headers.append(k, x);
            else if (v !== undefined) headers.set(k, v);
          }
          const status = res.statusCode ?? 0;
          const empty = status === 204 || status === 304 || opts.method === 'HEAD';
          resolve(new Response(empty ? null : Buffer.concat(chunks), { status, headers }));
        });
      },
    );
    req.on('error', reject);
    req.end(opts.body);
  });
}

/** Deterministic pseudo-random bytes, `size` in all, produced in `chunk`-sized pieces. */
export function* patternChunks(size: number, chunk = 1024 * 1024, seed = 1): Generator<Buffer> {
  const block = Buffer.alloc(chunk);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < block.length; i += 4) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    block.writeUInt32LE(x >>> 0, i);
  }
  let left = size;
  let n = 0;
  while (left > 0) {
    const len = Math.min(left, chunk);
    // Vary every chunk a little so a misplaced chunk changes the digest.
    const out = Buffer.from(block.subarray(0, len));
    out.writeUInt32LE(n++ >>> 0, 0);
    left -= len;
    yield out;
  }
}

export function patternStream(size: number, seed = 1): Readable {
  return Readable.from(patternChunks(size, 1024 * 1024, seed), { objectMode: false });
}

export function md5Of(size: number, seed = 1): string {
  const h = createHash('md5');
  for (const c of patternChunks(size, 1024 * 1024, seed)) h.update(c);
  return h.digest('hex');
}

/** MD5 and length of a stream, computed as it flows (never held in memory). */
export async function md5OfStream(
  stream: AsyncIterable<Uint8Array>,
): Promise<{ md5: string; size: number }> {
  const h = createHash('md5');
  let size = 0;
  for await (const chunk of stream) {
    h.update(chunk);
    size += chunk.length;
  }
  return { md5: h.digest('hex'), size };
}

export function b64md5(data: string | Buffer): string {
  return createHash('md5').update(data).digest('base64');
}

/** Runs `fn` over `items` with at most `n` at a time. */
export async function pool<T>(items: T[], n: number, fn: (item: T) => Promise<void>) {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(n, items.length) }, async () => {
      while (next < items.length) await fn(items[next++]!);
    }),
  );
}
