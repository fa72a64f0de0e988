/**
 * OCI image references, parsed the way Docker and containerd read them
 * (distribution/reference): `[registry/]path[:tag][@digest]`, where the first path
 * component is a registry only when it looks like a host (has a `.` or a `:`, is
 * `localhost`, or is a bracketed IPv6 address). Without one the image is on Docker Hub,
 * where single-name images live under `library/`. Without tag or digest the tag is `latest`.
 */
import { ImageError } from './errors.js';

/** A parsed image reference. `tag` and `digest` may both be set; the digest wins. */
export interface ImageReference {
  /** Registry host with optional port, lowercased: `docker.io`, `localhost:5000`, `[::1]:5000`. */
  registry: string;
  /** Repository path: `library/busybox`, `ns/app`. */
  repository: string;
  tag?: string;
  /** `sha256:<64 hex>`. */
  digest?: string;
}

/** Docker Hub's canonical name in references; its API lives on another host. */
export const DOCKER_HUB = 'docker.io';
const DOCKER_HUB_ALIASES = new Set(['docker.io', 'index.docker.io', 'registry-1.docker.io']);

const MAX_REFERENCE = 512;
const MAX_REPOSITORY = 255;
const PATH_COMPONENT = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/;
const TAG = /^\w[\w.-]{0,127}$/;
const DIGEST = /^sha256:[a-f0-9]{64}$/;
const HOST_LABEL = /^[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?$/;
const IPV6 = /^\[[0-9a-fA-F:.]+\]$/;

function bad(input: string, why: string): ImageError {
  const shown = input.length > 80 ? `${input.slice(0, 77)}...` : input;
  return new ImageError('bad-reference', `"${shown}" is not a valid image reference: ${why}.`);
}

/** True when the first path component names a registry rather than a repository. */
function looksLikeHost(component: string): boolean {
  return (
    component.includes('.') ||
    component.includes(':') ||
    component === 'localhost' ||
    component.startsWith('[')
  );
}

function validHost(host: string): boolean {
  let name = host;
  let port: string | undefined;
  const ipv6End = host.startsWith('[') ? host.indexOf(']') : -1;
  const colon = host.indexOf(':', ipv6End + 1);
  if (colon >= 0) {
    name = host.slice(0, colon);
    port = host.slice(colon + 1);
    if (!/^\d{1,5}$/.test(port) || Number(port) < 1 || Number(port) > 65535) return false;
  }
  if (name.startsWith('[')) return IPV6.test(name);
  return name.length > 0 && name.length <= 253 && name.split('.').every((l) => HOST_LABEL.test(l));
}

/**
 * Parses an image reference. Throws ImageError('bad-reference') with a sentence saying
 * what is wrong. Only sha256 digests are accepted (the only algorithm registries use).
 */
export function parseReference(input: string): ImageReference {
  if (typeof input !== 'string' || input.length === 0) throw bad('', 'it is empty');
  if (input.length > MAX_REFERENCE) {
    throw bad(input, `it is longer than ${MAX_REFERENCE} characters`);
  }
  if (/\s/.test(input)) throw bad(input, 'it contains white space');

  let rest = input;
  let digest: string | undefined;
  const at = rest.indexOf('@');
  if (at >= 0) {
    digest = rest.slice(at + 1);
    rest = rest.slice(0, at);
    if (!DIGEST.test(digest)) {
      throw bad(input, 'the digest must be "sha256:" followed by 64 lowercase hex digits');
    }
  }

  let registry = DOCKER_HUB;
  const slash = rest.indexOf('/');
  if (slash >= 0 && looksLikeHost(rest.slice(0, slash))) {
    registry = rest.slice(0, slash).toLowerCase();
    rest = rest.slice(slash + 1);
    if (!validHost(registry)) throw bad(input, `"${registry}" is not a valid registry host`);
  }

  let tag: string | undefined;
  const colon = rest.lastIndexOf(':');
  if (colon >= 0) {
    tag = rest.slice(colon + 1);
    rest = rest.slice(0, colon);
    if (!TAG.test(tag)) {
      throw bad(
        input,
        `"${tag}" is not a valid tag (letters, digits, "_", "." and "-", at most 128)`,
      );
    }
  }

  if (rest.length === 0) throw bad(input, 'the repository name is missing');
  const components = rest.split('/');
  for (const c of components) {
    if (!PATH_COMPONENT.test(c)) {
      throw bad(
        input,
        `"${c}" is not a valid repository name component (lowercase letters, digits and single separators)`,
      );
    }
  }
  if (DOCKER_HUB_ALIASES.has(registry)) {
    registry = DOCKER_HUB;
    if (components.length === 1) components.unshift('library');
  }
  const repository = components.join('/');
  if (repository.length > MAX_REPOSITORY) {
    throw bad(input, `the repository name is longer than ${MAX_REPOSITORY} characters`);
  }
  if (!tag && !digest) tag = 'latest';
  return { registry, repository, ...(tag ? { tag } : {}), ...(digest ? { digest } : {}) };
}

/** The canonical string of a reference: `docker.io/library/busybox:latest`, `host/app@sha256:…`. */
export function formatReference(ref: ImageReference): string {
  let s = `${ref.registry}/${ref.repository}`;
  if (ref.tag) s += `:${ref.tag}`;
  if (ref.digest) s += `@${ref.digest}`;
  return s;
}

/** The tag or digest to ask the registry's manifest endpoint for (the digest wins). */
export function manifestReference(ref: ImageReference): string {
  return ref.digest ?? ref.tag ?? 'latest';
}
