/**
 * Cross-checks the verifier against independent signers: @smithy/signature-v4 (what every AWS
 * SDK for JavaScript signs with) and the S3 request presigner, plus AWS's published examples.
 */
import { createHash, createHmac, type Hash as NodeHash, type Hmac } from 'node:crypto';
import { GetObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { SignatureV4 } from '@smithy/signature-v4';
import { describe, expect, it } from 'vitest';
import { SigV4Error } from './errors.js';
import { presignUrl } from './presign.js';
import type { SigV4Request } from './types.js';
import { verifyRequest } from './verify.js';

const AKID = 'AKIDPIERTEST0000001';
const SECRET = 'pier/secret+key/with=odd/chars0123456789';
const credentials = { accessKeyId: AKID, secretAccessKey: SECRET };
const lookup = async (id: string) => (id === AKID ? SECRET : undefined);
const NOW = new Date('2026-01-01T12:00:00Z');
const HOST = '127.0.0.1:8080';

/** SHA-256 / HMAC-SHA256 over node:crypto in the shape smithy expects (no @aws-crypto here). */
class Sha256 {
  private readonly hash: NodeHash | Hmac;
  constructor(secret?: string | ArrayBuffer | ArrayBufferView) {
    this.hash = secret === undefined ? createHash('sha256') : createHmac('sha256', toBytes(secret));
  }
  update(data: string | ArrayBuffer | ArrayBufferView): void {
    this.hash.update(toBytes(data));
  }
  async digest(): Promise<Uint8Array> {
    return new Uint8Array(this.hash.digest());
  }
  reset(): void {}
}
function toBytes(data: string | ArrayBuffer | ArrayBufferView): Buffer {
  if (typeof data === 'string') return Buffer.from(data, 'utf8');
  if (ArrayBuffer.isView(data)) return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  return Buffer.from(data);
}

const signer = new SignatureV4({
  service: 's3',
  region: 'us-east-1',
  credentials,
  sha256: Sha256,
  uriEscapePath: false,
  applyChecksum: false,
});

/** How a JavaScript SDK puts a query on the wire (RFC 3986 strict). */
function esc(s: string): string {
  return encodeURIComponent(s).replace(
    /[!'()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
}
function queryString(query: Record<string, string | string[] | null> | undefined): string {
  return Object.entries(query ?? {})
    .flatMap(([k, v]) => (Array.isArray(v) ? v : [v]).map((x) => `${esc(k)}=${esc(x ?? '')}`))
    .join('&');
}

interface Spec {
  method: string;
  path: string;
  query?: Record<string, string>;
  headers?: Record<string, string>;
}

function smithyRequest(spec: Spec) {
  return {
    method: spec.method,
    protocol: 'http:',
    hostname: '127.0.0.1',
    port: 8080,
    path: spec.path,
    query: spec.query ?? {},
    headers: { host: HOST, ...spec.headers },
  };
}

/** Signs with smithy's header form and returns what the server would see. */
async function signHeader(spec: Spec, date = NOW): Promise<SigV4Request> {
  const signed = await signer.sign(smithyRequest(spec), { signingDate: date });
  return {
    method: signed.method,
    rawPath: signed.path,
    query: queryString(signed.query),
    headers: lowerHeaders(signed.headers),
  };
}

/** Presigns with smithy, the payload UNSIGNED-PAYLOAD as S3 presigned URLs have it. */
async function presign(spec: Spec, expiresIn = 300, date = NOW): Promise<SigV4Request> {
  const req = smithyRequest({
    ...spec,
    headers: { 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD', ...spec.headers },
  });
  const signed = await signer.presign(req, { signingDate: date, expiresIn });
  return {
    method: signed.method,
    rawPath: signed.path,
    query: queryString(signed.query),
    headers: lowerHeaders(signed.headers),
  };
}

function lowerHeaders(headers: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));
}

async function rejection(p: Promise<unknown>): Promise<SigV4Error> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(SigV4Error);
  return err as SigV4Error;
}

const PUT_HASH = createHash('sha256').update('hello, pier').digest('hex');

const specs: Record<string, Spec> = {
  'GET with a query needing encoding': {
    method: 'GET',
    path: '/s3/my-bucket',
    query: { 'list-type': '2', prefix: 'a b/', delimiter: '/' },
    headers: { 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD' },
  },
  'PUT with a 64-hex payload hash': {
    method: 'PUT',
    path: '/s3/my-bucket/docs/report.txt',
    headers: {
      'x-amz-content-sha256': PUT_HASH,
      'content-type': 'text/plain',
      'content-length': '11',
      'x-amz-meta-owner': '  Ada   Lovelace ',
    },
  },
  'key with spaces': {
    method: 'GET',
    path: '/s3/my-bucket/a%20b%20c.txt',
    headers: { 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD' },
  },
  'unicode key': {
    method: 'GET',
    path: `/s3/my-bucket/${['ünï', 'cødé.txt'].map(esc).join('/')}`,
    headers: { 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD' },
  },
  'key with + ~ % = &': {
    method: 'DELETE',
    path: `/s3/my-bucket/${esc('x+y~z%w=v&u.bin')}`,
    query: { versionId: 'v=1&2+3' },
    headers: { 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD' },
  },
  'subresource without a value': {
    method: 'POST',
    path: '/s3/my-bucket/big.bin',
    query: { uploads: '' },
    headers: { 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD' },
  },
};

describe('header form, signed by @smithy/signature-v4', () => {
  for (const [name, spec] of Object.entries(specs)) {
    it(`verifies ${name}`, async () => {
      const req = await signHeader(spec);
      const auth = await verifyRequest(req, lookup, { now: NOW, region: 'us-east-1' });
      expect(auth).toMatchObject({ accessKeyId: AKID, region: 'us-east-1', form: 'header' });
      expect(auth.signedHeaders).toContain('host');
    });
  }

  it('reports the payload kind', async () => {
    const put = await verifyRequest(
      await signHeader(specs['PUT with a 64-hex payload hash']!),
      lookup,
      {
        now: NOW,
      },
    );
    expect(put.payload).toEqual({ kind: 'sha256', hex: PUT_HASH });
    const get = await verifyRequest(await signHeader(specs['key with spaces']!), lookup, {
      now: NOW,
    });
    expect(get.payload).toEqual({ kind: 'unsigned' });
  });

  it('accepts equivalent encodings of the path and query, as S3 does', async () => {
    const req = await signHeader(specs['GET with a query needing encoding']!);
    // `+` for a space and an unescaped `/` in the query; lowercase hex escapes in the path.
    const variants: SigV4Request[] = [
      { ...req, query: 'list-type=2&prefix=a+b/&delimiter=/' },
      { ...req, query: 'delimiter=%2f&prefix=a%20b%2F&list-type=2' },
    ];
    for (const v of variants)
      await expect(verifyRequest(v, lookup, { now: NOW })).resolves.toBeTruthy();
    const uni = await signHeader(specs['unicode key']!);
    await expect(
      verifyRequest({ ...uni, rawPath: uni.rawPath.toLowerCase() }, lookup, {
        now: NOW,
      }),
    ).resolves.toBeTruthy();
  });

  it('is lenient on the spacing of the Authorization header', async () => {
    const req = await signHeader(specs['key with spaces']!);
    const header = String(req.headers.authorization);
    for (const variant of [
      header.replace(/, /g, ','),
      header.replace(/, /g, ' ,  '),
      header.replace('AWS4-HMAC-SHA256 ', 'AWS4-HMAC-SHA256   '),
    ]) {
      const auth = verifyRequest(
        { ...req, headers: { ...req.headers, authorization: variant } },
        lookup,
        {
          now: NOW,
        },
      );
      await expect(auth).resolves.toBeTruthy();
    }
  });

  describe('fails with SignatureDoesNotMatch when one thing changes', () => {
    const spec = specs['PUT with a 64-hex payload hash']!;
    const mutations: Record<string, (r: SigV4Request) => SigV4Request> = {
      'one byte of the path': (r) => ({ ...r, rawPath: r.rawPath.replace('report', 'reporT') }),
      'a query value': (r) => ({ ...r, query: 'x-id=PutObject' }),
      'a signed header value': (r) => ({
        ...r,
        headers: { ...r.headers, 'content-type': 'text/html' },
      }),
      'the method': (r) => ({ ...r, method: 'POST' }),
      'the payload hash': (r) => ({
        ...r,
        headers: { ...r.headers, 'x-amz-content-sha256': PUT_HASH.replace(/^./, 'f') },
      }),
      'the signature': (r) => ({
        ...r,
        headers: {
          ...r.headers,
          authorization: String(r.headers.authorization).replace(/.$/, (c) =>
            c === '0' ? '1' : '0',
          ),
        },
      }),
    };
    for (const [what, mutate] of Object.entries(mutations)) {
      it(what, async () => {
        const req = mutate(await signHeader(spec));
        const err = await rejection(verifyRequest(req, lookup, { now: NOW }));
        expect(err.code).toBe('SignatureDoesNotMatch');
        expect(err.status).toBe(403);
      });
    }

    it('the secret', async () => {
      const req = await signHeader(spec);
      const err = await rejection(verifyRequest(req, async () => `${SECRET}x`, { now: NOW }));
      expect(err.code).toBe('SignatureDoesNotMatch');
      expect(err.canonicalRequest).toContain('/s3/my-bucket/docs/report.txt');
      expect(err.canonicalRequest).toContain('x-amz-meta-owner:Ada Lovelace');
      expect(err.stringToSign).toMatch(
        /^AWS4-HMAC-SHA256\n20260101T120000Z\n20260101\/us-east-1\/s3\/aws4_request\n[0-9a-f]{64}$/,
      );
      expect(err.details).toMatchObject({ AWSAccessKeyId: AKID });
    });
  });

  it('refuses an unknown access key with InvalidAccessKeyId', async () => {
    const req = await signHeader(specs['key with spaces']!);
    const err = await rejection(verifyRequest(req, async () => undefined, { now: NOW }));
    expect(err).toMatchObject({ code: 'InvalidAccessKeyId', status: 403 });
  });

  it('refuses a request 16 minutes old with RequestTimeTooSkewed', async () => {
    const req = await signHeader(specs['key with spaces']!, new Date(NOW.getTime() - 16 * 60_000));
    const err = await rejection(verifyRequest(req, lookup, { now: NOW }));
    expect(err).toMatchObject({ code: 'RequestTimeTooSkewed', status: 403 });
    expect(err.details).toMatchObject({ MaxAllowedSkewMilliseconds: '900000' });
    // 14 minutes is inside the window, also into the future.
    const fresh = await signHeader(
      specs['key with spaces']!,
      new Date(NOW.getTime() + 14 * 60_000),
    );
    await expect(verifyRequest(fresh, lookup, { now: NOW })).resolves.toBeTruthy();
  });

  it('refuses a credential for another region', async () => {
    const req = await signHeader(specs['key with spaces']!);
    const err = await rejection(verifyRequest(req, lookup, { now: NOW, region: 'eu-west-1' }));
    expect(err).toMatchObject({ code: 'AuthorizationHeaderMalformed', status: 400 });
    expect(err.details).toEqual({ Region: 'eu-west-1' });
  });

  it('refuses x-amz-* headers that were not signed', async () => {
    const req = await signHeader(specs['key with spaces']!);
    const err = await rejection(
      verifyRequest({ ...req, headers: { ...req.headers, 'x-amz-acl': 'public-read' } }, lookup, {
        now: NOW,
      }),
    );
    expect(err).toMatchObject({ code: 'AccessDenied', details: { HeadersNotSigned: 'x-amz-acl' } });
  });

  it('requires x-amz-content-sha256 and a valid value', async () => {
    const noHash = await signHeader({ method: 'GET', path: '/s3/b/k' });
    expect((await rejection(verifyRequest(noHash, lookup, { now: NOW }))).code).toBe(
      'InvalidRequest',
    );
    const bad = await signHeader({
      method: 'GET',
      path: '/s3/b/k',
      headers: { 'x-amz-content-sha256': 'not-a-hash' },
    });
    expect((await rejection(verifyRequest(bad, lookup, { now: NOW }))).code).toBe(
      'InvalidArgument',
    );
  });

  it('recognizes the streaming payload kinds', async () => {
    for (const [value, kind] of [
      ['STREAMING-AWS4-HMAC-SHA256-PAYLOAD', 'streaming-signed'],
      ['STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER', 'streaming-signed'],
      ['STREAMING-UNSIGNED-PAYLOAD-TRAILER', 'streaming-unsigned-trailer'],
    ] as const) {
      const req = await signHeader({
        method: 'PUT',
        path: '/s3/b/k',
        headers: { 'x-amz-content-sha256': value, 'content-encoding': 'aws-chunked' },
      });
      const auth = await verifyRequest(req, lookup, { now: NOW });
      expect(auth.payload.kind).toBe(kind);
      if (auth.payload.kind === 'streaming-signed') {
        expect(auth.payload.trailer).toBe(value.endsWith('TRAILER'));
        expect(auth.payload.seedSignature).toBe(
          /Signature=([0-9a-f]{64})/.exec(String(req.headers.authorization))?.[1],
        );
        expect(auth.payload.datetime).toBe('20260101T120000Z');
        expect(auth.payload.scope).toBe('20260101/us-east-1/s3/aws4_request');
        expect(auth.payload.signingKey).toBeInstanceOf(Buffer);
      }
    }
  });

  it('refuses other schemes and malformed headers with S3 codes', async () => {
    const base: SigV4Request = {
      method: 'GET',
      rawPath: '/s3/b/k',
      query: '',
      headers: { host: HOST },
    };
    const withAuth = (authorization: string): SigV4Request => ({
      ...base,
      headers: { ...base.headers, authorization, 'x-amz-date': '20260101T120000Z' },
    });
    const cases: Array<[SigV4Request, string]> = [
      [base, 'AccessDenied'],
      [withAuth('AWS AKID:c2lnbmF0dXJl'), 'InvalidRequest'],
      [
        withAuth('AWS4-HMAC-SHA256 Credential=AKID/20260101/us-east-1/s3/aws4_request'),
        'AuthorizationHeaderMalformed',
      ],
      [
        withAuth(
          `AWS4-HMAC-SHA256 Credential=AKID/20260101/us-east-1/ec2/aws4_request, SignedHeaders=host, Signature=${'0'.repeat(64)}`,
        ),
        'AuthorizationHeaderMalformed',
      ],
      [
        withAuth(
          `AWS4-HMAC-SHA256 Credential=AKID/20260101/us-east-1/s3/aws4_request, SignedHeaders=x-amz-date, Signature=${'0'.repeat(64)}`,
        ),
        'AuthorizationHeaderMalformed',
      ],
      [
        withAuth(
          `AWS4-HMAC-SHA256 Credential=AKID/20251231/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=${'0'.repeat(64)}`,
        ),
        'AuthorizationHeaderMalformed',
      ],
      [
        {
          ...withAuth(
            `AWS4-HMAC-SHA256 Credential=AKID/20260101/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=${'0'.repeat(64)}`,
          ),
          query: 'X-Amz-Algorithm=AWS4-HMAC-SHA256',
        },
        'InvalidArgument',
      ],
      [{ ...base, headers: { ...base.headers, authorization: 'x' } }, 'InvalidRequest'],
      [{ ...base, query: 'X-Amz-Algorithm=AWS4-HMAC-SHA256&prefix=%zz' }, 'InvalidURI'],
    ];
    for (const [req, code] of cases) {
      expect((await rejection(verifyRequest(req, lookup, { now: NOW }))).code).toBe(code);
    }
  });

  it('refuses a missing or unparsable date with AccessDenied', async () => {
    const req = await signHeader(specs['key with spaces']!);
    const { 'x-amz-date': _dropped, ...headers } = req.headers;
    const err = await rejection(verifyRequest({ ...req, headers }, lookup, { now: NOW }));
    expect(err.code).toBe('AccessDenied');
    expect(err.message).toMatch(/Date or x-amz-date/);
  });
});

describe('presigned form, signed by @smithy/signature-v4', () => {
  for (const [name, spec] of Object.entries(specs)) {
    if (spec.headers?.['x-amz-content-sha256'] !== 'UNSIGNED-PAYLOAD') continue;
    it(`verifies ${name}`, async () => {
      const { headers: _h, ...bare } = spec;
      const req = await presign(bare);
      const auth = await verifyRequest(req, lookup, { now: NOW, region: 'us-east-1' });
      expect(auth).toMatchObject({
        accessKeyId: AKID,
        form: 'query',
        payload: { kind: 'unsigned' },
      });
    });
  }

  it('fails when one thing changes', async () => {
    const req = await presign({
      method: 'GET',
      path: '/s3/b/a%20b.txt',
      query: { 'response-content-type': 'text/plain' },
    });
    const mutated: SigV4Request[] = [
      { ...req, rawPath: '/s3/b/a%20c.txt' },
      { ...req, query: req.query.replace('text%2Fplain', 'text%2Fhtml') },
      { ...req, method: 'PUT' },
      { ...req, headers: { ...req.headers, host: '127.0.0.1:8081' } },
      {
        ...req,
        query: req.query.replace(
          /X-Amz-Signature=([0-9a-f])/,
          (_m, c: string) => `X-Amz-Signature=${c === '0' ? '1' : '0'}`,
        ),
      },
      { ...req, query: req.query.replace('X-Amz-Expires=300', 'X-Amz-Expires=600') },
    ];
    for (const r of mutated) {
      expect((await rejection(verifyRequest(r, lookup, { now: NOW }))).code).toBe(
        'SignatureDoesNotMatch',
      );
    }
    expect((await rejection(verifyRequest(req, async () => 'other', { now: NOW }))).code).toBe(
      'SignatureDoesNotMatch',
    );
    expect((await rejection(verifyRequest(req, async () => undefined, { now: NOW }))).code).toBe(
      'InvalidAccessKeyId',
    );
  });

  it('refuses an expired URL with AccessDenied "Request has expired"', async () => {
    const req = await presign(
      { method: 'GET', path: '/s3/b/k' },
      60,
      new Date(NOW.getTime() - 61_000),
    );
    const err = await rejection(verifyRequest(req, lookup, { now: NOW }));
    expect(err).toMatchObject({
      code: 'AccessDenied',
      status: 403,
      message: 'Request has expired',
    });
    expect(err.details).toMatchObject({ 'X-Amz-Expires': '60', Expires: '2026-01-01T11:59:59Z' });
    // One second earlier it was still valid.
    await expect(
      verifyRequest(req, lookup, { now: new Date(NOW.getTime() - 1000) }),
    ).resolves.toBeTruthy();
  });

  it('refuses X-Amz-Expires beyond a week with AuthorizationQueryParametersError', async () => {
    const req = await presign({ method: 'GET', path: '/s3/b/k' }, 604_800);
    await expect(verifyRequest(req, lookup, { now: NOW })).resolves.toBeTruthy();
    const tooLong = {
      ...req,
      query: req.query.replace('X-Amz-Expires=604800', 'X-Amz-Expires=604801'),
    };
    const err = await rejection(verifyRequest(tooLong, lookup, { now: NOW }));
    expect(err).toMatchObject({ code: 'AuthorizationQueryParametersError', status: 400 });
    const zero = { ...req, query: req.query.replace('X-Amz-Expires=604800', 'X-Amz-Expires=0') };
    expect((await rejection(verifyRequest(zero, lookup, { now: NOW }))).code).toBe(
      'AuthorizationQueryParametersError',
    );
  });

  it('refuses a URL dated further in the future than the skew', async () => {
    const req = await presign(
      { method: 'GET', path: '/s3/b/k' },
      3600,
      new Date(NOW.getTime() + 16 * 60_000),
    );
    const err = await rejection(verifyRequest(req, lookup, { now: NOW }));
    expect(err.code).toBe('AccessDenied');
    const near = await presign(
      { method: 'GET', path: '/s3/b/k' },
      3600,
      new Date(NOW.getTime() + 60_000),
    );
    await expect(verifyRequest(near, lookup, { now: NOW })).resolves.toBeTruthy();
  });

  it('refuses missing or malformed parameters with AuthorizationQueryParametersError', async () => {
    const req = await presign({ method: 'GET', path: '/s3/b/k' });
    for (const query of [
      req.query.replace(/&?X-Amz-Signature=[0-9a-f]+/, ''),
      req.query.replace(/X-Amz-Date=[0-9TZ]+/, 'X-Amz-Date=2026-01-01'),
      req.query.replace('AWS4-HMAC-SHA256', 'AWS4-ECDSA-P256-SHA256'),
      req.query.replace('X-Amz-Expires=300', 'X-Amz-Expires=soon'),
    ]) {
      expect((await rejection(verifyRequest({ ...req, query }, lookup, { now: NOW }))).code).toBe(
        'AuthorizationQueryParametersError',
      );
    }
  });

  it('binds the signed headers the client must send', async () => {
    const req = await presign({
      method: 'PUT',
      path: '/s3/b/k.png',
      headers: { 'content-type': 'image/png' },
    });
    await expect(verifyRequest(req, lookup, { now: NOW })).resolves.toBeTruthy();
    const { 'content-type': _ct, ...without } = req.headers;
    expect(
      (await rejection(verifyRequest({ ...req, headers: without }, lookup, { now: NOW }))).code,
    ).toBe('SignatureDoesNotMatch');
  });
});

describe('presigned URLs from @aws-sdk/s3-request-presigner', () => {
  const client = new S3Client({
    endpoint: 'http://127.0.0.1:8080/s3',
    forcePathStyle: true,
    region: 'us-east-1',
    credentials,
  });

  function fromUrl(
    method: string,
    url: string,
    headers: Record<string, string> = {},
  ): SigV4Request {
    const u = new URL(url);
    return {
      method,
      rawPath: u.pathname,
      query: u.search.slice(1),
      headers: { host: u.host, ...headers },
    };
  }

  for (const key of [
    'plain.txt',
    'dir/a b.txt',
    'ünï/cødé.txt',
    'x+y~z%w=v&u.bin',
    "it's (1)!*.txt",
  ]) {
    it(`verifies GetObject for key ${JSON.stringify(key)}`, async () => {
      const url = await getSignedUrl(
        client,
        new GetObjectCommand({ Bucket: 'my-bucket', Key: key }),
        {
          expiresIn: 60,
        },
      );
      expect(url.startsWith('http://127.0.0.1:8080/s3/my-bucket/')).toBe(true);
      const auth = await verifyRequest(fromUrl('GET', url), lookup, {
        now: new Date(),
        region: 'us-east-1',
      });
      expect(auth).toMatchObject({
        accessKeyId: AKID,
        form: 'query',
        payload: { kind: 'unsigned' },
      });
      const tampered = fromUrl('GET', url.replace('/my-bucket/', '/my-bucket/x'));
      expect((await rejection(verifyRequest(tampered, lookup, { now: new Date() }))).code).toBe(
        'SignatureDoesNotMatch',
      );
    });
  }

  it('verifies PutObject with a ContentType', async () => {
    const url = await getSignedUrl(
      client,
      new PutObjectCommand({ Bucket: 'my-bucket', Key: 'up/ löad.png', ContentType: 'image/png' }),
      { expiresIn: 60 },
    );
    const req = fromUrl('PUT', url, { 'content-type': 'image/png', 'content-length': '3' });
    const auth = await verifyRequest(req, lookup, { now: new Date() });
    expect(auth.form).toBe('query');
    expect(
      (await rejection(verifyRequest({ ...req, method: 'GET' }, lookup, { now: new Date() }))).code,
    ).toBe('SignatureDoesNotMatch');
  });
});

describe('presignUrl against @smithy/signature-v4', () => {
  it('produces the same signature for the same request', async () => {
    const out = presignUrl({
      method: 'PUT',
      baseUrl: `http://${HOST}`,
      path: '/s3/my-bucket/a%20b/%C3%BC.png',
      accessKeyId: AKID,
      secret: SECRET,
      region: 'us-east-1',
      expiresInS: 900,
      now: NOW,
      signedHeaders: { 'content-type': 'image/png' },
    });
    const theirs = await signer.presign(
      smithyRequest({
        method: 'PUT',
        path: '/s3/my-bucket/a%20b/%C3%BC.png',
        headers: { 'content-type': 'image/png', 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD' },
      }),
      {
        signingDate: NOW,
        expiresIn: 900,
        unsignableHeaders: new Set(['x-amz-content-sha256']),
        unhoistableHeaders: new Set(['x-amz-content-sha256']),
      },
    );
    const mine = new URL(out.url).searchParams;
    expect(mine.get('X-Amz-Signature')).toBe(theirs.query?.['X-Amz-Signature']);
    expect(mine.get('X-Amz-SignedHeaders')).toBe('content-type;host');
  });
});

describe("AWS's published examples", () => {
  const awsKey = 'AKIAIOSFODNN7EXAMPLE';
  const awsSecret = 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY';
  const awsLookup = async (id: string) => (id === awsKey ? awsSecret : undefined);
  const at = new Date('2013-05-24T00:00:00Z');
  const cred = `Credential=${awsKey}/20130524/us-east-1/s3/aws4_request`;
  const empty = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';

  it('GET Object', async () => {
    const req: SigV4Request = {
      method: 'GET',
      rawPath: '/test.txt',
      query: '',
      headers: {
        host: 'examplebucket.s3.amazonaws.com',
        range: 'bytes=0-9',
        'x-amz-content-sha256': empty,
        'x-amz-date': '20130524T000000Z',
        authorization: `AWS4-HMAC-SHA256 ${cred},SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41`,
      },
    };
    await expect(verifyRequest(req, awsLookup, { now: at })).resolves.toMatchObject({
      accessKeyId: awsKey,
    });
  });

  it('PUT Object', async () => {
    const req: SigV4Request = {
      method: 'PUT',
      rawPath: '/test%24file.text',
      query: '',
      headers: {
        host: 'examplebucket.s3.amazonaws.com',
        date: 'Fri, 24 May 2013 00:00:00 GMT',
        'x-amz-date': '20130524T000000Z',
        'x-amz-storage-class': 'REDUCED_REDUNDANCY',
        'x-amz-content-sha256': '44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072',
        authorization: `AWS4-HMAC-SHA256 ${cred},SignedHeaders=date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class,Signature=98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd`,
      },
    };
    await expect(verifyRequest(req, awsLookup, { now: at })).resolves.toBeTruthy();
  });

  it('GET Bucket lifecycle and list objects', async () => {
    const base = {
      method: 'GET',
      rawPath: '/',
      headers: {
        host: 'examplebucket.s3.amazonaws.com',
        'x-amz-content-sha256': empty,
        'x-amz-date': '20130524T000000Z',
      },
    };
    const sign = (signature: string) =>
      `AWS4-HMAC-SHA256 ${cred},SignedHeaders=host;x-amz-content-sha256;x-amz-date,Signature=${signature}`;
    await expect(
      verifyRequest(
        {
          ...base,
          query: 'lifecycle',
          headers: {
            ...base.headers,
            authorization: sign('fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543'),
          },
        },
        awsLookup,
        { now: at },
      ),
    ).resolves.toBeTruthy();
    await expect(
      verifyRequest(
        {
          ...base,
          query: 'max-keys=2&prefix=J',
          headers: {
            ...base.headers,
            authorization: sign('34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7'),
          },
        },
        awsLookup,
        { now: at },
      ),
    ).resolves.toBeTruthy();
  });

  it('presigned GET Object', async () => {
    const req: SigV4Request = {
      method: 'GET',
      rawPath: '/test.txt',
      query:
        'X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404',
      headers: { host: 'examplebucket.s3.amazonaws.com' },
    };
    await expect(
      verifyRequest(req, awsLookup, { now: new Date('2013-05-24T12:00:00Z') }),
    ).resolves.toBeTruthy();
    const err = await rejection(
      verifyRequest(req, awsLookup, { now: new Date('2013-05-25T00:00:01Z') }),
    );
    expect(err.message).toBe('Request has expired');
  });
});
