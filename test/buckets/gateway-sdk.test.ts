/**
 * The S3 gateway driven by the AWS SDK for JavaScript v3 and its own signer: objects,
 * ranges, listings, multipart and S3's XML errors.
 */
import { createHash } from 'node:crypto';
import { Readable, Transform } from 'node:stream';
import zlib from 'node:zlib';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListBucketsCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  ListPartsCommand,
  PutObjectCommand,
  UploadPartCommand,
  UploadPartCopyCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestOrg, type TestPlatform } from '../helpers/platform.js';
import {
  b64md5,
  createBucket,
  credentialsFor,
  expectS3Error,
  md5Of,
  md5OfStream,
  patternStream,
  pool,
  s3Client,
  sdkError,
  signedFetch,
  type Credentials,
} from './helpers.js';

let tp: TestPlatform;
let org: TestOrg;
let cred: Credentials;
let s3: S3Client;
const BUCKET = 'sdk-bucket';

beforeAll(async () => {
  tp = await startTestPlatform();
  org = await tp.createOrg();
  await createBucket(tp, org, BUCKET);
  cred = await credentialsFor(tp, org, BUCKET);
  s3 = s3Client(cred);
});
afterAll(async () => {
  s3?.destroy();
  await tp?.close();
});

const MiB = 1024 * 1024;

async function text(key: string, range?: string) {
  const got = await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: key, Range: range }));
  return { got, body: await got.Body!.transformToString() };
}

