import { describe, expect, it } from 'vitest';
import { scopeSchema } from '../contracts/tokens.js';
import { neededScopeSentence, scopesCover } from './scopes.js';

describe('scopes', () => {
  it('accepts exactly the scope forms of spec 2.1', () => {
    for (const s of ['read', 'deploy', 'deploy:web', 'mail:send', 'mail:send:mail.example.com']) {
      expect(scopeSchema.safeParse(s).success, s).toBe(true);
    }
    for (const s of ['write', 'deploy:', 'deploy:Web', 'mail:send:', 'mail:send:nodot', 'READ']) {
      expect(scopeSchema.safeParse(s).success, s).toBe(false);
    }
  });

  it('decides what scoped keys reach', () => {
    expect(scopesCover(null, ['F'])).toBe(true);
    expect(scopesCover(['read'], ['F'])).toBe(false);
    expect(scopesCover(['read'], ['R'])).toBe(true);
    expect(scopesCover(['deploy'], ['D'], 'web')).toBe(true);
    expect(scopesCover(['deploy:web'], ['D'], 'web')).toBe(true);
    expect(scopesCover(['deploy:web'], ['D'], 'api')).toBe(false);
    expect(scopesCover(['deploy:web'], ['D', 'R'], 'api')).toBe(false);
    expect(scopesCover(['read'], ['D', 'R'], 'api')).toBe(true);
    expect(scopesCover([], ['R'])).toBe(false);
  });

  it('names the needed scope', () => {
    expect(neededScopeSentence(['F'])).toContain('full-access');
    expect(neededScopeSentence(['R'])).toContain('`read`');
    expect(neededScopeSentence(['D'], 'web')).toContain('`deploy:web`');
  });
});
