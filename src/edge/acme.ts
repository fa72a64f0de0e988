/**
 * Certificates from an ACME CA (CONTRACT 6: `PIER_ACME_DIRECTORY_URL`, `PIER_ACME_CA_FILE`,
 * `PIER_ACME_EMAIL`) through `acme-client`. The caller publishes and withdraws the
 * challenge answers (HTTP-01 tokens, DNS-01 TXT values, TLS-ALPN-01 key authorizations)
 * where the CA looks for them.
 */
import { readFileSync } from 'node:fs';
import https from 'node:https';
import tls from 'node:tls';
import type * as AcmeClient from 'acme-client';

/**
 * acme-client, loaded on first use: importing it costs a few hundred ms of CPU, which
 * every `pier` start (and every test file) would pay with no domain ever checked.
 */
let loaded: Promise<typeof AcmeClient> | undefined;
const acmeClient = () => (loaded ??= import('acme-client'));

export type ChallengeType = 'http-01' | 'dns-01' | 'tls-alpn-01';

/** Where one challenge's answer goes: HTTP-01 by token, DNS-01 by record name, TLS-ALPN-01 by name. */
export interface ChallengeAnswer {
  type: ChallengeType;
  /** The name being proven (`example.com`; a wildcard's base name for `*.example.com`). */
  identifier: string;
  /**
   * HTTP-01: the token of the URL path. DNS-01: `_acme-challenge.<identifier>`.
   * TLS-ALPN-01: the identifier (the server name the CA's handshake names).
   */
  key: string;
  /** HTTP-01 and TLS-ALPN-01: the key authorization. DNS-01: the TXT value. */
  value: string;
}

export interface ChallengeSink {
  publish(answer: ChallengeAnswer): Promise<void>;
  withdraw(answer: ChallengeAnswer): Promise<void>;
}

export interface IssuedCertificate {
  keyPem: string;
  /** Leaf first, then the intermediates. */
  chainPem: string;
  notAfter: Date;
}

export interface AcmeSettings {
  directoryUrl: string;
  caFile?: string;
  email?: string;
}

let trustedFile: string | undefined;

/**
 * acme-client talks through one axios instance per process: the extra CA is set on it
 * once (one ACME server per installation, so every platform in a process agrees).
 */
function trustCa(acme: typeof AcmeClient, caFile: string | undefined): void {
  if (!caFile || trustedFile === caFile) return;
  const extra = readFileSync(caFile, 'utf8');
  acme.axios.defaults.httpsAgent = new https.Agent({ ca: [...tls.rootCertificates, extra] });
  trustedFile = caFile;
}

/** A new account key (PEM), to be stored sealed and reused for every order. */
export async function newAccountKey(): Promise<string> {
  const acme = await acmeClient();
  return (await acme.crypto.createPrivateEcdsaKey('P-256')).toString();
}

/**
 * Registers the account of `accountKeyPem` (or finds it) and returns its URL. Orders then
 * name the account by URL: a second registration of an existing account would be an
 * empty update, which strict servers (pebble) refuse.
 */
export async function registerAccount(
  settings: AcmeSettings,
  accountKeyPem: string,
): Promise<string> {
  const acme = await acmeClient();
  trustCa(acme, settings.caFile);
  const client = new acme.Client({
    directoryUrl: settings.directoryUrl,
    accountKey: accountKeyPem,
  });
  await client.createAccount({
    termsOfServiceAgreed: true,
    ...(settings.email ? { contact: [`mailto:${settings.email}`] } : {}),
  });
  return client.getAccountUrl();
}

/** ALPN protocol of TLS-ALPN-01 handshakes (RFC 8737). */
export const ACME_TLS_ALPN = 'acme-tls/1';

/**
 * The self-signed certificate a TLS-ALPN-01 handshake for `name` answers with: the name
 * and the digest of the key authorization in the critical acmeIdentifier extension
 * (RFC 8737). Built from the stored key authorization by whichever replica the CA reaches.
 */
export async function alpnChallengeCertificate(
  name: string,
  keyAuthorization: string,
): Promise<{ keyPem: string; certPem: string }> {
  const acme = await acmeClient();
  const key = await acme.crypto.createPrivateEcdsaKey('P-256');
  const authz = { identifier: { type: 'dns', value: name } } as AcmeClient.Authorization;
  const [, cert] = await acme.crypto.createAlpnCertificate(authz, keyAuthorization, key);
  return { keyPem: key.toString(), certPem: cert.toString() };
}

/**
 * Orders one certificate for `names` (a wildcard `*.zone` needs DNS-01), answering the
 * challenges through `sink` in the order of `priority`, and returns it with its key.
 */
export async function issueCertificate(
  settings: AcmeSettings,
  account: { keyPem: string; url: string },
  names: string[],
  sink: ChallengeSink,
  priority: ChallengeType[],
): Promise<IssuedCertificate> {
  const acme = await acmeClient();
  trustCa(acme, settings.caFile);
  const client = new acme.Client({
    directoryUrl: settings.directoryUrl,
    accountKey: account.keyPem,
    accountUrl: account.url,
    backoffAttempts: 10,
    backoffMin: 200,
    backoffMax: 3000,
  });
  const [key, csr] = await acme.crypto.createCsr(
    { commonName: names[0]!, altNames: names },
    await acme.crypto.createPrivateEcdsaKey('P-256'),
  );
  const answerOf = (
    authz: AcmeClient.Authorization,
    challenge: { type: string; token: string },
    keyAuthorization: string,
  ): ChallengeAnswer => {
    const type = challenge.type as ChallengeType;
    const identifier = authz.identifier.value;
    return {
      type,
      identifier,
      key:
        type === 'dns-01'
          ? `_acme-challenge.${identifier}`
          : type === 'tls-alpn-01'
            ? identifier
            : challenge.token,
      value: keyAuthorization,
    };
  };
  const chainPem = await client.auto({
    csr,
    email: settings.email,
    termsOfServiceAgreed: true,
    // The CA checks; checking from here first would only ask pier's own listeners.
    skipChallengeVerification: true,
    challengePriority: priority,
    challengeCreateFn: (authz, challenge, ka) =>
      sink.publish(answerOf(authz, challenge as { type: string; token: string }, ka)),
    challengeRemoveFn: (authz, challenge, ka) =>
      sink.withdraw(answerOf(authz, challenge as { type: string; token: string }, ka)),
  });
  const info = acme.crypto.readCertificateInfo(chainPem);
  return { keyPem: key.toString(), chainPem, notAfter: info.notAfter };
}