describe('objects with the AWS SDK', () => {
  it('puts, gets, heads and deletes an object with its metadata', async () => {
    const put = await s3.send(
      new PutObjectCommand({
        Bucket: BUCKET,
        Key: 'docs/hello world.txt',
        Body: 'hello world',
        ContentType: 'text/plain',
        Metadata: { owner: 'alice' },
      }),
    );
    expect(put.ETag).toBe('"5eb63bbbe01eeed093cb22bb8f5acdc3"');
    const { got, body } = await text('docs/hello world.txt');
    expect(body).toBe('hello world');
    expect(got.ContentType).toBe('text/plain');
    expect(got.ContentLength).toBe(11);
    expect(got.ETag).toBe(put.ETag);
    expect(got.Metadata).toEqual({ owner: 'alice' });
    const head = await s3.send(
      new HeadObjectCommand({ Bucket: BUCKET, Key: 'docs/hello world.txt' }),
    );
    expect(head.ContentLength).toBe(11);
    expect(head.ETag).toBe(put.ETag);
    expect(head.LastModified).toBeInstanceOf(Date);
    await s3.send(new DeleteObjectCommand({ Bucket: BUCKET, Key: 'docs/hello world.txt' }));
    const missing = await sdkError(
      s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: 'docs/hello world.txt' })),
    );
    expect(missing).toMatchObject({ code: 'NoSuchKey', status: 404 });
    const missingHead = await sdkError(
      s3.send(new HeadObjectCommand({ Bucket: BUCKET, Key: 'docs/hello world.txt' })),
    );
    expect(missingHead.status).toBe(404);
    // Deleting what is not there is a success, as in S3.
    await s3.send(new DeleteObjectCommand({ Bucket: BUCKET, Key: 'docs/hello world.txt' }));
  });

  it('answers NoSuchKey as an S3 XML error with Code, Message, Resource and RequestId', async () => {
    const res = await signedFetch(cred, { method: 'GET', path: `/${BUCKET}/nope.txt` });
    const e = await expectS3Error(res, 404, 'NoSuchKey');
    expect(e.text).toContain('<Message>The specified key does not exist.</Message>');
    expect(e.text).toContain(`<Resource>/${BUCKET}/nope.txt</Resource>`);
    expect(e.text).toMatch(/<RequestId>[^<]+<\/RequestId>/);
    expect(e.headers.get('x-amz-request-id')).toBeTruthy();
  });

  it('stores a zero-byte object', async () => {
    const put = await s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: 'empty', Body: '' }));
    expect(put.ETag).toBe('"d41d8cd98f00b204e9800998ecf8427e"');
    const { got, body } = await text('empty');
    expect(body).toBe('');
    expect(got.ContentLength).toBe(0);
    const head = await s3.send(new HeadObjectCommand({ Bucket: BUCKET, Key: 'empty' }));
    expect(head.ContentLength).toBe(0);
    const list = await s3.send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: 'empty' }));
    expect(list.Contents?.map((o) => [o.Key, o.Size])).toEqual([['empty', 0]]);
    // A range of an empty object cannot be satisfied.
    const range = await signedFetch(cred, {
      method: 'GET',
      path: `/${BUCKET}/empty`,
      headers: { range: 'bytes=0-0' },
    });
    expect(range.status).not.toBe(206);
    await range.arrayBuffer();
  });

  it('streams a PutObject body with Content-MD5 and checks it', async () => {
    const data = Buffer.alloc(3 * MiB + 17, 'abc');
    const put = await s3.send(
      new PutObjectCommand({
        Bucket: BUCKET,
        Key: 'md5/good',
        Body: Readable.from([data.subarray(0, MiB), data.subarray(MiB)]),
        ContentLength: data.length,
        ContentMD5: b64md5(data),
      }),
    );
    expect(put.ETag).toBe(`"${createHash('md5').update(data).digest('hex')}"`);
    const got = await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: 'md5/good' }));
    expect(await md5OfStream(got.Body as Readable)).toEqual({
      md5: createHash('md5').update(data).digest('hex'),
      size: data.length,
    });
  });

  it('refuses a wrong Content-MD5 with BadDigest and keeps the old object', async () => {
    await s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: 'md5/bad', Body: 'original' }));
    const e = await sdkError(
      s3.send(
        new PutObjectCommand({
          Bucket: BUCKET,
          Key: 'md5/bad',
          Body: 'replacement',
          ContentMD5: b64md5('something else'),
        }),
      ),
    );
    expect(e).toMatchObject({ code: 'BadDigest', status: 400 });
    expect((await text('md5/bad')).body).toBe('original');
    // The same through the raw signer, to see S3's XML body.
    const res = await signedFetch(cred, {
      method: 'PUT',
      path: `/${BUCKET}/md5/bad`,
      body: 'replacement',
      headers: { 'content-md5': b64md5('nope') },
    });
    await expectS3Error(res, 400, 'BadDigest');
    expect((await text('md5/bad')).body).toBe('original');
  });

  it('refuses a body that does not match the signed x-amz-content-sha256', async () => {
    const claimed = createHash('sha256').update('what was signed').digest('hex');
    const res = await signedFetch(cred, {
      method: 'PUT',
      path: `/${BUCKET}/sha/bad`,
      body: 'what was sent',
      payloadHash: claimed,
    });
    await expectS3Error(res, 400, 'XAmzContentSHA256Mismatch');
    const e = await sdkError(s3.send(new HeadObjectCommand({ Bucket: BUCKET, Key: 'sha/bad' })));
    expect(e.status).toBe(404);
    // The right hash passes.
    const ok = await signedFetch(cred, {
      method: 'PUT',
      path: `/${BUCKET}/sha/good`,
      body: 'what was sent',
    });
    expect(ok.status).toBe(200);
    expect((await text('sha/good')).body).toBe('what was sent');
  });

  it('names the failed check of a large body, not IncompleteBody', async () => {
    // Big enough that the body is still streaming when the check fails.
    const data = Buffer.alloc(8 * MiB, 'q');
    const wrongSha = await signedFetch(cred, {
      method: 'PUT',
      path: `/${BUCKET}/big/sha`,
      body: data,
      payloadHash: createHash('sha256').update('other').digest('hex'),
    });
    await expectS3Error(wrongSha, 400, 'XAmzContentSHA256Mismatch');
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(zlib.crc32('other'));
    const wrongCrc = await signedFetch(cred, {
      method: 'PUT',
      path: `/${BUCKET}/big/crc`,
      body: data,
      headers: { 'x-amz-checksum-crc32': crc.toString('base64') },
    });
    await expectS3Error(wrongCrc, 400, 'BadDigest');
    const wrongMd5 = await signedFetch(cred, {
      method: 'PUT',
      path: `/${BUCKET}/big/md5`,
      body: data,
      headers: { 'content-md5': b64md5('other') },
    });
    await expectS3Error(wrongMd5, 400, 'BadDigest');
    const listed = await s3.send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: 'big/' }));
    expect(listed.Contents ?? []).toEqual([]);
    // A right CRC32 passes and is echoed back.
    crc.writeUInt32BE(zlib.crc32(data));
    const ok = await signedFetch(cred, {
      method: 'PUT',
      path: `/${BUCKET}/big/crc`,
      body: data,
      headers: { 'x-amz-checksum-crc32': crc.toString('base64') },
    });
    expect(ok.status).toBe(200);
    expect(ok.headers.get('x-amz-checksum-crc32')).toBe(crc.toString('base64'));
  });

  it('refuses a streamed body altered in flight after the SDK signed it (BadDigest)', async () => {
    const tampered = s3Client(cred);
    // The last step before the wire: flip one byte of what the SDK encoded and signed.
    tampered.middlewareStack.add(
      (next) => async (args) => {
        const request = args.request as { body?: unknown };
        if (request.body instanceof Readable) {
          let seen = 0;
          request.body = request.body.pipe(
            new Transform({
              transform(chunk: Buffer, _enc, done) {
                const at = 3 * MiB - seen;
                if (at >= 0 && at < chunk.length) {
                  chunk = Buffer.from(chunk);
                  chunk[at] = chunk[at]! ^ 0xff;
                }
                seen += chunk.length;
                done(null, chunk);
              },
            }),
          );
        }
        return next(args);
      },
      { step: 'deserialize', priority: 'low' },
    );
    const size = 6 * MiB;
    const e = await sdkError(
      tampered.send(
        new PutObjectCommand({
          Bucket: BUCKET,
          Key: 'flight/tampered',
          Body: patternStream(size, 3),
          ContentLength: size,
        }),
      ),
    );
    expect(e).toMatchObject({ code: 'BadDigest', status: 400 });
    expect(
      (await s3.send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: 'flight/' }))).KeyCount,
    ).toBe(0);
    tampered.destroy();
  });

  it('copies an object within the bucket', async () => {
    await s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: 'copy/src', Body: 'copied bytes' }));
    const res = await s3.send(
      new CopyObjectCommand({ Bucket: BUCKET, Key: 'copy/dst', CopySource: `${BUCKET}/copy/src` }),
    );
    expect(res.CopyObjectResult?.ETag).toBe(
      `"${createHash('md5').update('copied bytes').digest('hex')}"`,
    );
    expect((await text('copy/dst')).body).toBe('copied bytes');
  });
});

