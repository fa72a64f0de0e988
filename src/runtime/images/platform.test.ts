import { describe, expect, it } from 'vitest';
import type { ImageIndex, Platform } from './manifest.js';
import { assertRunsHere, hostPlatform, selectManifest } from './platform.js';

const d = (n: number, platform?: Platform) => ({
  mediaType: 'application/vnd.oci.image.manifest.v1+json',
  digest: `sha256:${String(n).repeat(64).slice(0, 64)}`,
  size: 1,
  ...(platform ? { platform } : {}),
});
const index = (...manifests: ReturnType<typeof d>[]): ImageIndex => ({
  schemaVersion: 2,
  manifests,
});

describe('selectManifest', () => {
  it('maps this process to an OCI platform', () => {
    const p = hostPlatform();
    expect(p.os).toBe('linux');
    expect(p.architecture).toBe(
      { x64: 'amd64', arm64: 'arm64' }[process.arch as string] ?? p.architecture,
    );
  });

  it('picks the host entry, skipping attestations and entries without platform', () => {
    const idx = index(
      d(1, { os: 'unknown', architecture: 'unknown' }),
      d(2),
      d(3, { os: 'linux', architecture: 'arm64', variant: 'v8' }),
      d(4, { os: 'linux', architecture: 'amd64' }),
      d(5, { os: 'windows', architecture: 'amd64' }),
    );
    expect(selectManifest(idx, { os: 'linux', architecture: 'amd64' }, 'x')).toBe(idx.manifests[3]);
    expect(selectManifest(idx, { os: 'linux', architecture: 'arm64', variant: 'v8' }, 'x')).toBe(
      idx.manifests[2],
    );
  });

  it('takes arm64 without variant, and never amd64 v3 builds', () => {
    const idx = index(
      d(1, { os: 'linux', architecture: 'amd64', variant: 'v3' }),
      d(2, { os: 'linux', architecture: 'arm64' }),
    );
    expect(selectManifest(idx, { os: 'linux', architecture: 'arm64', variant: 'v8' }, 'x')).toBe(
      idx.manifests[1],
    );
    expect(() => selectManifest(idx, { os: 'linux', architecture: 'amd64' }, 'app')).toThrow(
      /app has no image for linux\/amd64 \(it has linux\/amd64\/v3, linux\/arm64\)/,
    );
  });

  it('prefers the closest arm variant at or below the host', () => {
    const idx = index(
      d(1, { os: 'linux', architecture: 'arm', variant: 'v5' }),
      d(2, { os: 'linux', architecture: 'arm', variant: 'v6' }),
      d(3, { os: 'linux', architecture: 'arm', variant: 'v8' }),
    );
    expect(selectManifest(idx, { os: 'linux', architecture: 'arm', variant: 'v7' }, 'x')).toBe(
      idx.manifests[1],
    );
  });

  it('checks single-platform configs against the host', () => {
    const host = { os: 'linux', architecture: 'amd64' };
    expect(() => assertRunsHere({ os: 'linux', architecture: 'amd64' }, host, 'x')).not.toThrow();
    expect(() => assertRunsHere({}, host, 'x')).not.toThrow();
    expect(() => assertRunsHere({ os: 'linux', architecture: 'arm64' }, host, 'x')).toThrow(
      /built for linux\/arm64/,
    );
  });
});
