/**
 * The SSH gateway's host key. It is created once and then reused, because clients pin it in
 * known_hosts: a new key on every start would make every `ssh` warn about a possible attack.
 */
import { generateKeyPair, randomBytes } from 'node:crypto';
import { chmod, mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parseSshPublicKey } from './public-key.js';

const PRIVATE_KEY_FILE = 'ssh_host_ed25519_key';
const PUBLIC_KEY_FILE = `${PRIVATE_KEY_FILE}.pub`;
const COMMENT = 'pier-gateway';

const generateKeyPairAsync = promisify(generateKeyPair);

/** Appends an SSH wire-format string: a uint32 big-endian length, then the bytes. */
function wireString(value: Buffer): Buffer {
  const length = Buffer.alloc(4);
  length.writeUInt32BE(value.length, 0);
  return Buffer.concat([length, value]);
}

/**
 * Formats a raw 32-byte ed25519 public key as an OpenSSH public key line
 * (`ssh-ed25519 <base64> [comment]`), as found in `.pub` files and authorized_keys.
 */
export function openSshPublicKeyFromEd25519(raw32: Buffer, comment?: string): string {
  if (raw32.length !== 32) {
    throw new RangeError(`An ed25519 public key is 32 bytes, not ${raw32.length}.`);
  }
  const blob = Buffer.concat([wireString(Buffer.from('ssh-ed25519')), wireString(raw32)]);
  const line = `ssh-ed25519 ${blob.toString('base64')}`;
  return comment ? `${line} ${comment}` : line;
}

/**
 * Returns the gateway's ed25519 host key from `dataDir`, generating and saving it on first use
 * (`ssh_host_ed25519_key`, PKCS8 PEM, mode 0600, and `ssh_host_ed25519_key.pub`, mode 0644).
 */
export async function loadOrCreateHostKey(
  dataDir: string,
): Promise<{ publicKey: string; fingerprint: string }> {
  const privatePath = join(dataDir, PRIVATE_KEY_FILE);
  const publicPath = join(dataDir, PUBLIC_KEY_FILE);

  const existing = await readFile(publicPath, 'utf8').catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return undefined;
    throw error;
  });
  if (existing !== undefined) {
    const parsed = parseSshPublicKey(existing);
    return { publicKey: parsed.normalized, fingerprint: parsed.fingerprint };
  }

  const { publicKey, privateKey } = await generateKeyPairAsync('ed25519');
  const { x } = publicKey.export({ format: 'jwk' });
  const publicLine = openSshPublicKeyFromEd25519(Buffer.from(x ?? '', 'base64url'), COMMENT);
  const privatePem = privateKey.export({ type: 'pkcs8', format: 'pem' });

  await mkdir(dataDir, { recursive: true });
  // Write to temporary names and rename, private key first: the .pub file is what marks the
  // key as present, so a crash halfway leaves no public key without its private half.
  await writeAtomically(privatePath, privatePem, 0o600);
  await writeAtomically(publicPath, `${publicLine}\n`, 0o644);

  const parsed = parseSshPublicKey(publicLine);
  return { publicKey: parsed.normalized, fingerprint: parsed.fingerprint };
}

async function writeAtomically(path: string, data: string | Buffer, mode: number): Promise<void> {
  // A fresh random name with 'wx' means the file is ours and created with `mode` from the start.
  const temp = `${path}.${randomBytes(6).toString('hex')}.tmp`;
  await writeFile(temp, data, { mode, flag: 'wx' });
  // The umask may have narrowed the mode given to writeFile; set it exactly.
  await chmod(temp, mode);
  await rename(temp, path);
}
