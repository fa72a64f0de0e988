/**
 * End to end with the real AWS SDK client over HTTP: a throwaway server authenticates every
 * request with verifyRequest and reads bodies through createBodyVerifier, so the SDK's own
 * wire format (request line encoding, aws-chunked bodies, checksum trailers) is what is tested.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  GetObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SigV4Error } from './errors.js';
import { createBodyVerifier } from './payload.js';
import { decodePath, parseQuery } from './uri.js';
import { verifyRequest } from './verify.js';

const credentials = { accessKeyId: 'AKIDSDK', secretAccessKey: 'sdk/secret+1' };
const objects = new Map<string, Buffer>();
const seen: Array<{
  method: string;
  path: string;
  query: Array<[string, string]>;
  payload: string;
}> = [];
let server: Server;
let endpoint: string;

async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  const rawPath = q < 0 ? url : url.slice(0, q);
  const query = q < 0 ? '' : url.slice(q + 1);
  try {
    const auth = await verifyRequest(
      { method: req.method ?? 'GET', rawPath, query, headers: req.headers },
      async (id) => (id === credentials.accessKeyId ? credentials.secretAccessKey : undefined),
      { now: new Date(), region: 'us-east-1' },
    );
    const path = decodePath(rawPath);
    seen.push({
      method: req.method ?? '',
      path,
      query: parseQuery(query),
      payload: auth.payload.kind,
    });
    if (req.method === 'PUT') {
      const parts: Buffer[] = [];
      await pipeline(
        req,
        createBodyVerifier(auth, req.headers),
        new Writable({
          write(chunk: Buffer, _e, cb) {
            parts.push(chunk);
            cb();
          },
        }),
      );
      objects.set(path, Buffer.concat(parts));
      res.writeHead(200, { etag: '"e"' }).end();
    } else if (req.method === 'GET' && parseQuery(query).some(([k]) => k === 'list-type')) {
      res
        .writeHead(200, { 'content-type': 'application/xml' })
        .end(
          '<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name><KeyCount>0</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>false</IsTruncated></ListBucketResult>',
        );
    } else {
      const body = objects.get(path);
      if (!body) res.writeHead(404).end();
      else res.writeHead(200, { 'content-length': body.length }).end(body);
    }
  } catch (err) {
    req.resume();
    const e = err instanceof SigV4Error ? err : new SigV4Error('InvalidRequest', String(err));
    res
      .writeHead(e.status, { 'content-type': 'application/xml' })
      .end(
        `<?xml version="1.0" encoding="UTF-8"?><Error><Code>${e.code}</Code><Message>${e.message}</Message></Error>`,
      );
  }
}

beforeAll(async () => {
  server = createServer((req, res) => void handle(req, res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}/s3`;
});
afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
});

function client(secretAccessKey = credentials.secretAccessKey): S3Client {
  return new S3Client({
    endpoint,
    forcePathStyle: true,
    region: 'us-east-1',
    credentials: { ...credentials, secretAccessKey },
  });
}

describe('the AWS SDK for JavaScript against verifyRequest', () => {
  const keys = ['plain.txt', 'dir/a b.txt', 'ünï/cødé.txt', 'x+y~z%w=v&u.bin', "it's (1)!*.txt"];

  for (const key of keys) {
    it(`puts and gets ${JSON.stringify(key)}`, async () => {
      const s3 = client();
      const body = Buffer.from(`content of ${key}`);
      await s3.send(new PutObjectCommand({ Bucket: 'b', Key: key, Body: body }));
      expect(objects.get(`/s3/b/${key}`)?.equals(body)).toBe(true);
      // Over plain HTTP the SDK signs the SHA-256 of the body, which the verifier then checks.
      expect(seen.at(-1)?.payload).toBe('sha256');
      const got = await s3.send(new GetObjectCommand({ Bucket: 'b', Key: key }));
      expect(Buffer.from(await got.Body!.transformToByteArray()).equals(body)).toBe(true);
    });
  }

  it('streams an aws-chunked upload with a checksum trailer', async () => {
    const data = Buffer.alloc(3 * 1024 * 1024 + 123);
    for (let i = 0; i < data.length; i++) data[i] = (i * 31) & 0xff;
    const pieces = [];
    for (let i = 0; i < data.length; i += 65536) pieces.push(data.subarray(i, i + 65536));
    await client().send(
      new PutObjectCommand({
        Bucket: 'b',
        Key: 'streamed.bin',
        Body: Readable.from(pieces),
        ContentLength: data.length,
      }),
    );
    expect(seen.at(-1)?.payload).toBe('streaming-unsigned-trailer');
    expect(objects.get('/s3/b/streamed.bin')?.equals(data)).toBe(true);
  });

  it('lists with a prefix needing encoding', async () => {
    await client().send(
      new ListObjectsV2Command({ Bucket: 'b', Prefix: 'a b/ü+', Delimiter: '/' }),
    );
    const last = seen.at(-1)!;
    // Bucket-level requests come with a trailing slash.
    expect(last.path).toBe('/s3/b/');
    expect(last.query).toEqual(
      expect.arrayContaining([
        ['prefix', 'a b/ü+'],
        ['delimiter', '/'],
      ]),
    );
  });

  it('surfaces SignatureDoesNotMatch for a wrong secret', async () => {
    await expect(
      client('wrong').send(new GetObjectCommand({ Bucket: 'b', Key: 'plain.txt' })),
    ).rejects.toMatchObject({ name: 'SignatureDoesNotMatch' });
  });
});