describe('ranges', () => {
  const body = '0123456789abcdefghij';
  beforeAll(async () => {
    await s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: 'range.txt', Body: body }));
  });

  it('answers 206 with Content-Range for bytes=a-b, a- and -n', async () => {
    const a = await text('range.txt', 'bytes=2-5');
    expect(a.body).toBe('2345');
    expect(a.got.ContentRange).toBe('bytes 2-5/20');
    expect(a.got.ContentLength).toBe(4);
    expect(a.got.$metadata.httpStatusCode).toBe(206);
    const b = await text('range.txt', 'bytes=15-');
    expect(b.body).toBe('fghij');
    expect(b.got.ContentRange).toBe('bytes 15-19/20');
    const c = await text('range.txt', 'bytes=-3');
    expect(c.body).toBe('hij');
    expect(c.got.ContentRange).toBe('bytes 17-19/20');
    // An end past the object is cut at its last byte.
    const d = await text('range.txt', 'bytes=18-1000');
    expect(d.body).toBe('ij');
    expect(d.got.ContentRange).toBe('bytes 18-19/20');
  });

  it('answers an unsatisfiable range with 416 InvalidRange', async () => {
    const e = await sdkError(
      s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: 'range.txt', Range: 'bytes=20-30' })),
    );
    expect(e).toMatchObject({ code: 'InvalidRange', status: 416 });
    const res = await signedFetch(cred, {
      method: 'GET',
      path: `/${BUCKET}/range.txt`,
      headers: { range: 'bytes=100-' },
    });
    const x = await expectS3Error(res, 416, 'InvalidRange');
    expect(x.text).toContain('<ActualObjectSize>20</ActualObjectSize>');
  });
});

