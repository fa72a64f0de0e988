import { createHash } from 'node:crypto';
import { describe, expect, it, vi } from 'vitest';
import {
  Checksummer,
  checksumAlgorithmOf,
  computeChecksum,
  crc32,
  crc32c,
  crc64nvme,
  verifyChecksums,
} from './checksum.js';
import { SigV4Error } from './errors.js';

const CHECK = Buffer.from('123456789');
const b64 = (hex: string) => Buffer.from(hex, 'hex').toString('base64');

describe('checksums', () => {
  it('match the standard check values', () => {
    expect(crc32(CHECK).toString(16)).toBe('cbf43926');
    expect(crc32c(CHECK).toString(16)).toBe('e3069283');
    expect(
      crc64nvme(CHECK)
        .map((h) => h.toString(16).padStart(8, '0'))
        .join(''),
    ).toBe('ae8b14860a799888');
    expect(computeChecksum('crc32', CHECK)).toBe(b64('cbf43926'));
    expect(computeChecksum('crc32c', CHECK)).toBe(b64('e3069283'));
    expect(computeChecksum('crc64nvme', CHECK)).toBe(b64('ae8b14860a799888'));
    expect(computeChecksum('sha1', CHECK)).toBe(createHash('sha1').update(CHECK).digest('base64'));
    expect(computeChecksum('sha256', CHECK)).toBe(
      createHash('sha256').update(CHECK).digest('base64'),
    );
    // S3's documented value for an empty body.
    expect(computeChecksum('crc32', Buffer.alloc(0))).toBe('AAAAAA==');
  });

  it('are the same computed in pieces', () => {
    const data = Buffer.from('the quick brown fox jumps over the lazy dog'.repeat(100));
    const summer = new Checksummer(['crc32', 'crc32c', 'crc64nvme', 'sha1', 'sha256']);
    for (let i = 0; i < data.length; i += 7) summer.update(data.subarray(i, i + 7));
    for (const algorithm of summer.algorithms) {
      expect(summer.digest(algorithm)).toBe(computeChecksum(algorithm, data));
    }
  });

  it('fall back to a table CRC-32 where zlib.crc32 is missing', async () => {
    vi.resetModules();
    vi.doMock('node:zlib', () => ({ default: {} }));
    const fallback = await import('./checksum.js');
    expect(fallback.crc32(CHECK).toString(16)).toBe('cbf43926');
    expect(
      fallback.crc32(CHECK.subarray(4), fallback.crc32(CHECK.subarray(0, 4))).toString(16),
    ).toBe('cbf43926');
    vi.doUnmock('node:zlib');
    vi.resetModules();
  });

  it('names the algorithms of x-amz-checksum-* fields only', () => {
    expect(checksumAlgorithmOf('x-amz-checksum-crc32c')).toBe('crc32c');
    expect(checksumAlgorithmOf('X-Amz-Checksum-SHA256')).toBe('sha256');
    expect(checksumAlgorithmOf('x-amz-checksum-type')).toBeUndefined();
    expect(checksumAlgorithmOf('content-md5')).toBeUndefined();
  });

  it('verify headers or trailers against data', () => {
    const data = Buffer.from('pier');
    for (const algorithm of ['crc32', 'crc32c', 'crc64nvme', 'sha1', 'sha256'] as const) {
      const field = `x-amz-checksum-${algorithm}`;
      expect(() =>
        verifyChecksums({ [field]: computeChecksum(algorithm, data) }, data),
      ).not.toThrow();
      const wrong = computeChecksum(algorithm, Buffer.from('Pier'));
      const err = (() => {
        try {
          verifyChecksums({ [field]: wrong }, data);
        } catch (e) {
          return e;
        }
      })();
      expect(err).toBeInstanceOf(SigV4Error);
      expect(err).toMatchObject({ code: 'BadDigest', status: 400 });
    }
    expect(() => verifyChecksums({ 'x-amz-checksum-crc32': 'AAAA' }, data)).toThrow(/invalid/);
    expect(() =>
      verifyChecksums(
        {
          'x-amz-checksum-crc32': computeChecksum('crc32', data),
          'x-amz-checksum-sha1': computeChecksum('sha1', data),
        },
        data,
      ),
    ).toThrow(/single/);
    expect(() => verifyChecksums({ 'x-amz-checksum-type': 'FULL_OBJECT' }, data)).not.toThrow();
  });
});
