/**
 * The platform's own certificate authority. Managed databases speak TLS with a server
 * certificate this CA signs, and clients verify it with the CA certificate, which an
 * operator fetches from `GET /admin/v1/ca`. Keys and certificates are made by the host's
 * `openssl` (Node's crypto cannot issue X.509), always with argument arrays.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmod, copyFile, mkdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import type { Config } from '../config.js';

const run = promisify(execFile);

/** Where the CA and the host's server certificate live, as PEM files. */
export interface CaFiles {
  caFile: string;
  /** The CA's private key (0600, root only): it signs, it never leaves this directory. */
  caKeyFile: string;
  certFile: string;
  keyFile: string;
}

async function exists(file: string): Promise<boolean> {
  return stat(file).then(
    () => true,
    () => false,
  );
}

async function openssl(args: string[]): Promise<void> {
  await run('openssl', args, { env: { PATH: '/usr/bin:/bin', OPENSSL_CONF: '/dev/null' } }).catch(
    (err: Error & { stderr?: string }) => {
      throw new Error(`openssl ${args[0]} failed: ${(err.stderr ?? err.message).trim()}`);
    },
  );
}

/** Writes via a temporary name and renames, so a crash never leaves half a PEM file. */
async function writeAtomic(file: string, data: string | Buffer, mode: number): Promise<void> {
  const tmp = `${file}.tmp`;
  await writeFile(tmp, data, { mode });
  await chmod(tmp, mode);
  await rename(tmp, file);
}

/**
 * The CA in `dir` (created on first use: an EC P-256 key, ten years), and a server
 * certificate for `hosts` signed by it. The server certificate is issued again when the
 * set of hosts changes (a new public URL), keyed by a digest of the names.
 */
export async function ensureCa(dir: string, hosts: string[]): Promise<CaFiles> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const files: CaFiles = {
    caFile: path.join(dir, 'ca.pem'),
    caKeyFile: path.join(dir, 'ca.key'),
    certFile: path.join(dir, 'server.pem'),
    keyFile: path.join(dir, 'server.key'),
  };
  if (!(await exists(files.caFile))) {
    const key = `${files.caKeyFile}.new`;
    const cert = `${files.caFile}.new`;
    await openssl(['ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', key]);
    await chmod(key, 0o600);
    await openssl([
      'req',
      '-x509',
      '-new',
      '-key',
      key,
      '-sha256',
      '-days',
      '3650',
      '-subj',
      '/CN=pier platform CA',
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-addext',
      'keyUsage=critical,keyCertSign,cRLSign',
      '-out',
      cert,
    ]);
    await rename(key, files.caKeyFile);
    await rename(cert, files.caFile);
  }
  const names = [...new Set(hosts)].sort();
  const digest = createHash('sha256').update(names.join(',')).digest('hex').slice(0, 16);
  const marker = path.join(dir, 'server.names');
  const current = await readFile(marker, 'utf8').catch(() => '');
  if (current.trim() !== digest || !(await exists(files.certFile))) {
    await issueServerCert(files, names);
    await writeAtomic(marker, `${digest}\n`, 0o600);
  }
  return files;
}

/**
 * Where every machine finds the platform CA certificate (bound read-only by the runtime);
 * the URLs injected into machines name it (`sslrootcert=`).
 */
export const MACHINE_CA_PATH = '/etc/pier/ca.crt';

/** The platform's TLS files, plus a world-readable copy of the CA certificate. */
export interface PlatformCa extends CaFiles {
  /** `<dataDir>/ca.crt` (0644): what machines get at MACHINE_CA_PATH. */
  publicCaFile: string;
}

/** One issuing at a time per directory: two callers racing would share `.issue`. */
const issuing = new Map<string, Promise<unknown>>();

/**
 * The platform CA of this data dir, with a server certificate for every name clients
 * use: the public URL's host, localhost, 127.0.0.1 and the services host that machines
 * dial (so `sslmode=verify-full` passes from a laptop and from a machine alike).
 */
export async function platformCa(config: Config): Promise<PlatformCa> {
  const dir = path.join(config.dataDir, 'ca');
  const hosts = [new URL(config.publicUrl).hostname, 'localhost', '127.0.0.1'];
  hosts.push(config.servicesHost.replace(/^\[|\]$/g, ''));
  const run = (issuing.get(dir) ?? Promise.resolve())
    .catch(() => undefined)
    .then(async () => {
      const files = await ensureCa(dir, hosts);
      // The CA's directory is root's alone (it holds the CA key); machines, whose root
      // is no host user, get this copy of the certificate, which is public anyway.
      const publicCaFile = path.join(config.dataDir, 'ca.crt');
      const tmp = `${publicCaFile}.tmp`;
      await copyFile(files.caFile, tmp);
      await chmod(tmp, 0o644);
      await rename(tmp, publicCaFile);
      return { ...files, publicCaFile };
    });
  issuing.set(dir, run);
  try {
    return await run;
  } finally {
    if (issuing.get(dir) === run) issuing.delete(dir);
  }
}

/** A server certificate for `names` (DNS names or IP addresses), two years, signed by the CA. */
async function issueServerCert(files: CaFiles, names: string[]): Promise<void> {
  const scratch = path.join(path.dirname(files.certFile), '.issue');
  await rm(scratch, { recursive: true, force: true });
  await mkdir(scratch, { mode: 0o700 });
  try {
    const key = path.join(scratch, 'server.key');
    const csr = path.join(scratch, 'server.csr');
    const ext = path.join(scratch, 'ext.cnf');
    const cert = path.join(scratch, 'server.pem');
    const san = names.map((n) => (/^[\d.]+$|:/.test(n) ? `IP:${n}` : `DNS:${n}`)).join(',');
    await openssl(['ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', key]);
    await openssl([
      'req',
      '-new',
      '-key',
      key,
      '-subj',
      `/CN=${names[0] ?? 'localhost'}`,
      '-out',
      csr,
    ]);
    await writeFile(
      ext,
      [
        'basicConstraints=critical,CA:FALSE',
        'keyUsage=critical,digitalSignature,keyEncipherment',
        'extendedKeyUsage=serverAuth',
        `subjectAltName=${san}`,
        '',
      ].join('\n'),
    );
    await openssl([
      'x509',
      '-req',
      '-in',
      csr,
      '-CA',
      files.caFile,
      '-CAkey',
      files.caKeyFile,
      '-CAcreateserial',
      '-days',
      '730',
      '-sha256',
      '-extfile',
      ext,
      '-out',
      cert,
    ]);
    await chmod(key, 0o600);
    await rename(key, files.keyFile);
    await rename(cert, files.certFile);
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}
