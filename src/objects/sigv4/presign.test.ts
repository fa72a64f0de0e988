import { describe, expect, it } from 'vitest';
import { SigV4Error } from './errors.js';
import { presignUrl, type PresignInput } from './presign.js';
import type { SigV4Request } from './types.js';
import { encodeKeyPath } from './uri.js';
import { verifyRequest } from './verify.js';

const NOW = new Date('2026-03-04T05:06:07Z');
const lookup = async (id: string) => (id === 'AKIDPRESIGN' ? 'presign-secret' : undefined);
const input: PresignInput = {
  method: 'PUT',
  baseUrl: 'http://127.0.0.1:8080',
  path: `/s3/photos/${encodeKeyPath('2026/ünï cødé+1.png')}`,
  accessKeyId: 'AKIDPRESIGN',
  secret: 'presign-secret',
  region: 'us-east-1',
  expiresInS: 600,
  now: NOW,
  signedHeaders: { 'Content-Type': 'image/png' },
};

/** What the server sees when a client follows the URL and sends the required headers. */
function request(url: string, method: string, headers: Record<string, string>): SigV4Request {
  const u = new URL(url);
  return {
    method,
    rawPath: u.pathname,
    query: u.search.slice(1),
    headers: { host: u.host, ...headers },
  };
}

async function failure(p: Promise<unknown>): Promise<SigV4Error> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(SigV4Error);
  return err as SigV4Error;
}

describe('presignUrl', () => {
  it('looks exactly like an AWS presigned URL', () => {
    const { url, requiredHeaders } = presignUrl(input);
    expect(url).toMatch(
      /^http:\/\/127\.0\.0\.1:8080\/s3\/photos\/2026\/%C3%BCn%C3%AF%20c%C3%B8d%C3%A9%2B1\.png\?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDPRESIGN%2F20260304%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20260304T050607Z&X-Amz-Expires=600&X-Amz-SignedHeaders=content-type%3Bhost&X-Amz-Signature=[0-9a-f]{64}$/,
    );
    expect(requiredHeaders).toEqual({ 'content-type': 'image/png' });
  });

  it('round-trips through verifyRequest', async () => {
    const { url, requiredHeaders } = presignUrl(input);
    const auth = await verifyRequest(request(url, 'PUT', requiredHeaders), lookup, {
      now: new Date(NOW.getTime() + 599_000),
      region: 'us-east-1',
    });
    expect(auth).toMatchObject({
      accessKeyId: 'AKIDPRESIGN',
      form: 'query',
      signedHeaders: ['content-type', 'host'],
      payload: { kind: 'unsigned' },
    });
    const expired = await failure(
      verifyRequest(request(url, 'PUT', requiredHeaders), lookup, {
        now: new Date(NOW.getTime() + 601_000),
      }),
    );
    expect(expired.message).toBe('Request has expired');
  });

  it('fails without the required content-type, or with another one', async () => {
    const { url } = presignUrl(input);
    const variants: Array<Record<string, string>> = [{}, { 'content-type': 'text/html' }];
    for (const headers of variants) {
      const err = await failure(verifyRequest(request(url, 'PUT', headers), lookup, { now: NOW }));
      expect(err.code).toBe('SignatureDoesNotMatch');
    }
  });

  it('binds the method, the host and extra query parameters', async () => {
    const { url } = presignUrl({
      ...input,
      method: 'GET',
      signedHeaders: undefined,
      query: { 'response-content-disposition': 'attachment; filename="a b.png"' },
    });
    expect(url).toContain(
      'response-content-disposition=attachment%3B%20filename%3D%22a%20b.png%22',
    );
    await expect(
      verifyRequest(request(url, 'GET', {}), lookup, { now: NOW }),
    ).resolves.toBeTruthy();
    for (const req of [
      request(url, 'HEAD', {}),
      request(url.replace(':8080', ':8081'), 'GET', {}),
      request(url.replace('attachment', 'inline'), 'GET', {}),
    ]) {
      expect((await failure(verifyRequest(req, lookup, { now: NOW }))).code).toBe(
        'SignatureDoesNotMatch',
      );
    }
  });

  it('refuses lifetimes outside 1..604800 seconds and a host header', () => {
    expect(() => presignUrl({ ...input, expiresInS: 0 })).toThrow(RangeError);
    expect(() => presignUrl({ ...input, expiresInS: 604_801 })).toThrow(RangeError);
    expect(() => presignUrl({ ...input, expiresInS: 604_800 })).not.toThrow();
    expect(() => presignUrl({ ...input, signedHeaders: { Host: 'x' } })).toThrow(RangeError);
  });
});
