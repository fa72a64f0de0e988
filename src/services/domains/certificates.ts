/**
 * Certificates and the ACME account in the store, keys sealed with the secret box
 * (bound to the row's name), so every replica serves the same certificates. Each replica
 * builds a TLS context once per certificate and keeps it while the edge table names the
 * same fingerprint for it (memory.ts).
 */
import { createHash } from 'node:crypto';
import tls from 'node:tls';
import {
  alpnChallengeCertificate,
  issueCertificate,
  newAccountKey,
  registerAccount,
  type ChallengeAnswer,
  type ChallengeSink,
  type ChallengeType,
  type IssuedCertificate,
} from '../../edge/acme.js';
import type { Executor } from '../../store/db.js';
import type { ServiceContext } from '../context.js';
import { edgeMemory, type EdgeMemory, type EdgeTable } from './memory.js';

const certBinding = (name: string) => `edge-cert:${name}`;
const accountBinding = (url: string) => `acme-account:${url}`;

/**
 * The certificate names that can serve `host`: itself, its zone's wildcard, then the
 * certificate of a zone whose apex it is (a zone's certificate names `*.<zone>` and
 * `<zone>`, stored as the wildcard).
 */
export function certificateNamesFor(host: string): string[] {
  const dot = host.indexOf('.');
  return dot > 0 ? [host, `*.${host.slice(dot + 1)}`, `*.${host}`] : [host, `*.${host}`];
}

/**
 * The TLS context for a server name (exact certificate first, then a wildcard). Only
 * names the table lists are looked up, so unknown names (anyone may send any SNI) cost
 * no query and fill no cache.
 */
export async function contextFor(
  ctx: ServiceContext,
  servername: string,
): Promise<tls.SecureContext | undefined> {
  const memory = edgeMemory(ctx);
  for (const name of certificateNamesFor(servername)) {
    const fingerprint = memory.table?.certificates.get(name);
    if (!fingerprint) continue;
    let cached = memory.contexts.get(name);
    if (cached?.fingerprint !== fingerprint) {
      const entry = { fingerprint, context: buildContext(ctx, memory, name, fingerprint) };
      memory.contexts.set(name, entry);
      // Not kept when the build failed or found another certificate: the next try builds.
      const forget = () => memory.contexts.get(name) === entry && memory.contexts.delete(name);
      entry.context.then((c) => c ?? forget(), forget);
      cached = entry;
    }
    const context = await cached.context;
    if (context) return context;
  }
  return undefined;
}

async function buildContext(
  ctx: ServiceContext,
  memory: EdgeMemory,
  name: string,
  fingerprint: string,
): Promise<tls.SecureContext | undefined> {
  const row = await ctx.db
    .selectFrom('edge_certificates')
    .selectAll()
    .where('name', '=', name)
    .executeTakeFirst();
  // Replaced or removed since the table was read: the next reload says what serves.
  if (!row || row.fingerprint !== fingerprint) return undefined;
  const key = ctx.box.open({ nonce: row.key_nonce, ciphertext: row.key_sealed }, certBinding(name));
  memory.contextsBuilt++;
  return tls.createSecureContext({ key, cert: row.chain_pem });
}

/** Drops the contexts whose certificate the new table no longer names, or names changed. */
export function pruneContexts(memory: EdgeMemory, table: EdgeTable): void {
  for (const [name, cached] of memory.contexts)
    if (table.certificates.get(name) !== cached.fingerprint) memory.contexts.delete(name);
}

/** SHA-256 of a chain (hex), as stored with it. */
function fingerprintOf(chainPem: string): string {
  return createHash('sha256').update(chainPem, 'utf8').digest('hex');
}

/** What a check writes into its domain or zone row once its certificate is kept. */
export type IssuedFields = {
  status: 'cert_issued';
  error: null;
  cert_issued_at: Date;
  cert_not_after: Date;
  next_check_at: Date;
};

/**
 * Keeps `cert` for `name` only if its owner (a domain or zone row) is still there: in one
 * transaction, locks the owner, stores the certificate and hands `issued` the fields for
 * the owner's row. An owner deleted meanwhile (alone, with its app, or a released zone)
 * keeps nothing.
 */
export async function keepCertificateOfOwner(
  ctx: ServiceContext,
  owner: { table: 'edge_domains' | 'edge_zones'; id: string },
  name: string,
  cert: IssuedCertificate,
  renewalAt: (issuedAt: Date, notAfter: Date) => Date,
  issued: (fields: IssuedFields, tx: Executor) => Promise<unknown>,
): Promise<void> {
  const issuedAt = ctx.clock();
  await ctx.db.transaction().execute(async (tx) => {
    const still = await tx
      .selectFrom(owner.table)
      .select('id')
      .where('id', '=', owner.id)
      .forUpdate()
      .executeTakeFirst();
    if (!still) return;
    await storeCertificate(ctx, tx, name, cert);
    await issued(
      {
        status: 'cert_issued',
        error: null,
        cert_issued_at: issuedAt,
        cert_not_after: cert.notAfter,
        next_check_at: renewalAt(issuedAt, cert.notAfter),
      },
      tx,
    );
  });
}

