/**
 * The SSH gateway's host key. It is created once and then reused, because clients pin it in
 * known_hosts: a new key on every start would make every `ssh` warn about a possible attack.
 */
import { createPrivateKey, generateKeyPair, randomBytes } from 'node:crypto';
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

/**
 * The gateway's private host key in OpenSSH's own format (`openssh-key-v1`, unencrypted),
 * which the SSH server library reads (it does not read the PKCS8 file pier keeps), and
 * its public line. Created first if missing, as `loadOrCreateHostKey` does.
 */
export async function loadHostPrivateKey(
  dataDir: string,
): Promise<{ privateKey: string; publicKey: string }> {
  const { publicKey } = await loadOrCreateHostKey(dataDir);
  const pem = await readFile(join(dataDir, PRIVATE_KEY_FILE), 'utf8');
  const jwk = createPrivateKey(pem).export({ format: 'jwk' });
  if (jwk.crv !== 'Ed25519' || !jwk.d || !jwk.x) {
    throw new Error(`${PRIVATE_KEY_FILE} is not an ed25519 private key`);
  }
  const seed = Buffer.from(jwk.d, 'base64url');
  const raw = Buffer.from(jwk.x, 'base64url');
  if (openSshPublicKeyFromEd25519(raw) !== publicKey.split(' ').slice(0, 2).join(' ')) {
    throw new Error(`${PRIVATE_KEY_FILE} is not the private half of ${PUBLIC_KEY_FILE}`);
  }
  return { privateKey: openSshPrivateKeyFromEd25519(seed, raw, COMMENT), publicKey };
}

/**
 * Formats an ed25519 key pair as an unencrypted OpenSSH private key
 * (PROTOCOL.key: `openssh-key-v1`, cipher and KDF `none`, one key, padded to 8 bytes).
 */
export function openSshPrivateKeyFromEd25519(seed32: Buffer, raw32: Buffer, comment = ''): string {
  const type = wireString(Buffer.from('ssh-ed25519'));
  const publicBlob = Buffer.concat([type, wireString(raw32)]);
  const check = randomBytes(4);
  let section = Buffer.concat([
    check,
    check,
    type,
    wireString(raw32),
    wireString(Buffer.concat([seed32, raw32])),
    wireString(Buffer.from(comment)),
  ]);
  const pad = (8 - (section.length % 8)) % 8;
  section = Buffer.concat([section, Buffer.from(Array.from({ length: pad }, (_, i) => i + 1))]);
  const count = Buffer.alloc(4);
  count.writeUInt32BE(1, 0);
  const body = Buffer.concat([
    Buffer.from('openssh-key-v1\0'),
    wireString(Buffer.from('none')),
    wireString(Buffer.from('none')),
    wireString(Buffer.alloc(0)),
    count,
    wireString(publicBlob),
    wireString(section),
  ]).toString('base64');
  const lines = body.match(/.{1,70}/g) ?? [];
  return `-----BEGIN OPENSSH PRIVATE KEY-----\n${lines.join('\n')}\n-----END OPENSSH PRIVATE KEY-----\n`;
}
