import { describe, expect, it } from 'vitest';
import { groupByFolder, parentsOf } from './bucket-listing.js';

const entry = (key: string) => ({ key, sizeBytes: 1, lastModified: '2026-01-01T00:00:00Z' });

describe('bucket listing', () => {
  it('groups keys below the prefix into folders and files', () => {
    const keys = ['a.txt', 'img/1.png', 'img/2.png', 'img/raw/3.png', 'z/'];
    expect(groupByFolder('', keys.map(entry))).toEqual({
      folders: ['img/', 'z/'],
      files: [entry('a.txt')],
    });
    expect(groupByFolder('img/', keys.slice(1, 4).map(entry))).toEqual({
      folders: ['img/raw/'],
      files: [entry('img/1.png'), entry('img/2.png')],
    });
  });

  it('names the parents of a prefix', () => {
    expect(parentsOf('a/b/')).toEqual(['a/', 'a/b/']);
    expect(parentsOf('')).toEqual([]);
  });
});
