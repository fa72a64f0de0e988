/** Console passwords, stored as scrypt hashes with a per-password salt. */
import { randomBytes, scrypt as scryptCb, timingSafeEqual } from 'node:crypto';
import { promisify } from 'node:util';

const scrypt = promisify(scryptCb) as (pw: string, salt: Buffer, len: number) => Promise<Buffer>;

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const hash = await scrypt(password, salt, 32);
  return `scrypt$${salt.toString('base64')}$${hash.toString('base64')}`;
}

export async function verifyPassword(password: string, stored: string | null): Promise<boolean> {
  // Without a stored hash we still spend the same work, so timing does not tell.
  const [, saltB64, hashB64] = (stored ?? 'scrypt$AAAAAAAAAAAAAAAAAAAAAA==$').split('$');
  const expected = Buffer.from(hashB64 ?? '', 'base64');
  const actual = await scrypt(password, Buffer.from(saltB64 ?? '', 'base64'), 32);
  return stored !== null && expected.length === 32 && timingSafeEqual(actual, expected);
}
