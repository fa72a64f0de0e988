/** Redirects of the access gate stay on the app's own host, whatever the request names. */
import { describe, expect, it } from 'vitest';
import { sameHostPath } from './protection-request.js';

describe('sameHostPath', () => {
  it('keeps ordinary paths and queries as they are', () => {
    expect(sameHostPath('/landing?a=1&b=%20')).toBe('/landing?a=1&b=%20');
    expect(sameHostPath('/')).toBe('/');
    expect(sameHostPath('/%2F%2Fevil')).toBe('/%2F%2Fevil');
  });

  it('never answers a Location a browser would read as another host', () => {
    const hostile = [
      '//evil.example/landing?x=1',
      '///evil.example/landing',
      '/\\evil.example/landing',
      '\\\\evil.example',
      '/\t/evil.example',
      '/..//evil.example',
      '/./\\/evil.example',
      'http://evil.example/landing?x=1',
      'https://evil.example//landing',
      '//user@evil.example',
      'javascript:alert(1)',
      'evil.example',
      '',
      null,
      undefined,
    ];
    for (const target of hostile) {
      const out = sameHostPath(target);
      expect(out, String(target)).toMatch(/^\/(?![/\\])/);
      // A browser resolving it against the app's address stays there.
      expect(new URL(out, 'http://app.pier.test/here').host, String(target)).toBe('app.pier.test');
    }
    expect(sameHostPath('//evil.example/landing?x=1')).toBe('/evil.example/landing?x=1');
    expect(sameHostPath('http://evil.example/landing?x=1')).toBe('/landing?x=1');
  });
});