describe('DeleteObjects', () => {
  it('deletes several keys at once, existing or not', async () => {
    for (const k of ['del/a', 'del/b', 'del/c'])
      await s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: k, Body: k }));
    const res = await s3.send(
      new DeleteObjectsCommand({
        Bucket: BUCKET,
        Delete: { Objects: [{ Key: 'del/a' }, { Key: 'del/c' }, { Key: 'del/never' }] },
      }),
    );
    expect(res.Deleted?.map((d) => d.Key).sort()).toEqual(['del/a', 'del/c', 'del/never']);
    expect(res.Errors ?? []).toEqual([]);
    const left = await s3.send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: 'del/' }));
    expect(left.Contents?.map((o) => o.Key)).toEqual(['del/b']);
  });
});

describe('ListObjectsV2', () => {
  const N = 1200;
  beforeAll(async () => {
    const keys = Array.from({ length: N }, (_, i) => `many/${String(i).padStart(5, '0')}`);
    await pool(keys, 32, async (k) => {
      await s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: k, Body: 'x' }));
    });
    for (const k of ['tree/a.txt', 'tree/dir1/x', 'tree/dir1/y', 'tree/dir2/z', 'tree/b.txt'])
      await s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: k, Body: k }));
  }, 60_000);

  it('paginates 1200 keys with MaxKeys 500 and a continuation token, every key once', async () => {
    const seen: string[] = [];
    let token: string | undefined;
    let pages = 0;
    do {
      const page = await s3.send(
        new ListObjectsV2Command({
          Bucket: BUCKET,
          Prefix: 'many/',
          MaxKeys: 500,
          ContinuationToken: token,
        }),
      );
      pages++;
      seen.push(...(page.Contents ?? []).map((o) => o.Key!));
      expect(page.KeyCount).toBe(page.Contents?.length);
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
      if (page.IsTruncated) expect(token).toBeTruthy();
    } while (token);
    expect(pages).toBe(3);
    expect(seen).toHaveLength(N);
    expect(new Set(seen).size).toBe(N);
    expect(seen).toEqual([...seen].sort());
  });

  it('lists with a prefix and a delimiter as S3 does', async () => {
    const res = await s3.send(
      new ListObjectsV2Command({ Bucket: BUCKET, Prefix: 'tree/', Delimiter: '/' }),
    );
    expect(res.Contents?.map((o) => o.Key)).toEqual(['tree/a.txt', 'tree/b.txt']);
    expect(res.CommonPrefixes?.map((p) => p.Prefix)).toEqual(['tree/dir1/', 'tree/dir2/']);
    expect(res.KeyCount).toBe(4);
    expect(res.Delimiter).toBe('/');
    const top = await s3.send(new ListObjectsV2Command({ Bucket: BUCKET, Delimiter: '/' }));
    expect(top.CommonPrefixes?.map((p) => p.Prefix)).toEqual(
      expect.arrayContaining(['many/', 'tree/']),
    );
    expect(top.Contents?.some((o) => o.Key!.includes('/'))).toBe(false);
  });

  it('counts a common prefix once toward MaxKeys and continues after it', async () => {
    const first = await s3.send(
      new ListObjectsV2Command({ Bucket: BUCKET, Prefix: 'tree/', Delimiter: '/', MaxKeys: 2 }),
    );
    expect([
      ...(first.Contents ?? []).map((o) => o.Key),
      ...(first.CommonPrefixes ?? []).map((p) => p.Prefix),
    ]).toEqual(['tree/a.txt', 'tree/b.txt']);
    expect(first.IsTruncated).toBe(true);
    const second = await s3.send(
      new ListObjectsV2Command({
        Bucket: BUCKET,
        Prefix: 'tree/',
        Delimiter: '/',
        MaxKeys: 2,
        ContinuationToken: first.NextContinuationToken,
      }),
    );
    expect(second.CommonPrefixes?.map((p) => p.Prefix)).toEqual(['tree/dir1/', 'tree/dir2/']);
    expect(second.IsTruncated).toBe(false);
  });

  it('continues after a common prefix without listing it again', async () => {
    const seen: string[] = [];
    let token: string | undefined;
    for (let page = 0; page < 10; page++) {
      const res = await s3.send(
        new ListObjectsV2Command({
          Bucket: BUCKET,
          Prefix: 'tree/',
          Delimiter: '/',
          MaxKeys: 1,
          ContinuationToken: token,
        }),
      );
      seen.push(
        ...(res.Contents ?? []).map((o) => o.Key!),
        ...(res.CommonPrefixes ?? []).map((p) => p.Prefix!),
      );
      token = res.IsTruncated ? res.NextContinuationToken : undefined;
      if (!token) break;
    }
    expect(seen).toEqual(['tree/a.txt', 'tree/b.txt', 'tree/dir1/', 'tree/dir2/']);
    // The JSON listing and StartAfter agree.
    const after = await s3.send(
      new ListObjectsV2Command({ Bucket: BUCKET, Prefix: 'tree/', StartAfter: 'tree/dir1/x' }),
    );
    expect(after.Contents?.map((o) => o.Key)).toEqual(['tree/dir1/y', 'tree/dir2/z']);
  });

  it('refuses a forged continuation token', async () => {
    const e = await sdkError(
      s3.send(new ListObjectsV2Command({ Bucket: BUCKET, ContinuationToken: '!!not-a-token' })),
    );
    expect(e).toMatchObject({ code: 'InvalidArgument', status: 400 });
  });

  it('lists only its own bucket in ListBuckets and answers HeadBucket', async () => {
    const res = await s3.send(new ListBucketsCommand({}));
    expect(res.Buckets?.map((b) => b.Name)).toEqual([BUCKET]);
    const head = await s3.send(new HeadBucketCommand({ Bucket: BUCKET }));
    expect(head.$metadata.httpStatusCode).toBe(200);
  });
});

