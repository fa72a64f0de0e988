/**
 * Which manifest of a multi-platform index this host runs: linux plus the OCI name of
 * Node's `process.arch`, with the variant where the architecture has meaningful ones
 * (arm v5/v6/v7). An arm64 host takes `v8` or no variant; an amd64 host takes no variant
 * or `v1` only, since v2/v3 builds need CPU features we do not probe.
 */
import os from 'node:os';
import { ImageError } from './errors.js';
import type { Descriptor, ImageIndex, Platform } from './manifest.js';

/** The platform of this process's host, in OCI terms. */
export function hostPlatform(): Platform {
  switch (process.arch) {
    case 'x64':
      return { os: 'linux', architecture: 'amd64' };
    case 'arm64':
      return { os: 'linux', architecture: 'arm64', variant: 'v8' };
    case 'arm': {
      const v = (process.config.variables as Record<string, unknown>).arm_version;
      return { os: 'linux', architecture: 'arm', variant: `v${typeof v === 'string' ? v : '7'}` };
    }
    case 'ia32':
      return { os: 'linux', architecture: '386' };
    case 'ppc64':
      return { os: 'linux', architecture: os.endianness() === 'LE' ? 'ppc64le' : 'ppc64' };
    default:
      return { os: 'linux', architecture: process.arch };
  }
}

/** How well an entry's variant fits the host's; undefined when it does not run here. */
function variantRank(host: Platform, entry: Platform): number | undefined {
  const v = entry.variant;
  switch (host.architecture) {
    case 'arm64':
      return v === undefined || v === 'v8' ? 0 : undefined;
    case 'amd64':
      return v === undefined || v === 'v1' ? 0 : undefined;
    case 'arm': {
      // An armv7 host also runs v6 and v5 builds; prefer the closest.
      const hostV = Number(host.variant?.slice(1) ?? '7');
      const entryV = v === undefined ? hostV : Number(v.replace(/^v/, ''));
      return Number.isFinite(entryV) && entryV <= hostV ? hostV - entryV : undefined;
    }
    default:
      return v === undefined || v === host.variant ? 0 : undefined;
  }
}

/** Formats a platform as `linux/arm64/v8`. */
export function formatPlatform(p: Platform): string {
  return [p.os, p.architecture, p.variant].filter(Boolean).join('/');
}

/**
 * Picks the index entry for `host`. Entries without a platform, or of `unknown/unknown`
 * (build attestations), never match. No match → `unsupported`, naming what the index has.
 */
export function selectManifest(index: ImageIndex, host: Platform, what: string): Descriptor {
  let best: { d: Descriptor; rank: number } | undefined;
  for (const d of index.manifests) {
    const p = d.platform;
    if (!p || p.os !== host.os || p.architecture !== host.architecture) continue;
    const rank = variantRank(host, p);
    if (rank !== undefined && (!best || rank < best.rank)) best = { d, rank };
  }
  if (best) return best.d;
  const offered = index.manifests
    .map((d) => d.platform)
    .filter((p): p is Platform => !!p && p.os !== 'unknown')
    .map(formatPlatform);
  throw new ImageError(
    'unsupported',
    `${what} has no image for ${formatPlatform(host)}` +
      (offered.length ? ` (it has ${[...new Set(offered)].join(', ')}).` : '.'),
  );
}

/**
 * Checks a single-platform image's config against the host: an arm64-only image cannot
 * run on amd64. Configs that leave the fields out are taken as they are.
 */
export function assertRunsHere(
  config: { os?: string; architecture?: string },
  host: Platform,
  what: string,
): void {
  if (
    (config.os && config.os !== host.os) ||
    (config.architecture && config.architecture !== host.architecture)
  ) {
    throw new ImageError(
      'unsupported',
      `${what} is built for ${config.os ?? '?'}/${config.architecture ?? '?'}, not for ${formatPlatform(host)}.`,
    );
  }
}
