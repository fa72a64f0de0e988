import { describe, expect, it } from 'vitest';
import {
  canonicalHeaders,
  canonicalRequest,
  formatDatetime,
  sha256Hex,
  signingKey,
  stringToSign,
} from './canonical.js';
import { SigV4Error } from './errors.js';
import { canonicalQuery, canonicalUri, decodePath, encodeKeyPath, parseQuery } from './uri.js';

describe('canonical URI', () => {
  it('re-encodes each segment once with AWS rules', () => {
    expect(canonicalUri('/s3/b/a%20b.txt')).toBe('/s3/b/a%20b.txt');
    expect(canonicalUri('/s3/b/%7euser/%c3%bc')).toBe('/s3/b/~user/%C3%BC');
    expect(canonicalUri('/s3/b/a$b(1)!.txt')).toBe('/s3/b/a%24b%281%29%21.txt');
    expect(canonicalUri('/s3/b/x%2By')).toBe('/s3/b/x%2By');
    expect(canonicalUri('')).toBe('/');
  });

  it('keeps an escaped slash escaped and does not normalize dots or empty segments', () => {
    expect(canonicalUri('/s3/b/a%2Fb')).toBe('/s3/b/a%2Fb');
    expect(canonicalUri('/s3/b//./../c/')).toBe('/s3/b//./../c/');
  });

  it('reads a raw + as a space, as S3 does', () => {
    expect(canonicalUri('/s3/b/a+b')).toBe('/s3/b/a%20b');
    expect(decodePath('/s3/b/a+b%2Bc%20d')).toBe('/s3/b/a b+c d');
  });

  it('takes non-ASCII request-line bytes as Node hands them over (latin1)', () => {
    const raw = Buffer.from('/s3/b/ü', 'utf8').toString('latin1');
    expect(canonicalUri(raw)).toBe('/s3/b/%C3%BC');
    expect(decodePath(raw)).toBe('/s3/b/ü');
  });

  it('refuses malformed escapes and invalid UTF-8 where text is needed', () => {
    expect(() => canonicalUri('/s3/b/%zz')).toThrow(SigV4Error);
    expect(() => canonicalUri('/s3/b/%4')).toThrow(SigV4Error);
    expect(canonicalUri('/s3/b/%ff')).toBe('/s3/b/%FF');
    expect(() => decodePath('/s3/b/%ff')).toThrow(SigV4Error);
  });

  it('encodes keys the way AWS SDKs do', () => {
    expect(encodeKeyPath("ünï/cødé +~%=&'.txt")).toBe(
      '%C3%BCn%C3%AF/c%C3%B8d%C3%A9%20%2B~%25%3D%26%27.txt',
    );
  });
});

describe('canonical query', () => {
  it('sorts by encoded name then value and encodes with AWS rules', () => {
    expect(canonicalQuery('prefix=a+b/&list-type=2&delimiter=/')).toBe(
      'delimiter=%2F&list-type=2&prefix=a%20b%2F',
    );
    expect(canonicalQuery('b=2&a=2&a=1&uploads')).toBe('a=1&a=2&b=2&uploads=');
    expect(canonicalQuery('Z=1&a=1&_=1')).toBe('Z=1&_=1&a=1');
    expect(canonicalQuery('X-Amz-Signature=abc&x=1', ['X-Amz-Signature'])).toBe('x=1');
    expect(canonicalQuery('')).toBe('');
  });

  it('parses to decoded pairs', () => {
    expect(parseQuery('prefix=a+b%2Fc&uploads&&k=%C3%BC')).toEqual([
      ['prefix', 'a b/c'],
      ['uploads', ''],
      ['k', 'ü'],
    ]);
  });
});

describe('canonical request', () => {
  it('trims header values and collapses inner whitespace', () => {
    expect(canonicalHeaders({ a: '  x   y\t z ', b: ['1', '2'] }, ['a', 'b', 'c'])).toBe(
      'a:x y z\nb:1,2\nc:\n',
    );
  });

  it("reproduces AWS's GET Object example", () => {
    const canonical = canonicalRequest({
      method: 'GET',
      rawPath: '/test.txt',
      query: '',
      headers: {
        host: 'examplebucket.s3.amazonaws.com',
        range: 'bytes=0-9',
        'x-amz-content-sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        'x-amz-date': '20130524T000000Z',
      },
      signedHeaders: ['host', 'range', 'x-amz-content-sha256', 'x-amz-date'],
      payloadHash: 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
    });
    expect(canonical).toBe(
      [
        'GET',
        '/test.txt',
        '',
        'host:examplebucket.s3.amazonaws.com',
        'range:bytes=0-9',
        'x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
        'x-amz-date:20130524T000000Z',
        '',
        'host;range;x-amz-content-sha256;x-amz-date',
        'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
      ].join('\n'),
    );
    expect(sha256Hex(canonical)).toBe(
      '7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972',
    );
    expect(
      stringToSign(
        '20130524T000000Z',
        '20130524/us-east-1/s3/aws4_request',
        '7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972',
      ),
    ).toBe(
      'AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972',
    );
  });

  it('derives and caches signing keys per secret, date and region', () => {
    const a = signingKey('secret', '20260101', 'us-east-1');
    expect(signingKey('secret', '20260101', 'us-east-1')).toBe(a);
    expect(signingKey('secret', '20260102', 'us-east-1').equals(a)).toBe(false);
    expect(signingKey('secret', '20260101', 'eu-west-1').equals(a)).toBe(false);
    expect(signingKey('secret2', '20260101', 'us-east-1').equals(a)).toBe(false);
  });

  it('formats times in ISO 8601 basic format', () => {
    expect(formatDatetime(new Date('2026-01-02T03:04:05.678Z'))).toBe('20260102T030405Z');
  });
});
