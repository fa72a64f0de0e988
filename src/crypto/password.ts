/**
 * Passwords (the console's people, protected apps), stored as scrypt hashes with a
 * per-password salt.
 *
 * One scrypt costs ~60 ms of CPU. It runs on libuv's thread pool (Node's async
 * `crypto.scrypt`), never on the event loop; but that pool has only four threads and
 * also does the server's file and DNS work, so a flood of guesses could hold every one.
 * At most `SCRYPT_CONCURRENCY` hashes run at once; the rest wait their turn, and past
 * `SCRYPT_QUEUE` waiting a check is refused at once (429 `rate-limited`).
 */
import { randomBytes, scrypt as scryptCb, timingSafeEqual } from 'node:crypto';
import { promisify } from 'node:util';
import { ApiError } from '../errors/api-error.js';

const scryptAsync = promisify(scryptCb) as (
  pw: string,
  salt: Buffer,
  len: number,
) => Promise<Buffer>;

export const SCRYPT_CONCURRENCY = 2;
export const SCRYPT_QUEUE = 64;

let running = 0;
const waiting: (() => void)[] = [];

/** How many hashes run and wait now (tests watch the cap). */
export function scryptLoad(): { running: number; waiting: number } {
  return { running, waiting: waiting.length };
}

async function scrypt(password: string, salt: Buffer, len: number): Promise<Buffer> {
  if (running >= SCRYPT_CONCURRENCY) {
    if (waiting.length >= SCRYPT_QUEUE) {
      throw new ApiError('rate-limited', 'Too many password checks at once; retry in 1 s.', {}, 1);
    }
    await new Promise<void>((resolve) => waiting.push(resolve));
  } else running++;
  try {
    return await scryptAsync(password, salt, len);
  } finally {
    // The slot passes straight to the next waiter (`running` stays), or is given back.
    const next = waiting.shift();
    if (next) next();
    else running--;
  }
}

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
