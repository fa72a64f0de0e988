import { describe, expect, it } from 'vitest';
import { parseChallenge } from './auth.js';

describe('parseChallenge', () => {
  it('reads a Bearer challenge with a comma inside a quoted scope', () => {
    expect(
      parseChallenge(
        'Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull,push"',
      ),
    ).toEqual({
      scheme: 'bearer',
      params: {
        realm: 'https://auth.example/token',
        service: 'registry.example',
        scope: 'repository:a/b:pull,push',
      },
    });
  });

  it('reads unquoted values, spaces and escapes', () => {
    expect(parseChallenge('Basic realm=registry , charset="UTF-8", x="a\\"b"')).toEqual({
      scheme: 'basic',
      params: { realm: 'registry', charset: 'UTF-8', x: 'a"b' },
    });
    expect(parseChallenge('')).toBeUndefined();
  });
});