describe('multipart upload', () => {
  it('creates, uploads parts, lists parts and completes with the S3 multipart ETag', async () => {
    const key = 'mp/whole.bin';
    const part1 = Buffer.alloc(5 * MiB, 1);
    const part2 = Buffer.alloc(1234, 2);
    const { UploadId } = await s3.send(
      new CreateMultipartUploadCommand({ Bucket: BUCKET, Key: key, ContentType: 'app/x-test' }),
    );
    expect(UploadId).toBeTruthy();
    const p1 = await s3.send(
      new UploadPartCommand({ Bucket: BUCKET, Key: key, UploadId, PartNumber: 1, Body: part1 }),
    );
    const p2 = await s3.send(
      new UploadPartCommand({ Bucket: BUCKET, Key: key, UploadId, PartNumber: 2, Body: part2 }),
    );
    const md5 = (b: Buffer) => createHash('md5').update(b).digest();
    expect(p1.ETag).toBe(`"${md5(part1).toString('hex')}"`);
    const listed = await s3.send(new ListPartsCommand({ Bucket: BUCKET, Key: key, UploadId }));
    expect(listed.Parts?.map((p) => [p.PartNumber, p.Size, p.ETag])).toEqual([
      [1, part1.length, p1.ETag],
      [2, part2.length, p2.ETag],
    ]);
    const uploads = await s3.send(new ListMultipartUploadsCommand({ Bucket: BUCKET }));
    expect(uploads.Uploads?.map((u) => u.UploadId)).toContain(UploadId);
    const done = await s3.send(
      new CompleteMultipartUploadCommand({
        Bucket: BUCKET,
        Key: key,
        UploadId,
        MultipartUpload: {
          Parts: [
            { PartNumber: 1, ETag: p1.ETag },
            { PartNumber: 2, ETag: p2.ETag },
          ],
        },
      }),
    );
    const expected = createHash('md5')
      .update(Buffer.concat([md5(part1), md5(part2)]))
      .digest('hex');
    expect(done.ETag).toBe(`"${expected}-2"`);
    const got = await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: key }));
    expect(got.ContentType).toBe('app/x-test');
    expect(await md5OfStream(got.Body as Readable)).toEqual({
      md5: createHash('md5')
        .update(Buffer.concat([part1, part2]))
        .digest('hex'),
      size: part1.length + part2.length,
    });
    // The upload is gone once completed.
    const again = await sdkError(
      s3.send(new ListPartsCommand({ Bucket: BUCKET, Key: key, UploadId })),
    );
    expect(again).toMatchObject({ code: 'NoSuchUpload', status: 404 });
  });

  it('refuses a part under 5 MiB that is not the last with EntityTooSmall', async () => {
    const key = 'mp/small';
    const { UploadId } = await s3.send(
      new CreateMultipartUploadCommand({ Bucket: BUCKET, Key: key }),
    );
    const parts = [];
    for (const n of [1, 2]) {
      const r = await s3.send(
        new UploadPartCommand({
          Bucket: BUCKET,
          Key: key,
          UploadId,
          PartNumber: n,
          Body: Buffer.alloc(1024, n),
        }),
      );
      parts.push({ PartNumber: n, ETag: r.ETag });
    }
    const e = await sdkError(
      s3.send(
        new CompleteMultipartUploadCommand({
          Bucket: BUCKET,
          Key: key,
          UploadId,
          MultipartUpload: { Parts: parts },
        }),
      ),
    );
    expect(e).toMatchObject({ code: 'EntityTooSmall', status: 400 });
    // The upload is still there, and a single small part is a valid (last) part.
    const one = await s3.send(
      new CompleteMultipartUploadCommand({
        Bucket: BUCKET,
        Key: key,
        UploadId,
        MultipartUpload: { Parts: [parts[0]!] },
      }),
    );
    expect(one.ETag).toMatch(/-1"$/);
    expect((await text(key)).body).toBe(Buffer.alloc(1024, 1).toString());
  });

  it('refuses a wrong ETag with InvalidPart and parts out of order with InvalidPartOrder', async () => {
    const key = 'mp/wrong';
    const { UploadId } = await s3.send(
      new CreateMultipartUploadCommand({ Bucket: BUCKET, Key: key }),
    );
    const r = await s3.send(
      new UploadPartCommand({ Bucket: BUCKET, Key: key, UploadId, PartNumber: 1, Body: 'p1' }),
    );
    const complete = (Parts: { PartNumber: number; ETag?: string }[]) =>
      sdkError(
        s3.send(
          new CompleteMultipartUploadCommand({
            Bucket: BUCKET,
            Key: key,
            UploadId,
            MultipartUpload: { Parts },
          }),
        ),
      );
    expect(
      await complete([{ PartNumber: 1, ETag: '"00000000000000000000000000000000"' }]),
    ).toMatchObject({ code: 'InvalidPart', status: 400 });
    expect(await complete([{ PartNumber: 2, ETag: r.ETag }])).toMatchObject({
      code: 'InvalidPart',
    });
    expect(
      await complete([
        { PartNumber: 1, ETag: r.ETag },
        { PartNumber: 1, ETag: r.ETag },
      ]),
    ).toMatchObject({ code: 'InvalidPartOrder' });
    const e = await sdkError(s3.send(new HeadObjectCommand({ Bucket: BUCKET, Key: key })));
    expect(e.status).toBe(404);
  });

  it('aborts an upload: its parts are gone and it cannot be completed', async () => {
    const key = 'mp/aborted';
    const { UploadId } = await s3.send(
      new CreateMultipartUploadCommand({ Bucket: BUCKET, Key: key }),
    );
    const r = await s3.send(
      new UploadPartCommand({ Bucket: BUCKET, Key: key, UploadId, PartNumber: 1, Body: 'part' }),
    );
    await s3.send(new AbortMultipartUploadCommand({ Bucket: BUCKET, Key: key, UploadId }));
    expect(
      await sdkError(s3.send(new ListPartsCommand({ Bucket: BUCKET, Key: key, UploadId }))),
    ).toMatchObject({ code: 'NoSuchUpload', status: 404 });
    expect(
      await sdkError(
        s3.send(
          new CompleteMultipartUploadCommand({
            Bucket: BUCKET,
            Key: key,
            UploadId,
            MultipartUpload: { Parts: [{ PartNumber: 1, ETag: r.ETag }] },
          }),
        ),
      ),
    ).toMatchObject({ code: 'NoSuchUpload' });
    expect(
      await sdkError(
        s3.send(
          new UploadPartCommand({ Bucket: BUCKET, Key: key, UploadId, PartNumber: 2, Body: 'x' }),
        ),
      ),
    ).toMatchObject({ code: 'NoSuchUpload' });
    const uploads = await s3.send(new ListMultipartUploadsCommand({ Bucket: BUCKET }));
    expect((uploads.Uploads ?? []).map((u) => u.UploadId)).not.toContain(UploadId);
  });

  it('copies parts from an object with UploadPartCopy, whole or a range of it', async () => {
    const src = Buffer.concat([Buffer.alloc(5 * MiB, 'a'), Buffer.from('tail of the source')]);
    await s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: 'mp/copy-src', Body: src }));
    const key = 'mp/copy-dst';
    const { UploadId } = await s3.send(
      new CreateMultipartUploadCommand({ Bucket: BUCKET, Key: key }),
    );
    const whole = await s3.send(
      new UploadPartCopyCommand({
        Bucket: BUCKET,
        Key: key,
        UploadId,
        PartNumber: 1,
        CopySource: `${BUCKET}/mp/copy-src`,
      }),
    );
    expect(whole.CopyPartResult?.ETag).toBe(`"${createHash('md5').update(src).digest('hex')}"`);
    const ranged = await s3.send(
      new UploadPartCopyCommand({
        Bucket: BUCKET,
        Key: key,
        UploadId,
        PartNumber: 2,
        CopySource: `${BUCKET}/mp/copy-src`,
        CopySourceRange: `bytes=${5 * MiB}-${src.length - 1}`,
      }),
    );
    const bad = await sdkError(
      s3.send(
        new UploadPartCopyCommand({
          Bucket: BUCKET,
          Key: key,
          UploadId,
          PartNumber: 3,
          CopySource: `${BUCKET}/mp/copy-src`,
          CopySourceRange: `bytes=0-${src.length}`,
        }),
      ),
    );
    expect(bad).toMatchObject({ code: 'InvalidArgument', status: 400 });
    const missing = await sdkError(
      s3.send(
        new UploadPartCopyCommand({
          Bucket: BUCKET,
          Key: key,
          UploadId,
          PartNumber: 3,
          CopySource: `${BUCKET}/mp/no-such-source`,
        }),
      ),
    );
    expect(missing).toMatchObject({ code: 'NoSuchKey', status: 404 });
    await s3.send(
      new CompleteMultipartUploadCommand({
        Bucket: BUCKET,
        Key: key,
        UploadId,
        MultipartUpload: {
          Parts: [
            { PartNumber: 1, ETag: whole.CopyPartResult?.ETag },
            { PartNumber: 2, ETag: ranged.CopyPartResult?.ETag },
          ],
        },
      }),
    );
    const got = await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: key }));
    const expected = Buffer.concat([src, Buffer.from('tail of the source')]);
    expect(await md5OfStream(got.Body as Readable)).toEqual({
      md5: createHash('md5').update(expected).digest('hex'),
      size: expected.length,
    });
  });

  it('uploads a 20 MiB stream with lib-storage Upload', async () => {
    const size = 20 * MiB + 12345;
    const upload = new Upload({
      client: s3,
      params: { Bucket: BUCKET, Key: 'mp/upload-20m', Body: patternStream(size, 7) },
      partSize: 5 * MiB,
      queueSize: 4,
    });
    const done = await upload.done();
    expect(done.ETag).toMatch(/-5"$/);
    const head = await s3.send(new HeadObjectCommand({ Bucket: BUCKET, Key: 'mp/upload-20m' }));
    expect(head.ContentLength).toBe(size);
    const got = await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: 'mp/upload-20m' }));
    expect(await md5OfStream(got.Body as Readable)).toEqual({ md5: md5Of(size, 7), size });
  });
});
