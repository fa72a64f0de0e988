/**
 * Encryption at rest for customer secrets: AES-256-GCM under the platform's master key.
 * Each value gets a fresh 96-bit nonce, and the associated data binds the ciphertext to
 * where it belongs, so a ciphertext copied to another app or name does not decrypt.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';

export interface Sealed {
  nonce: Buffer;
  ciphertext: Buffer;
}

export class SecretBox {
  private readonly key: Buffer;

  constructor(key: Buffer) {
    if (key.length !== 32) throw new Error('the master key must be 32 bytes');
    this.key = key;
  }

  seal(plaintext: string, binding: string): Sealed {
    const nonce = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, nonce);
    cipher.setAAD(Buffer.from(binding));
    const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return { nonce, ciphertext: Buffer.concat([body, cipher.getAuthTag()]) };
  }

  open(sealed: Sealed, binding: string): string {
    const tag = sealed.ciphertext.subarray(sealed.ciphertext.length - 16);
    const body = sealed.ciphertext.subarray(0, sealed.ciphertext.length - 16);
    const decipher = createDecipheriv('aes-256-gcm', this.key, sealed.nonce);
    decipher.setAAD(Buffer.from(binding));
    decipher.setAuthTag(tag);
    return Buffer.concat([decipher.update(body), decipher.final()]).toString('utf8');
  }
}

/**
 * The master key: from config (base64 of 32 bytes), else DATA_DIR/master.key, which is
 * generated with mode 0600 on first start. Losing it makes every secret unreadable.
 */
export async function loadMasterKey(dataDir: string, configured?: string): Promise<Buffer> {
  if (configured) {
    const key = Buffer.from(configured, 'base64');
    if (key.length !== 32) throw new Error('PIER_MASTER_KEY must be the base64 of 32 bytes');
    return key;
  }
  const file = path.join(dataDir, 'master.key');
  if (existsSync(file)) {
    const key = Buffer.from((await readFile(file, 'utf8')).trim(), 'base64');
    if (key.length !== 32) throw new Error(`${file} does not hold a 32-byte base64 key`);
    return key;
  }
  const key = randomBytes(32);
  await writeFile(file, key.toString('base64') + '\n', { mode: 0o600, flag: 'wx' });
  await chmod(file, 0o600);
  return key;
}