/**
 * Stores the certificate of `name` (replacing the previous one) in the caller's
 * transaction, which holds the row the certificate belongs to: a certificate issued for
 * a domain or zone deleted meanwhile is not stored.
 */
export async function storeCertificate(
  ctx: ServiceContext,
  ex: Executor,
  name: string,
  cert: IssuedCertificate,
): Promise<void> {
  const sealed = ctx.box.seal(cert.keyPem, certBinding(name));
  const row = {
    key_nonce: sealed.nonce,
    key_sealed: sealed.ciphertext,
    chain_pem: cert.chainPem,
    fingerprint: fingerprintOf(cert.chainPem),
    not_after: cert.notAfter,
    issued_at: ctx.clock(),
  };
  await ex
    .insertInto('edge_certificates')
    .values({ name, ...row })
    .onConflict((oc) => oc.column('name').doUpdateSet(row))
    .execute();
}

/** Removes the certificates (and their sealed keys) of `names`, in the caller's transaction. */
export async function removeCertificates(ex: Executor, names: string[]): Promise<void> {
  if (names.length === 0) return;
  await ex.deleteFrom('edge_certificates').where('name', 'in', names).execute();
}

/** The ACME account for the configured directory, registered and stored on first use. */
async function account(ctx: ServiceContext): Promise<{ keyPem: string; url: string }> {
  const url = ctx.config.acmeDirectoryUrl;
  const row = await ctx.db
    .selectFrom('edge_acme_accounts')
    .selectAll()
    .where('directory_url', '=', url)
    .executeTakeFirst();
  if (row) {
    const keyPem = ctx.box.open(
      { nonce: row.key_nonce, ciphertext: row.key_sealed },
      accountBinding(url),
    );
    return { keyPem, url: row.account_url };
  }
  const keyPem = await newAccountKey();
  const accountUrl = await registerAccount(acmeSettings(ctx), keyPem);
  const sealed = ctx.box.seal(keyPem, accountBinding(url));
  await ctx.db
    .insertInto('edge_acme_accounts')
    .values({
      directory_url: url,
      account_url: accountUrl,
      key_nonce: sealed.nonce,
      key_sealed: sealed.ciphertext,
    })
    .onConflict((oc) => oc.column('directory_url').doNothing())
    .execute();
  // Two replicas racing: the stored account wins.
  return account(ctx);
}

function acmeSettings(ctx: ServiceContext) {
  return {
    directoryUrl: ctx.config.acmeDirectoryUrl,
    caFile: ctx.config.acmeCaFile,
    email: ctx.config.acmeEmail,
  };
}

/**
 * Challenge answers go to the store: HTTP-01 tokens are then answered by whichever
 * replica the CA reaches (`/.well-known/acme-challenge/`), TLS-ALPN-01 handshakes by
 * whichever TLS edge it reaches, DNS-01 TXT values by pier's DNS for the delegated
 * `_acme-challenge` names.
 */
function storeSink(ctx: ServiceContext): ChallengeSink {
  return {
    async publish(a: ChallengeAnswer) {
      await ctx.db
        .insertInto('edge_challenges')
        .values({ kind: a.type, key: a.key, value: a.value })
        .onConflict((oc) => oc.doNothing())
        .execute();
    },
    async withdraw(a: ChallengeAnswer) {
      await ctx.db
        .deleteFrom('edge_challenges')
        .where('key', '=', a.key)
        .where('value', '=', a.value)
        .execute();
    },
  };
}

/**
 * Orders a certificate for `names` through the first of `challenges` the CA accepts:
 * each is tried in turn (one order each) until one succeeds. The caller stores it.
 */
export async function obtainCertificate(
  ctx: ServiceContext,
  names: string[],
  challenges: ChallengeType[],
): Promise<IssuedCertificate> {
  const failures: string[] = [];
  for (const type of challenges) {
    try {
      return await issueCertificate(acmeSettings(ctx), await account(ctx), names, storeSink(ctx), [
        type,
      ]);
    } catch (err) {
      failures.push(`${type}: ${(err as Error).message}`);
    }
  }
  throw new Error(failures.join('; '));
}

/**
 * The challenge certificate a TLS-ALPN-01 handshake for `name` answers with, if a
 * challenge for it is in flight (built per handshake: the CA makes a few).
 */
export async function alpnChallengeContext(
  ctx: ServiceContext,
  name: string,
): Promise<tls.SecureContext | undefined> {
  const row = await ctx.db
    .selectFrom('edge_challenges')
    .select('value')
    .where('kind', '=', 'tls-alpn-01')
    .where('key', '=', name)
    .orderBy('created_at', 'desc')
    .executeTakeFirst();
  if (!row) return undefined;
  const { keyPem, certPem } = await alpnChallengeCertificate(name, row.value);
  return tls.createSecureContext({ key: keyPem, cert: certPem });
}

/** The key authorization for an HTTP-01 token, if a challenge for it is in flight. */
export async function httpChallengeAnswer(
  ctx: ServiceContext,
  token: string,
): Promise<string | undefined> {
  const row = await ctx.db
    .selectFrom('edge_challenges')
    .select('value')
    .where('kind', '=', 'http-01')
    .where('key', '=', token)
    .executeTakeFirst();
  return row?.value;
}
