import { execFileSync } from 'node:child_process';
import { createPrivateKey, createPublicKey } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  loadHostPrivateKey,
  loadOrCreateHostKey,
  openSshPublicKeyFromEd25519,
} from './host-key.js';
import { parseSshPublicKey } from './public-key.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'pier-host-key-test-'));
  dirs.push(dir);
  return dir;
}

describe('loadOrCreateHostKey', () => {
  it('creates the key files with the right modes', async () => {
    const dataDir = join(tempDir(), 'data'); // not there yet: it must be created
    const key = await loadOrCreateHostKey(dataDir);

    const privatePath = join(dataDir, 'ssh_host_ed25519_key');
    const publicPath = `${privatePath}.pub`;
    expect(statSync(privatePath).mode & 0o777).toBe(0o600);
    expect(statSync(publicPath).mode & 0o777).toBe(0o644);

    const pub = readFileSync(publicPath, 'utf8');
    expect(pub).toMatch(/^ssh-ed25519 \S+ pier-gateway\n$/);
    expect(key.publicKey).toBe(pub.trim());

    // The private key on disk is the half of the public key we published.
    const privateKey = createPrivateKey(readFileSync(privatePath, 'utf8'));
    const { x } = createPublicKey(privateKey).export({ format: 'jwk' });
    expect(openSshPublicKeyFromEd25519(Buffer.from(x as string, 'base64url'), 'pier-gateway')).toBe(
      key.publicKey,
    );
  });

  it('returns the same key on the second call', async () => {
    const dataDir = tempDir();
    const first = await loadOrCreateHostKey(dataDir);
    const privateBefore = readFileSync(join(dataDir, 'ssh_host_ed25519_key'), 'utf8');
    const second = await loadOrCreateHostKey(dataDir);
    expect(second).toEqual(first);
    expect(readFileSync(join(dataDir, 'ssh_host_ed25519_key'), 'utf8')).toBe(privateBefore);
  });

  it('writes a .pub file that parses and matches ssh-keygen', async () => {
    const dataDir = tempDir();
    const key = await loadOrCreateHostKey(dataDir);
    const publicPath = join(dataDir, 'ssh_host_ed25519_key.pub');
    const parsed = parseSshPublicKey(readFileSync(publicPath, 'utf8'));
    expect(parsed).toMatchObject({ type: 'ssh-ed25519', bits: 256, comment: 'pier-gateway' });
    expect(parsed.fingerprint).toBe(key.fingerprint);
    const report = execFileSync('ssh-keygen', ['-lf', publicPath], { encoding: 'utf8' });
    expect(report.split(' ')[1]).toBe(key.fingerprint);
  });
});

describe('openSshPublicKeyFromEd25519', () => {
  it('formats a raw key as an OpenSSH line', () => {
    const line = openSshPublicKeyFromEd25519(Buffer.alloc(32, 7), 'host');
    expect(line).toMatch(/^ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI\S+ host$/);
    expect(parseSshPublicKey(line).comment).toBe('host');
    expect(openSshPublicKeyFromEd25519(Buffer.alloc(32, 7))).toBe(line.replace(/ host$/, ''));
  });

  it('refuses a key that is not 32 bytes', () => {
    expect(() => openSshPublicKeyFromEd25519(Buffer.alloc(31))).toThrow(RangeError);
  });
});

describe('loadHostPrivateKey', () => {
  it('hands out the kept key in OpenSSH format, which ssh-keygen reads as the same key', async () => {
    const dataDir = tempDir();
    const kept = await loadOrCreateHostKey(dataDir);
    const { privateKey, publicKey } = await loadHostPrivateKey(dataDir);
    expect(publicKey).toBe(kept.publicKey);
    expect(privateKey).toMatch(
      /^-----BEGIN OPENSSH PRIVATE KEY-----\n[\s\S]+\n-----END OPENSSH PRIVATE KEY-----\n$/,
    );
    const file = join(dataDir, 'exported');
    writeFileSync(file, privateKey, { mode: 0o600 });
    const derived = execFileSync('ssh-keygen', ['-y', '-f', file], { encoding: 'utf8' }).trim();
    expect(derived.split(' ').slice(0, 2)).toEqual(kept.publicKey.split(' ').slice(0, 2));
  });

  it('refuses a private key that is not the published one’s half', async () => {
    const dataDir = tempDir();
    await loadOrCreateHostKey(dataDir);
    const other = tempDir();
    await loadOrCreateHostKey(other);
    writeFileSync(
      join(dataDir, 'ssh_host_ed25519_key'),
      readFileSync(join(other, 'ssh_host_ed25519_key')),
    );
    await expect(loadHostPrivateKey(dataDir)).rejects.toThrow(/not the private half/);
  });
});
