import { Writable } from 'node:stream';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import {
  REDACTED,
  isSecretParam,
  redactText,
  redactUrl,
  redactingLogger,
  serializeError,
  serializeRequest,
} from './redact.js';

const presigned =
  '/s3/media/a%20b.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256' +
  '&X-Amz-Credential=AKIAEXAMPLE%2F20260101%2Flocal%2Fs3%2Faws4_request' +
  '&X-Amz-Date=20260101T000000Z&X-Amz-Expires=900' +
  '&X-Amz-Security-Token=FQoGZXIvYXdzEXAMPLE&X-Amz-SignedHeaders=host' +
  '&X-Amz-Signature=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef';

describe('isSecretParam', () => {
  it('knows the denylisted names in any case and escaping', () => {
    for (const name of [
      'X-Amz-Signature',
      'x-amz-signature',
      'X-AMZ-CREDENTIAL',
      'X-Amz-Security-Token',
      'X%2DAmz%2DSignature',
      'signature',
      'Signature',
      'token',
      'access_token',
      'refresh-token',
      'password',
      'new_password',
      'secret',
      'client_secret',
      'key',
      'KEY',
      'api_key',
      'apiKey',
      'sig',
      'code',
    ])
      expect(isSecretParam(name), name).toBe(true);
  });

  it('leaves ordinary parameters alone', () => {
    for (const name of [
      'prefix',
      'delimiter',
      'max-keys',
      'list-type',
      'partNumber',
      'uploadId',
      'X-Amz-Date',
      'X-Amz-Expires',
      'X-Amz-SignedHeaders',
      'X-Amz-Algorithm',
      'response-content-type',
      'follow',
      'path',
      'monkey',
    ])
      expect(isSecretParam(name), name).toBe(false);
  });

  it('does not throw on a malformed escape', () => {
    expect(isSecretParam('%E0%A4%A')).toBe(false);
    expect(isSecretParam('token%')).toBe(true);
  });
});

describe('redactUrl', () => {
  it('redacts the signature, credential and security token of a presigned URL', () => {
    const out = redactUrl(presigned);
    expect(out).toBe(
      '/s3/media/a%20b.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256' +
        `&X-Amz-Credential=${REDACTED}` +
        '&X-Amz-Date=20260101T000000Z&X-Amz-Expires=900' +
        `&X-Amz-Security-Token=${REDACTED}&X-Amz-SignedHeaders=host` +
        `&X-Amz-Signature=${REDACTED}`,
    );
    expect(out).not.toContain('0123456789abcdef');
    expect(out).not.toContain('AKIAEXAMPLE');
  });

  it('redacts absolute URLs, every occurrence, and fragment parameters', () => {
    expect(redactUrl('https://x.example/cb?state=1&token=abc&token=def#access_token=ghi&y=2')).toBe(
      `https://x.example/cb?state=1&token=${REDACTED}&token=${REDACTED}#access_token=${REDACTED}&y=2`,
    );
    expect(redactUrl('/p#password=x')).toBe(`/p#password=${REDACTED}`);
  });

  it('leaves URLs without secrets exactly as they were', () => {
    for (const url of [
      '/v1/apps',
      '/v1/apps?limit=10&cursor=abc',
      '/s3/b?list-type=2&prefix=a%2Fb&delimiter=%2F',
      '/s3/b/k?uploads',
      '/s3/b/k?token',
      '/?',
      '',
      'https://x.example/a?b=c#frag',
    ])
      expect(redactUrl(url)).toBe(url);
  });

  it('redacts empty values and values holding = and escapes', () => {
    expect(redactUrl('/a?secret=&password=a=b%26c&x=1')).toBe(
      `/a?secret=${REDACTED}&password=${REDACTED}&x=1`,
    );
  });
});

describe('redactText', () => {
  it('redacts URL parameters inside free text', () => {
    const text = `GET https://cdn.example${presigned} failed: 403; retry ?sig=zzz and &Key=k1 later`;
    const out = redactText(text);
    expect(out).not.toContain('0123456789abcdef');
    expect(out).not.toContain('FQoGZXIvYXdzEXAMPLE');
    expect(out).not.toContain('zzz');
    expect(out).not.toContain('k1');
    expect(out).toContain('X-Amz-Date=20260101T000000Z');
    expect(out).toContain('failed: 403');
  });

  it('returns plain text untouched', () => {
    expect(redactText('no url here = at all')).toBe('no url here = at all');
  });
});

describe('serializers', () => {
  it('serialize a request without headers and with its URL redacted', () => {
    const out = serializeRequest({
      method: 'GET',
      url: presigned,
      headers: {
        host: 'h:1',
        authorization: 'Bearer pier_secret',
        cookie: 'sid=1',
        'x-amz-security-token': 'tok',
      },
      ip: '127.0.0.1',
      socket: { remotePort: 5555 },
    });
    expect(out).toEqual({
      method: 'GET',
      url: redactUrl(presigned),
      version: undefined,
      host: 'h:1',
      remoteAddress: '127.0.0.1',
      remotePort: 5555,
    });
    expect(JSON.stringify(out)).not.toMatch(/pier_secret|sid=1|tok"/);
  });

  it('serialize an error with URL parameters in its message and stack redacted', () => {
    const err = new Error(`fetch https://r.example/blob?X-Amz-Signature=deadbeef failed`, {
      cause: new Error('see ?token=cafebabe'),
    });
    const out = JSON.stringify(serializeError(err));
    expect(out).not.toContain('deadbeef');
    expect(out).not.toContain('cafebabe');
    expect(out).toContain(`X-Amz-Signature=${REDACTED}`);
  });

  it('serialize fields of an error and non-errors, leaving buffers as they were', () => {
    const err = Object.assign(new Error('boom'), {
      url: 'https://r.example/x?token=feedface',
      bytes: Buffer.from('ab'),
    });
    const out = serializeError(err) as Record<string, unknown>;
    expect(out.url).toBe(`https://r.example/x?token=${REDACTED}`);
    expect(Buffer.isBuffer(out.bytes)).toBe(true);
    expect(out.message).toBe('boom');
    expect(serializeError('see /a?secret=beef')).toBe(`see /a?secret=${REDACTED}`);
    expect(serializeError({ href: '/a?key=k' })).toEqual({ href: `/a?key=${REDACTED}` });
    expect(serializeError(undefined)).toBeUndefined();
  });
});

describe('redactingLogger', () => {
  it('applies the rules to req, err, url and credential fields of every line', () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _enc, done) {
        lines.push(String(chunk));
        done();
      },
    });
    const log = redactingLogger(pino({ level: 'trace' }, sink)).child({ reqId: 'r1' });
    log.info({
      req: { method: 'GET', url: '/a?token=LEAK1', headers: { authorization: 'LEAK2' } },
    });
    log.error({ err: new Error('at /b?password=LEAK3') }, 'failed');
    log.warn({
      url: '/c?secret=LEAK4',
      headers: { authorization: 'LEAK5', cookie: 'LEAK6', accept: '*/*' },
    });
    log.debug({ body: { value: 'LEAK7' }, password: 'LEAK8', token: 'LEAK9' });
    const text = lines.join('');
    expect(text).not.toContain('LEAK');
    expect(text).toContain('*/*');
    expect(text).toContain('"reqId":"r1"');
    expect(lines).toHaveLength(4);
  });
});
