/**
 * The aws-chunked decoder, anchored on AWS's published multi-chunk example (its signatures are
 * copied from the documentation, not computed here), then tampering, truncation and trailers.
 */
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { describe, expect, it } from 'vitest';
import { credentialScope, hmac, sha256Hex, signingKey, EMPTY_SHA256 } from './canonical.js';
import { computeChecksum } from './checksum.js';
import { decodeAwsChunked, type AwsChunkedOptions } from './chunked.js';
import { SigV4Error } from './errors.js';
import { createBodyVerifier } from './payload.js';
import type { StreamingPayloadAuth, SigV4Request } from './types.js';
import { verifyRequest } from './verify.js';

const AWS_KEY = 'AKIAIOSFODNN7EXAMPLE';
const AWS_SECRET = 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY';
const DATETIME = '20130524T000000Z';
const SCOPE = credentialScope('20130524', 'us-east-1');
const SEED = '4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9';
const CHUNK_SIGS = [
  'ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648',
  '0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497',
  'b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9',
];

const signed = (trailer = false): StreamingPayloadAuth => ({
  kind: 'streaming-signed',
  seedSignature: SEED,
  signingKey: signingKey(AWS_SECRET, '20130524', 'us-east-1'),
  datetime: DATETIME,
  scope: SCOPE,
  trailer,
});

/** The AWS example body: 66560 bytes of `a` in a 64 KiB chunk, a 1 KiB chunk and the end. */
function awsExampleBody(): Buffer {
  const a = (n: number) => Buffer.alloc(n, 'a');
  return Buffer.concat([
    Buffer.from(`10000;chunk-signature=${CHUNK_SIGS[0]}\r\n`),
    a(65536),
    Buffer.from(`\r\n400;chunk-signature=${CHUNK_SIGS[1]}\r\n`),
    a(1024),
    Buffer.from(`\r\n0;chunk-signature=${CHUNK_SIGS[2]}\r\n\r\n`),
  ]);
}

/** Builds a signed or unsigned aws-chunked body, signing with the same chain rules. */
function buildBody(
  payload: StreamingPayloadAuth,
  chunks: Buffer[],
  trailers: Record<string, string> = {},
): Buffer {
  const parts: Buffer[] = [];
  let previous = payload.kind === 'streaming-signed' ? payload.seedSignature : '';
  for (const data of [...chunks, Buffer.alloc(0)]) {
    let ext = '';
    if (payload.kind === 'streaming-signed') {
      const toSign = ['AWS4-HMAC-SHA256-PAYLOAD', payload.datetime, payload.scope, previous]
        .concat([EMPTY_SHA256, sha256Hex(data)])
        .join('\n');
      previous = hmac(payload.signingKey, toSign).toString('hex');
      ext = `;chunk-signature=${previous}`;
    }
    parts.push(Buffer.from(`${data.length.toString(16)}${ext}\r\n`), data);
    if (data.length > 0) parts.push(Buffer.from('\r\n'));
  }
  let canonical = '';
  for (const [name, value] of Object.entries(trailers)) {
    parts.push(Buffer.from(`${name}:${value}\r\n`));
    canonical += `${name}:${value}\n`;
  }
  if (payload.kind === 'streaming-signed' && payload.trailer) {
    const toSign = ['AWS4-HMAC-SHA256-TRAILER', payload.datetime, payload.scope, previous]
      .concat([sha256Hex(canonical)])
      .join('\n');
    parts.push(
      Buffer.from(
        `x-amz-trailer-signature:${hmac(payload.signingKey, toSign).toString('hex')}\r\n`,
      ),
    );
  }
  parts.push(Buffer.from('\r\n'));
  return Buffer.concat(parts);
}

