/**
 * The secret values a release records (CONTRACT 7): the app's own secrets in force when
 * its deploy began, sealed as one JSON object bound to the release. Machines of a release
 * run with these, so a `staged` change waits for the next deploy and a rollback brings
 * back exactly the values of its target. Managed secrets (a database's URL, a bucket's
 * keys) are not recorded: the platform rotates them, so machines always get today's.
 */
import type { ServiceContext } from '../context.js';

export interface SealedSecrets {
  names: string[];
  nonce: Buffer | null;
  sealed: Buffer | null;
}

const bindingOfRelease = (releaseId: string) => `release-secrets:${releaseId}`;

/** Seals `values` for release `releaseId`. */
export function sealReleaseSecrets(
  ctx: ServiceContext,
  releaseId: string,
  values: Record<string, string>,
): SealedSecrets {
  const names = Object.keys(values).sort();
  if (names.length === 0) return { names, nonce: null, sealed: null };
  const box = ctx.box.seal(JSON.stringify(values), bindingOfRelease(releaseId));
  return { names, nonce: box.nonce, sealed: box.ciphertext };
}

/** The values a release recorded. */
export function openReleaseSecrets(
  ctx: ServiceContext,
  release: { id: string; secrets_nonce: Buffer | null; secrets_sealed: Buffer | null },
): Record<string, string> {
  if (!release.secrets_nonce || !release.secrets_sealed) return {};
  return JSON.parse(
    ctx.box.open(
      { nonce: release.secrets_nonce, ciphertext: release.secrets_sealed },
      bindingOfRelease(release.id),
    ),
  ) as Record<string, string>;
}
