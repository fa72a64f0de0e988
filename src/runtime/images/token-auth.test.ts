/**
 * The Bearer token flow against the real registry configured with `auth: token`: the
 * registry answers 401 with a challenge naming our token service, which only serves users
 * with a password, and verifies the JWTs it issues against the certificate it trusts.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTokenRegistry, type TokenRegistry } from '../../../test/helpers/registry.js';
import { OutboundGuard } from '../../host/outbound-guard.js';
import { busyboxLayer, pushImage, type PushedImage } from './build.test-helper.js';
import { ImageError, ImageStore } from './index.js';

let registry: TokenRegistry;
let work: string;
let image: PushedImage;
let ref: string;

beforeAll(async () => {
  registry = await startTokenRegistry({ users: { pier: 's3cret' } });
  work = await mkdtemp(path.join(os.tmpdir(), 'pier-images-auth-'));
  image = await pushImage(
    registry.url,
    'private/app:1',
    { layers: [busyboxLayer(['sh'])] },
    { authorization: registry.authorization('private/app') },
  );
  ref = `${registry.host}/private/app:1`;
});
afterAll(async () => {
  await registry?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

/** The registry and its token service are on 127.0.0.1: trusted as an operator would. */
const guard = () => new OutboundGuard({ trusted: [registry.host, new URL(registry.realm).host] });

async function store(credentials?: { username: string; password: string }) {
  const dir = await mkdtemp(path.join(work, 'store-'));
  return new ImageStore({
    dir,
    guard: guard(),
    ...(credentials ? { credentials: () => credentials } : {}),
  });
}

it('is refused without a token', async () => {
  const res = await fetch(`${registry.url}/v2/private/app/manifests/1`);
  expect(res.status).toBe(401);
  expect(res.headers.get('www-authenticate')).toContain(`realm="${registry.realm}"`);
});

it('pulls with credentials through the token service', async () => {
  const asked: string[] = [];
  const dir = await mkdtemp(path.join(work, 'store-'));
  const s = new ImageStore({
    dir,
    guard: guard(),
    credentials: (host) => {
      asked.push(host);
      return { username: 'pier', password: 's3cret' };
    },
  });
  const before = registry.tokenRequests();
  const pulled = await s.pull(ref);
  expect(pulled.digest).toBe(image.digest);
  expect(asked).toEqual([registry.host]);
  // One token for the whole pull: HEAD, manifest, config and layer all reuse it.
  expect(registry.tokenRequests() - before).toBe(1);
});

it('says unauthorized without credentials or with wrong ones', async () => {
  for (const s of [await store(), await store({ username: 'pier', password: 'wrong' })]) {
    const err = await s.pull(ref).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ImageError);
    expect(err).toMatchObject({ code: 'unauthorized' });
  }
});
