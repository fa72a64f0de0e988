/**
 * Random identifiers and bearer secrets. Bearer secrets (API keys, SSH tokens, device
 * codes) carry a recognizable prefix, are shown once, and only their SHA-256 is stored:
 * looking a key up by its hash means no stored value can be compared byte by byte.
 */
import { hash, randomBytes, randomInt, timingSafeEqual } from 'node:crypto';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** Unbiased base62 text of `length` characters from the CSPRNG. */
export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      // 248 = 4 * 62: dropping larger bytes keeps every character equally likely.
      if (byte < 248) out += BASE62[byte % 62];
      if (out.length === length) break;
    }
  }
  return out;
}

/** `tok-…`, `org-…` and friends: short, random, unguessable ids. */
export function newId(prefix: string): string {
  return `${prefix}-${randomBase62(16).toLowerCase()}`;
}

export function sha256(value: string): Buffer;
export function sha256(value: string, encoding: 'base64'): string;
export function sha256(value: string, encoding?: 'base64'): Buffer | string {
  // The one-shot hash skips the Hash object: it runs on every authenticated request.
  return encoding ? hash('sha256', value, encoding) : hash('sha256', value, 'buffer');
}

export function constantTimeEqual(a: string, b: string): boolean {
  const ha = sha256(a);
  const hb = sha256(b);
  return timingSafeEqual(ha, hb);
}

export interface MintedSecret {
  value: string;
  prefix: string;
  hash: Buffer;
}

/** A bearer secret such as `pier_3hG…`: 43 random base62 characters (≈256 bits). */
export function mintSecret(kind: string): MintedSecret {
  const value = `${kind}_${randomBase62(43)}`;
  return { value, prefix: value.slice(0, kind.length + 9), hash: sha256(value) };
}

/** A user code people can read and type: 8 letters without look-alikes, as XXXX-XXXX. */
export function userCode(): string {
  const alphabet = 'BCDFGHJKLMNPQRSTVWXZ';
  let s = '';
  for (let i = 0; i < 8; i++) s += alphabet[randomInt(alphabet.length)];
  return `${s.slice(0, 4)}-${s.slice(4)}`;
}
