/**
 * Certificates and the ACME account in the store, keys sealed with the secret box
 * (bound to the row's name), so every replica serves the same certificates. Each replica
 * keeps the TLS contexts it built in memory until a certificate changes.
 */
import tls from 'node:tls';
import {
  issueCertificate,
  newAccountKey,
  registerAccount,
  type ChallengeAnswer,
  type ChallengeSink,
  type ChallengeType,
  type IssuedCertificate,
} from '../../edge/acme.js';
import type { ServiceContext } from '../context.js';
import { edgeMemory } from './memory.js';

const certBinding = (name: string) => `edge-cert:${name}`;
const accountBinding = (url: string) => `acme-account:${url}`;

/** The certificate names that can serve `host`: itself, then its zone's wildcard. */
export function certificateNamesFor(host: string): string[] {
  const dot = host.indexOf('.');
  return dot > 0 ? [host, `*.${host.slice(dot + 1)}`] : [host];
}

/** The TLS context for a server name (exact certificate first, then a wildcard). */
export async function contextFor(
  ctx: ServiceContext,
  servername: string,
): Promise<tls.SecureContext | undefined> {
  const cache = edgeMemory(ctx).contexts;
  for (const name of certificateNamesFor(servername)) {
    let entry = cache.get(name);
    if (entry === undefined) {
      entry = await loadContext(ctx, name);
      cache.set(name, entry);
    }
    if (entry) return entry;
  }
  return undefined;
}

async function loadContext(ctx: ServiceContext, name: string): Promise<tls.SecureContext | null> {
  const row = await ctx.db
    .selectFrom('edge_certificates')
    .selectAll()
    .where('name', '=', name)
    .executeTakeFirst();
  if (!row) return null;
  const key = ctx.box.open({ nonce: row.key_nonce, ciphertext: row.key_sealed }, certBinding(name));
  return tls.createSecureContext({ key, cert: row.chain_pem });
}

export async function storeCertificate(
  ctx: ServiceContext,
  name: string,
  cert: IssuedCertificate,
): Promise<void> {
  const sealed = ctx.box.seal(cert.keyPem, certBinding(name));
  const row = {
    key_nonce: sealed.nonce,
    key_sealed: sealed.ciphertext,
    chain_pem: cert.chainPem,
    not_after: cert.notAfter,
    issued_at: ctx.clock(),
  };
  await ctx.db
    .insertInto('edge_certificates')
    .values({ name, ...row })
    .onConflict((oc) => oc.column('name').doUpdateSet(row))
    .execute();
  edgeMemory(ctx).contexts.delete(name);
}

export async function dropCertificate(ctx: ServiceContext, name: string): Promise<void> {
  await ctx.db.deleteFrom('edge_certificates').where('name', '=', name).execute();
  edgeMemory(ctx).contexts.delete(name);
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
 * replica the CA reaches (`/.well-known/acme-challenge/`), DNS-01 TXT values by pier's
 * DNS for the delegated `_acme-challenge` names.
 */
function storeSink(ctx: ServiceContext): ChallengeSink {
  return {
    async publish(a: ChallengeAnswer) {
      await ctx.db
        .insertInto('edge_challenges')
        .values({ kind: a.type === 'dns-01' ? 'dns-01' : 'http-01', key: a.key, value: a.value })
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

/** Orders and stores a certificate for `names`; stored under `names[0]`. */
export async function obtainCertificate(
  ctx: ServiceContext,
  names: string[],
  priority: ChallengeType[],
): Promise<IssuedCertificate> {
  const cert = await issueCertificate(
    acmeSettings(ctx),
    await account(ctx),
    names,
    storeSink(ctx),
    priority,
  );
  await storeCertificate(ctx, names[0]!, cert);
  return cert;
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
