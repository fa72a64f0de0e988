/**
 * A client of one repository on one registry, over the registry HTTP API v2: resolve a
 * tag to a digest, fetch manifests (verified against their digest) and open blob
 * downloads. It answers auth challenges (see auth.ts) and keeps the resulting
 * Authorization for later requests; a 401 on a stale token simply fetches a new one.
 * Statuses map to ImageError codes here, so nothing above speaks HTTP.
 */
import { createHash } from 'node:crypto';
import { basicAuth, fetchToken, parseChallenge, type Credentials } from './auth.js';
import { ImageError } from './errors.js';
import {
  readLimited,
  schemeFor,
  send,
  type Answer,
  type FetchLike,
  type TransportOptions,
} from './http.js';
import { MANIFEST_ACCEPT } from './manifest.js';
import { DOCKER_HUB } from './reference.js';

const MAX_MANIFEST = 4 * 1024 * 1024;

/** What a client needs: the transport and, when the registry wants them, credentials. */
export interface RegistryClientOptions {
  /** The guard's fetch (every hop checked): see http.ts. */
  fetch: FetchLike;
  timeoutMs: number;
  credentials?: () => Credentials | undefined;
}

/** A fetched manifest: its verified digest, bytes and Content-Type. */
export interface FetchedManifest {
  digest: string;
  body: Buffer;
  contentType: string | null;
}

export function sha256Digest(bytes: Buffer): string {
  return `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
}

/** Client of `registry/repository`. */
export class RegistryClient {
  private readonly base: URL;
  private authorization: string | undefined;
  private pendingAuth: Promise<string> | undefined;

  constructor(
    readonly registry: string,
    readonly repository: string,
    private readonly opts: RegistryClientOptions,
  ) {
    const apiHost = registry === DOCKER_HUB ? 'registry-1.docker.io' : registry;
    this.base = new URL(`${schemeFor(apiHost)}//${apiHost}/v2/${repository}/`);
  }

  private get name(): string {
    return `${this.registry}/${this.repository}`;
  }

  /**
   * The digest a tag (or digest) names now, by a HEAD request: cheap, and not counted by
   * registries' pull rate limits. Undefined when the registry sends no digest header.
   */
  async resolve(reference: string, signal?: AbortSignal): Promise<string | undefined> {
    const answer = await this.request(
      'HEAD',
      `manifests/${reference}`,
      MANIFEST_ACCEPT,
      signal,
      reference,
    );
    answer.done();
    await answer.response.body?.cancel().catch(() => undefined);
    const d = answer.response.headers.get('docker-content-digest');
    return d && /^sha256:[a-f0-9]{64}$/.test(d) ? d : undefined;
  }

  /**
   * Fetches a manifest by tag or digest and verifies its bytes: against the digest asked
   * for, or else against the registry's Docker-Content-Digest header when it sends one.
   */
  async manifest(reference: string, signal?: AbortSignal): Promise<FetchedManifest> {
    const answer = await this.request(
      'GET',
      `manifests/${reference}`,
      MANIFEST_ACCEPT,
      signal,
      reference,
    );
    const body = await readLimited(
      answer,
      MAX_MANIFEST,
      `The manifest of ${this.name}:${reference}`,
    );
    const digest = sha256Digest(body);
    const expected = reference.startsWith('sha256:')
      ? reference
      : answer.response.headers.get('docker-content-digest');
    if (expected && expected.startsWith('sha256:') && expected !== digest) {
      throw new ImageError(
        'digest-mismatch',
        `The manifest ${this.registry} sent for ${this.name}@${expected} hashes to ${digest}.`,
      );
    }
    return { digest, body, contentType: answer.response.headers.get('content-type') };
  }

  /** Opens a blob download. The caller reads the body (touching `idle`) and calls `done()`. */
  async blob(digest: string, signal?: AbortSignal): Promise<Answer> {
    return this.request('GET', `blobs/${digest}`, '*/*', signal, digest);
  }

  private async request(
    method: string,
    path: string,
    accept: string,
    signal: AbortSignal | undefined,
    what: string,
  ): Promise<Answer> {
    const url = new URL(path, this.base);
    const transport = { fetch: this.opts.fetch, timeoutMs: this.opts.timeoutMs, signal };
    for (let attempt = 0; ; attempt++) {
      const headers: Record<string, string> = { accept };
      if (this.authorization) headers.authorization = this.authorization;
      const answer = await send(url, { method, headers }, transport);
      const { status } = answer.response;
      if (status >= 200 && status <= 299) return answer;
      const body =
        method === 'HEAD'
          ? Buffer.alloc(0)
          : await readLimited(answer, 64 * 1024, 'An error answer').catch(() => Buffer.alloc(0));
      answer.done();
      if (status === 401 && attempt === 0) {
        const sent = this.authorization;
        await this.authenticate(answer.response.headers.get('www-authenticate'), sent, transport);
        continue;
      }
      throw this.statusError(status, body, what);
    }
  }

  /** Answers a challenge once, even when several requests met it at the same time. */
  private async authenticate(
    header: string | null,
    sent: string | undefined,
    transport: TransportOptions,
  ): Promise<void> {
    // Another request may already have renewed the Authorization we failed with.
    if (this.authorization !== sent) return;
    this.pendingAuth ??= this.challengeAnswer(header, transport).finally(() => {
      this.pendingAuth = undefined;
    });
    this.authorization = await this.pendingAuth;
  }

  private async challengeAnswer(
    header: string | null,
    transport: TransportOptions,
  ): Promise<string> {
    const challenge = header ? parseChallenge(header) : undefined;
    const credentials = this.opts.credentials?.();
    if (challenge?.scheme === 'bearer') {
      const scope = `repository:${this.repository}:pull`;
      return `Bearer ${await fetchToken(challenge, scope, credentials, this.registry, transport)}`;
    }
    if (challenge?.scheme === 'basic' && credentials) return basicAuth(credentials);
    throw new ImageError(
      'unauthorized',
      challenge?.scheme === 'basic'
        ? `${this.registry} requires credentials for ${this.name}.`
        : `${this.registry} refused access to ${this.name} without a usable challenge.`,
    );
  }

  private statusError(status: number, body: Buffer, what: string): ImageError {
    let codes: string[] = [];
    try {
      const json = JSON.parse(body.toString('utf8')) as { errors?: { code?: string }[] };
      codes = (json.errors ?? []).map((e) => String(e.code ?? ''));
    } catch {
      // not every registry sends a JSON error body (HEAD never does)
    }
    if (status === 404 || status === 410) {
      if (codes.includes('NAME_UNKNOWN')) {
        return new ImageError(
          'not-found',
          `${this.registry} has no repository ${this.repository}.`,
        );
      }
      return new ImageError('not-found', `${this.registry} has no ${what} in ${this.repository}.`);
    }
    if (status === 401 || status === 403) {
      return new ImageError(
        'unauthorized',
        `${this.registry} refused access to ${this.name}: it does not exist or needs other credentials.`,
      );
    }
    if (status === 429 || status >= 500) {
      return new ImageError(
        'unreachable',
        `${this.registry} answered ${status} for ${this.name}; try again later.`,
      );
    }
    return new ImageError(
      'unsupported',
      `${this.registry} answered ${status} for ${what} in ${this.repository}.`,
    );
  }
}
