/**
 * The platform CA in every machine, so that the URLs attachments inject (database
 * fronts, the services listener) verify with ordinary clients: the CA certificate bound
 * read-only at MACHINE_CA_PATH, and environment variables that point clients at it.
 *
 * Only variables that ADD the CA to what a client trusts are set: `NODE_EXTRA_CA_CERTS`
 * (Node: pg, ioredis, the AWS SDK v3), plus `PIER_CA_FILE` naming the file for
 * everything else. Variables that REPLACE the trust store (`SSL_CERT_FILE`,
 * `REQUESTS_CA_BUNDLE`, `AWS_CA_BUNDLE`, `PGSSLROOTCERT`) are left to the app: set for
 * the whole process, they would break its calls to the public internet (or to another
 * PostgreSQL). Postgres URLs carry `sslrootcert=` themselves.
 */
import { MACHINE_CA_PATH } from '../../crypto/ca.js';

/** Lowest in precedence: the image's and the machine's own values win. */
export const PLATFORM_CA_ENV: Readonly<Record<string, string>> = {
  NODE_EXTRA_CA_CERTS: MACHINE_CA_PATH,
  PIER_CA_FILE: MACHINE_CA_PATH,
};

/** The read-only bind of the host's copy of the CA certificate (`<dataDir>/ca.crt`). */
export function platformCaMount(hostFile: string) {
  return { source: hostFile, target: MACHINE_CA_PATH, readOnly: true };
}
