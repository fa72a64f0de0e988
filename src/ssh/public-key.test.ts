import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseSshPublicKey, SshKeyError } from './public-key.js';

const dir = mkdtempSync(join(tmpdir(), 'pier-ssh-key-test-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface GeneratedKey {
  line: string;
  bits: number;
  fingerprint: string;
}

const generated = new Map<string, GeneratedKey>();

/** A real key from ssh-keygen, with the size and fingerprint ssh-keygen itself reports. */
function keygen(type: string, bits: number): GeneratedKey {
  const name = `${type}-${bits}`;
  const cached = generated.get(name);
  if (cached) return cached;
  const path = join(dir, name);
  execFileSync('ssh-keygen', [
    '-t',
    type,
    '-b',
    String(bits),
    '-N',
    '',
    '-C',
    'me@laptop',
    '-f',
    path,
    '-q',
  ]);
  // `ssh-keygen -lf` prints e.g. "256 SHA256:abc… me@laptop (ED25519)".
  const [reportedBits, fingerprint] = execFileSync('ssh-keygen', ['-lf', `${path}.pub`], {
    encoding: 'utf8',
  }).split(' ');
  const key = {
    line: readFileSync(`${path}.pub`, 'utf8'),
    bits: Number(reportedBits),
    fingerprint: fingerprint as string,
  };
  generated.set(name, key);
  return key;
}

function wireString(value: Buffer | string): Buffer {
  const bytes = typeof value === 'string' ? Buffer.from(value) : value;
  const length = Buffer.alloc(4);
  length.writeUInt32BE(bytes.length, 0);
  return Buffer.concat([length, bytes]);
}

function blobOf(line: string): Buffer {
  return Buffer.from(line.split(' ')[1] as string, 'base64');
}

function expectRejected(text: string, message: RegExp): void {
  expect(() => parseSshPublicKey(text)).toThrow(SshKeyError);
  expect(() => parseSshPublicKey(text)).toThrow(message);
}

describe('parseSshPublicKey', () => {
  const cases: [string, string, number][] = [
    ['ssh-ed25519', 'ed25519', 256],
    ['ecdsa-sha2-nistp256', 'ecdsa', 256],
    ['ecdsa-sha2-nistp384', 'ecdsa', 384],
    ['ecdsa-sha2-nistp521', 'ecdsa', 521],
    ['ssh-rsa', 'rsa', 2048],
  ];

  it.each(cases)(
    'accepts a real %s key with the fingerprint ssh-keygen reports',
    (type, keyType, bits) => {
      const key = keygen(keyType, bits);
      const parsed = parseSshPublicKey(key.line);
      expect(parsed.type).toBe(type);
      expect(parsed.bits).toBe(bits);
      expect(parsed.bits).toBe(key.bits);
      expect(parsed.fingerprint).toBe(key.fingerprint);
      expect(parsed.comment).toBe('me@laptop');
      expect(parsed.normalized).toBe(key.line.trim());
    },
  );

  it('refuses a 1024-bit RSA key, naming its size', () => {
    const key = keygen('rsa', 1024);
    expectRejected(key.line, /^RSA keys must have at least 2048 bits \(this one has 1024\)\.$/);
  });

  it('tidies whitespace and keeps a comment with spaces', () => {
    const key = keygen('ed25519', 256);
    const [type, base64] = key.line.split(' ');
    const parsed = parseSshPublicKey(`\n  ${type}\t ${base64}   my  work laptop \n`);
    expect(parsed.comment).toBe('my  work laptop');
    expect(parsed.normalized).toBe(`${type} ${base64} my  work laptop`);
  });

  it('leaves the comment out when there is none', () => {
    const [type, base64] = keygen('ed25519', 256).line.split(' ');
    const parsed = parseSshPublicKey(`${type} ${base64}`);
    expect(parsed.comment).toBeUndefined();
    expect(parsed).not.toHaveProperty('comment');
    expect(parsed.normalized).toBe(`${type} ${base64}`);
  });

  it('refuses empty input', () => {
    expectRejected('', /empty/);
    expectRejected('   \n\t', /empty/);
  });

  it('refuses more than one line', () => {
    const key = keygen('ed25519', 256).line.trim();
    expectRejected(`${key}\n${key}`, /single line/);
  });

  it('refuses a key without data', () => {
    expectRejected('ssh-ed25519', /missing/);
  });

  it('refuses invalid base64', () => {
    expectRejected('ssh-ed25519 not*base64!! me@laptop', /not valid base64/);
    // Buffer.from would silently drop the trailing garbage; the strict decoder must not.
    const [type, base64] = keygen('ed25519', 256).line.split(' ');
    expectRejected(`${type} ${base64}A`, /not valid base64/);
    expectRejected(`${type} ${(base64 as string).slice(0, -4)}`, /not valid base64|truncated/);
  });

  it('refuses a blob whose inner type differs from the outer one', () => {
    const blob = blobOf(keygen('ed25519', 256).line);
    expectRejected(`ssh-rsa ${blob.toString('base64')}`, /does not match the type ssh-ed25519/);
  });

  it('refuses a truncated blob', () => {
    const blob = blobOf(keygen('ed25519', 256).line);
    expectRejected(`ssh-ed25519 ${blob.subarray(0, -1).toString('base64')}`, /truncated/);
    const rsa = blobOf(keygen('rsa', 2048).line);
    expectRejected(`ssh-rsa ${rsa.subarray(0, 100).toString('base64')}`, /truncated/);
  });

  it('refuses trailing bytes after the key', () => {
    const blob = Buffer.concat([blobOf(keygen('ecdsa', 256).line), Buffer.from([0, 0])]);
    expectRejected(`ecdsa-sha2-nistp256 ${blob.toString('base64')}`, /2 unexpected trailing bytes/);
  });

  it('refuses an ed25519 key of the wrong length', () => {
    const blob = Buffer.concat([wireString('ssh-ed25519'), wireString(Buffer.alloc(31, 1))]);
    expectRejected(`ssh-ed25519 ${blob.toString('base64')}`, /exactly 32 bytes/);
  });

  it('refuses an ecdsa point that is not on the curve', () => {
    // (1, 1) is not on P-256: 1 ≠ 1 − 3 + b.
    const x = Buffer.alloc(32);
    const y = Buffer.alloc(32);
    x[31] = 1;
    y[31] = 1;
    const point = Buffer.concat([Buffer.from([4]), x, y]);
    const blob = Buffer.concat([
      wireString('ecdsa-sha2-nistp256'),
      wireString('nistp256'),
      wireString(point),
    ]);
    expectRejected(`ecdsa-sha2-nistp256 ${blob.toString('base64')}`, /not on the nistp256 curve/);
  });

  it('refuses a real ecdsa key with one bit of its point flipped', () => {
    const blob = Buffer.from(blobOf(keygen('ecdsa', 384).line));
    blob[blob.length - 1] = (blob[blob.length - 1] as number) ^ 1;
    expectRejected(`ecdsa-sha2-nistp384 ${blob.toString('base64')}`, /not on the nistp384 curve/);
  });

  it('refuses an ecdsa key whose curve does not match its type', () => {
    const blob = blobOf(keygen('ecdsa', 256).line);
    const renamed = Buffer.concat([wireString('ecdsa-sha2-nistp384'), blob.subarray(4 + 19)]);
    expectRejected(`ecdsa-sha2-nistp384 ${renamed.toString('base64')}`, /names curve nistp256/);
  });

  it('refuses a compressed ecdsa point', () => {
    const x = blobOf(keygen('ecdsa', 256).line).subarray(-64, -32);
    const blob = Buffer.concat([
      wireString('ecdsa-sha2-nistp256'),
      wireString('nistp256'),
      wireString(Buffer.concat([Buffer.from([2]), x])),
    ]);
    expectRejected(`ecdsa-sha2-nistp256 ${blob.toString('base64')}`, /uncompressed/);
  });

  it('refuses an RSA key with a bogus exponent', () => {
    const rsa = blobOf(keygen('rsa', 2048).line);
    const e = wireString(Buffer.from([0]));
    const rest = rsa.subarray(4 + 7 + 4 + 3); // type, then the usual 3-byte exponent 65537
    const blob = Buffer.concat([wireString('ssh-rsa'), e, rest]);
    expectRejected(`ssh-rsa ${blob.toString('base64')}`, /exponent is not valid/);
  });

  it('refuses ssh-dss keys', () => {
    const blob = Buffer.concat([wireString('ssh-dss'), wireString(Buffer.alloc(128, 1))]);
    expectRejected(`ssh-dss ${blob.toString('base64')} old@box`, /DSA keys \(ssh-dss\)/);
  });

  it('refuses certificates, unknown types and options prefixes', () => {
    const [, base64] = keygen('ed25519', 256).line.split(' ');
    expectRejected(`ssh-ed25519-cert-v01@openssh.com ${base64}`, /certificates/);
    expectRejected(`foo-bar ${base64}`, /Unsupported key type "foo-bar"/);
    expectRejected(`no-pty ssh-ed25519 ${base64}`, /Options/);
    expectRejected(`command="echo hi" ssh-ed25519 ${base64}`, /Options/);
  });

  it('refuses control characters in the comment', () => {
    const [type, base64] = keygen('ed25519', 256).line.split(' ');
    expectRejected(`${type} ${base64} evil\u0007bell`, /control characters/);
  });
});
