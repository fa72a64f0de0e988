/**
 * A throwaway self-signed certificate (EC P-256) for a test's own TLS server or token
 * issuer, made with openssl in `dir`. Trusted only where the test says so.
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';

export interface SelfSigned {
  certFile: string;
  keyFile: string;
}

export async function selfSignedCert(
  dir: string,
  opts: { cn: string; days: number; subjectAltName?: string; name?: string },
): Promise<SelfSigned> {
  const name = opts.name ?? 'cert';
  const certFile = path.join(dir, `${name}.crt`);
  const keyFile = path.join(dir, `${name}.key`);
  // prettier-ignore
  await promisify(execFile)('openssl', [
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
    '-keyout', keyFile, '-out', certFile, '-days', String(opts.days), '-subj', `/CN=${opts.cn}`,
    ...(opts.subjectAltName ? ['-addext', `subjectAltName=${opts.subjectAltName}`] : []),
  ]);
  return { certFile, keyFile };
}
