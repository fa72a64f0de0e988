import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { SecretBox, loadMasterKey } from './secret-box.js';

describe('SecretBox', () => {
  const box = new SecretBox(randomBytes(32));

  it('round-trips a value under its binding only', () => {
    const sealed = box.seal('hunter2', 'secret:app-1:PASSWORD');
    expect(sealed.nonce).toHaveLength(12);
    expect(sealed.ciphertext.includes(Buffer.from('hunter2'))).toBe(false);
    expect(box.open(sealed, 'secret:app-1:PASSWORD')).toBe('hunter2');
    expect(() => box.open(sealed, 'secret:app-2:PASSWORD')).toThrow();
  });

  it('detects tampering', () => {
    const sealed = box.seal('value', 'b');
    sealed.ciphertext[0]! ^= 1;
    expect(() => box.open(sealed, 'b')).toThrow();
  });

  it('uses a fresh nonce each time', () => {
    expect(box.seal('same', 'b').nonce.equals(box.seal('same', 'b').nonce)).toBe(false);
  });

  it('generates the master key once, with mode 0600', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'pier-key-'));
    onTestFinished(() => rm(dir, { recursive: true, force: true }));
    const key = await loadMasterKey(dir);
    expect(key).toHaveLength(32);
    expect((await stat(path.join(dir, 'master.key'))).mode & 0o777).toBe(0o600);
    expect((await loadMasterKey(dir)).equals(key)).toBe(true);
    expect((await readFile(path.join(dir, 'master.key'), 'utf8')).trim()).toBe(
      key.toString('base64'),
    );
    await expect(loadMasterKey(dir, 'c2hvcnQ=')).rejects.toThrow('32 bytes');
  });
});