/** Feeds `body` in pieces of `split` bytes through a decoder and collects what comes out. */
async function decode(body: Buffer, opts: AwsChunkedOptions, split = 8191) {
  const pieces: Buffer[] = [];
  for (let i = 0; i < body.length; i += split) pieces.push(body.subarray(i, i + split));
  const decoder = decodeAwsChunked(opts);
  const out: Buffer[] = [];
  await pipeline(
    Readable.from(pieces),
    decoder,
    new Writable({
      write(chunk: Buffer, _e, cb) {
        out.push(chunk);
        cb();
      },
    }),
  );
  return { data: Buffer.concat(out), trailers: decoder.trailers, result: await decoder.done };
}

async function failure(p: Promise<unknown>): Promise<SigV4Error> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(SigV4Error);
  return err as SigV4Error;
}

describe("AWS's multi-chunk example", () => {
  it('verifies the seed signature of the example request', async () => {
    const req: SigV4Request = {
      method: 'PUT',
      rawPath: '/examplebucket/chunkObject.txt',
      query: '',
      headers: {
        host: 's3.amazonaws.com',
        'x-amz-date': DATETIME,
        'x-amz-storage-class': 'REDUCED_REDUNDANCY',
        'x-amz-content-sha256': 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD',
        'content-encoding': 'aws-chunked',
        'x-amz-decoded-content-length': '66560',
        'content-length': '66824',
        authorization: `AWS4-HMAC-SHA256 Credential=${AWS_KEY}/${SCOPE},SignedHeaders=content-encoding;content-length;host;x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;x-amz-storage-class,Signature=${SEED}`,
      },
    };
    const auth = await verifyRequest(req, async () => AWS_SECRET, {
      now: new Date('2013-05-24T00:05:00Z'),
    });
    expect(auth.payload).toEqual(signed());
    expect(awsExampleBody().length).toBe(66824);
  });

  it('decodes the example body and outputs exactly its data', async () => {
    for (const split of [1 << 20, 65536, 8191, 97, 1]) {
      const { data, result } = await decode(
        awsExampleBody(),
        { payload: signed(), decodedContentLength: 66560 },
        split,
      );
      expect(data.equals(Buffer.alloc(66560, 'a'))).toBe(true);
      expect(result).toEqual({ trailers: {}, decodedLength: 66560 });
    }
  });

  it('refuses a tampered data byte with SignatureDoesNotMatch, before passing it on', async () => {
    const body = awsExampleBody();
    body[100] = 'b'.charCodeAt(0);
    const decoder = decodeAwsChunked({ payload: signed() });
    const out: Buffer[] = [];
    decoder.on('data', (c: Buffer) => out.push(c));
    const err = await failure(pipeline(Readable.from([body]), decoder));
    expect(err).toMatchObject({ code: 'SignatureDoesNotMatch', status: 403 });
    expect(out.length).toBe(0);
    await expect(decoder.done).rejects.toBeInstanceOf(SigV4Error);
  });

  it('refuses a tampered second chunk, a swapped signature and a wrong seed', async () => {
    const second = awsExampleBody();
    second.writeUInt8(second.readUInt8(second.length - 200) ^ 1, second.length - 200);
    expect((await failure(decode(second, { payload: signed() }))).code).toBe(
      'SignatureDoesNotMatch',
    );
    const swapped = Buffer.from(
      awsExampleBody().toString('latin1').replace(CHUNK_SIGS[2]!, CHUNK_SIGS[1]!),
      'latin1',
    );
    expect((await failure(decode(swapped, { payload: signed() }))).code).toBe(
      'SignatureDoesNotMatch',
    );
    const wrongSeed = { ...signed(), seedSignature: CHUNK_SIGS[0]! };
    expect((await failure(decode(awsExampleBody(), { payload: wrongSeed }))).code).toBe(
      'SignatureDoesNotMatch',
    );
  });

  it('refuses a truncated body with IncompleteBody', async () => {
    const body = awsExampleBody();
    for (const cut of [body.length - 2, body.length - 90, 66000, 50, 0]) {
      const err = await failure(decode(body.subarray(0, cut), { payload: signed() }));
      expect(err).toMatchObject({ code: 'IncompleteBody', status: 400 });
    }
  });

  it('refuses a length that disagrees with x-amz-decoded-content-length', async () => {
    for (const declared of [66559, 66561]) {
      const err = await failure(
        decode(awsExampleBody(), { payload: signed(), decodedContentLength: declared }),
      );
      expect(err.code).toBe('IncompleteBody');
    }
  });

  it('refuses framing errors with InvalidRequest', async () => {
    const text = awsExampleBody().toString('latin1');
    const cases = [
      text.replace('10000;', 'zz;'),
      text.replace(`;chunk-signature=${CHUNK_SIGS[0]}`, ''),
      `${text}extra`,
      text.replace('\r\n400;', '\n\n400;'),
    ];
    for (const body of cases) {
      const err = await failure(decode(Buffer.from(body, 'latin1'), { payload: signed() }));
      expect(err.code).toBe('InvalidRequest');
    }
    const big = await failure(decode(awsExampleBody(), { payload: signed(), maxChunkSize: 1024 }));
    expect(big.message).toMatch(/exceeds the maximum/);
  });
});

