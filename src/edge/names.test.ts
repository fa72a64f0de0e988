/** Public suffixes by the Public Suffix List (ICANN and private sections), not a hand list. */
import { describe, expect, it } from 'vitest';
import { hostnameProblem, publicSuffixOf } from './names.js';

describe('publicSuffixOf', () => {
  it('names public suffixes of both sections, and nothing below them', () => {
    for (const name of ['com', 'co.uk', 'github.io', 's3.amazonaws.com', 'blogspot.com'])
      expect(publicSuffixOf(name), name).toBe(name);
    for (const name of ['foo.co.uk', 'me.github.io', 'example.com', 'example.test', 'test'])
      expect(publicSuffixOf(name), name).toBeUndefined();
  });

  it('makes hostnameProblem refuse them', () => {
    expect(hostnameProblem('co.uk')).toMatch(/public suffix/);
    expect(hostnameProblem('com')).toMatch(/public suffix/);
    expect(hostnameProblem('foo.co.uk')).toBeUndefined();
  });
});
