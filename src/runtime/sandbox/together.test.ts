import { describe, expect, it } from 'vitest';
import { together } from './together.js';

const after = <T>(ms: number, value: T, fail = false) =>
  new Promise<T>((resolve, reject) =>
    setTimeout(() => (fail ? reject(new Error(String(value))) : resolve(value)), ms),
  );

describe('together', () => {
  it('answers every step in order', async () => {
    await expect(together([after(20, 'a'), after(1, 2)])).resolves.toEqual(['a', 2]);
  });

  it('throws the first failure only once every step has ended', async () => {
    let slowEnded = false;
    const slow = after(50, 'slow').then((v) => ((slowEnded = true), v));
    await expect(
      together([after(1, 'early', true), slow, after(10, 'late', true)]),
    ).rejects.toThrow('early');
    expect(slowEnded).toBe(true);
  });
});