describe('trailers', () => {
  const data = [Buffer.from('hello '), Buffer.from('chunked '), Buffer.from('world')];
  const all = Buffer.concat(data);
  const crc = computeChecksum('crc32', all);

  it('decodes an unsigned-trailer body with a correct x-amz-checksum-crc32', async () => {
    const body = buildBody({ kind: 'streaming-unsigned-trailer' }, data, {
      'x-amz-checksum-crc32': crc,
    });
    expect(body.toString('latin1')).toContain(`0\r\nx-amz-checksum-crc32:${crc}\r\n\r\n`);
    for (const split of [1, 3, 1000]) {
      const out = await decode(
        body,
        {
          payload: { kind: 'streaming-unsigned-trailer' },
          declaredTrailers: ['x-amz-checksum-crc32'],
          decodedContentLength: all.length,
        },
        split,
      );
      expect(out.data.toString()).toBe('hello chunked world');
      expect(out.trailers).toEqual({ 'x-amz-checksum-crc32': crc });
    }
  });

  it('refuses a wrong x-amz-checksum-crc32 trailer with BadDigest', async () => {
    const body = buildBody({ kind: 'streaming-unsigned-trailer' }, data, {
      'x-amz-checksum-crc32': computeChecksum('crc32', Buffer.from('something else')),
    });
    const err = await failure(
      decode(body, {
        payload: { kind: 'streaming-unsigned-trailer' },
        declaredTrailers: ['x-amz-checksum-crc32'],
      }),
    );
    expect(err).toMatchObject({ code: 'BadDigest', status: 400 });
  });

  it('refuses undeclared, missing or malformed checksum trailers', async () => {
    const payload = { kind: 'streaming-unsigned-trailer' } as const;
    const withCrc = buildBody(payload, data, { 'x-amz-checksum-crc32': crc });
    expect((await failure(decode(withCrc, { payload }))).code).toBe('InvalidRequest');
    const without = buildBody(payload, data);
    expect(
      (await failure(decode(without, { payload, declaredTrailers: ['x-amz-checksum-crc32'] })))
        .code,
    ).toBe('InvalidRequest');
    const garbage = buildBody(payload, data, { 'x-amz-checksum-crc32': 'not base64!' });
    expect(
      (await failure(decode(garbage, { payload, declaredTrailers: ['x-amz-checksum-crc32'] })))
        .code,
    ).toBe('InvalidRequest');
  });

  it("accepts the JavaScript SDK's unsigned body without checksum, which ends at 0\\r\\n", async () => {
    const body = Buffer.from('5\r\nhello\r\n0\r\n');
    const out = await decode(body, { payload: { kind: 'streaming-unsigned-trailer' } });
    expect(out.data.toString()).toBe('hello');
  });

  it('verifies a signed trailer and its checksum', async () => {
    const payload = signed(true);
    const opts = { payload, declaredTrailers: ['x-amz-checksum-crc32c'] };
    const c32c = computeChecksum('crc32c', all);
    const body = buildBody(payload, data, { 'x-amz-checksum-crc32c': c32c });
    const out = await decode(body, opts, 5);
    expect(out.data.equals(all)).toBe(true);
    expect(out.trailers).toEqual({ 'x-amz-checksum-crc32c': c32c });

    const otherValue = computeChecksum('crc32c', Buffer.from('x'));
    const forged = Buffer.from(body.toString('latin1').replace(c32c, otherValue), 'latin1');
    expect((await failure(decode(forged, opts))).code).toBe('SignatureDoesNotMatch');
    const unsignedTrailer = Buffer.from(
      body.toString('latin1').replace(/x-amz-trailer-signature:[0-9a-f]+\r\n/, ''),
      'latin1',
    );
    expect((await failure(decode(unsignedTrailer, opts))).code).toBe('SignatureDoesNotMatch');
  });

  it('refuses trailers on a signed payload without -TRAILER', async () => {
    const payload = signed(false);
    const body = buildBody(payload, data, { 'x-amz-checksum-crc32': crc });
    expect(
      (await failure(decode(body, { payload, declaredTrailers: ['x-amz-checksum-crc32'] }))).code,
    ).toBe('InvalidRequest');
  });
});

