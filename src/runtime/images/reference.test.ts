import { describe, expect, it } from 'vitest';
import { ImageError } from './errors.js';
import { formatReference, parseReference } from './reference.js';

describe('parseReference', () => {
  const digest = `sha256:${'ab'.repeat(32)}`;
  it.each([
    ['busybox', 'docker.io/library/busybox:latest'],
    ['busybox:1.36', 'docker.io/library/busybox:1.36'],
    ['library/x:tag', 'docker.io/library/x:tag'],
    ['someone/app', 'docker.io/someone/app:latest'],
    ['index.docker.io/busybox', 'docker.io/library/busybox:latest'],
    ['docker.io/busybox', 'docker.io/library/busybox:latest'],
    ['localhost:5000/app:1', 'localhost:5000/app:1'],
    ['localhost/app', 'localhost/app:latest'],
    ['127.0.0.1:5000/a/b/c:v1.2-rc_3', '127.0.0.1:5000/a/b/c:v1.2-rc_3'],
    ['[::1]:5000/app:1', '[::1]:5000/app:1'],
    ['GHCR.io/ns/app', 'ghcr.io/ns/app:latest'],
    [`host.example/ns/app@${digest}`, `host.example/ns/app@${digest}`],
    [`app:1@${digest}`, `docker.io/library/app:1@${digest}`],
    ['ns/a-b__c.d_e', 'docker.io/ns/a-b__c.d_e:latest'],
  ])('%s → %s', (input, canonical) => {
    expect(formatReference(parseReference(input))).toBe(canonical);
  });

  it('splits the parts', () => {
    expect(parseReference(`localhost:5000/ns/app@${digest}`)).toEqual({
      registry: 'localhost:5000',
      repository: 'ns/app',
      digest,
    });
  });

  it.each([
    [''],
    ['a'.repeat(513)],
    ['UPPER'],
    ['app:'],
    ['app:-bad'],
    ['app@sha256:abc'],
    [`app@sha512:${'a'.repeat(128)}`],
    ['app name'],
    ['/app'],
    ['app/'],
    ['a//b'],
    ['host:0/app'],
    ['host:99999/app'],
    ['-host.com/app'],
    ['[::1/app'],
    ['app__-x'],
    [`x/${'a'.repeat(256)}`],
  ])('refuses %j', (input) => {
    let err: unknown;
    try {
      parseReference(input);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ImageError);
    expect((err as ImageError).code).toBe('bad-reference');
    expect((err as ImageError).message).toMatch(/is not a valid image reference: .+\.$/);
  });
});