describe('createBodyVerifier', () => {
  async function run(
    body: Buffer,
    payload: Parameters<typeof createBodyVerifier>[0]['payload'],
    headers: Record<string, string>,
  ) {
    const out: Buffer[] = [];
    await pipeline(
      Readable.from([body]),
      createBodyVerifier({ payload }, headers),
      new Writable({
        write(chunk: Buffer, _e, cb) {
          out.push(chunk);
          cb();
        },
      }),
    );
    return Buffer.concat(out);
  }

  it('checks a signed SHA-256 payload', async () => {
    const body = Buffer.from('hello');
    const hex = sha256Hex(body);
    expect((await run(body, { kind: 'sha256', hex }, {})).toString()).toBe('hello');
    const err = await failure(run(Buffer.from('hellO'), { kind: 'sha256', hex }, {}));
    expect(err).toMatchObject({ code: 'XAmzContentSHA256Mismatch', status: 400 });
  });

  it('checks x-amz-checksum-* headers on plain and chunked bodies', async () => {
    const body = Buffer.from('hello');
    const headers = { 'x-amz-checksum-sha256': computeChecksum('sha256', body) };
    expect((await run(body, { kind: 'unsigned' }, headers)).toString()).toBe('hello');
    expect((await failure(run(Buffer.from('hellx'), { kind: 'unsigned' }, headers))).code).toBe(
      'BadDigest',
    );
    const chunked = buildBody({ kind: 'streaming-unsigned-trailer' }, [body]);
    const ok = await run(chunked, { kind: 'streaming-unsigned-trailer' }, headers);
    expect(ok.toString()).toBe('hello');
    const wrong = { 'x-amz-checksum-sha256': computeChecksum('sha256', Buffer.from('x')) };
    expect((await failure(run(chunked, { kind: 'streaming-unsigned-trailer' }, wrong))).code).toBe(
      'BadDigest',
    );
  });

  it('reads x-amz-trailer and x-amz-decoded-content-length for chunked bodies', async () => {
    const payload = { kind: 'streaming-unsigned-trailer' } as const;
    const body = buildBody(payload, [Buffer.from('abc')], {
      'x-amz-checksum-crc32': computeChecksum('crc32', Buffer.from('abc')),
    });
    const headers = {
      'x-amz-trailer': 'x-amz-checksum-crc32',
      'x-amz-decoded-content-length': '3',
    };
    expect((await run(body, payload, headers)).toString()).toBe('abc');
    const short = { ...headers, 'x-amz-decoded-content-length': '4' };
    expect((await failure(run(body, payload, short))).code).toBe('IncompleteBody');
  });
});
