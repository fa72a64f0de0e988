/**
 * What `pier deploy` packs (src/cli/client/source-pack.ts, ignore-rules.ts): Docker's and
 * git's ignore rules (negation, `**`, directory patterns, anchoring, nested .gitignore),
 * `.git` never, the Dockerfile always, and an archive whose entries are exactly the list.
 */
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { list } from 'tar';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IgnoreRules } from '../../src/cli/client/ignore-rules.js';
import { listSource, packSource } from '../../src/cli/client/source-pack.js';

let root: string;

/** Makes a tree under a fresh directory: path -> content (a trailing `/` is a directory). */
async function tree(name: string, files: Record<string, string>): Promise<string> {
  const dir = path.join(root, name);
  await mkdir(dir, { recursive: true });
  for (const [p, content] of Object.entries(files)) {
    const abs = path.join(dir, p);
    if (p.endsWith('/')) await mkdir(abs, { recursive: true });
    else {
      await mkdir(path.dirname(abs), { recursive: true });
      await writeFile(abs, content);
    }
  }
  return dir;
}

beforeAll(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), 'pier-pack-test-'));
});

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

describe('ignore rules', () => {
  it('docker: anchored at the top, a directory match covers its contents, ** and ! work', () => {
    const r = new IgnoreRules('docker').add(
      [
        '# comment',
        '*.log',
        '/build',
        'node_modules/',
        '**/*.tmp',
        'docs',
        '!docs/keep.md',
        '',
      ].join('\n'),
    );
    expect(r.ignores('a.log', false)).toBe(true);
    // Docker's patterns are anchored: `*.log` is the top only.
    expect(r.ignores('sub/a.log', false)).toBe(false);
    expect(r.ignores('build', true)).toBe(true);
    expect(r.ignores('build/out.js', false)).toBe(true);
    expect(r.ignores('node_modules/x/index.js', false)).toBe(true);
    expect(r.ignores('a/b/c.tmp', false)).toBe(true);
    expect(r.ignores('c.tmp', false)).toBe(true);
    expect(r.ignores('docs/guide.md', false)).toBe(true);
    expect(r.ignores('docs/keep.md', false)).toBe(false);
    expect(r.ignores('src/index.js', false)).toBe(false);
    expect(r.hasNegations).toBe(true);
  });

  it('git: unanchored names match at any depth, trailing / is directories only, ** forms', () => {
    const r = new IgnoreRules('git').add(
      [
        '*.log',
        '/dist',
        'cache/',
        'a/**/z',
        'logs/**',
        '!logs/keep.txt',
        '\\#hash',
        'spaced\\ ',
        'f[0-9].txt',
      ].join('\n'),
    );
    expect(r.ignores('sub/deep/a.log', false)).toBe(true);
    expect(r.ignores('dist', true)).toBe(true);
    expect(r.ignores('sub/dist', true)).toBe(false);
    expect(r.ignores('sub/cache', true)).toBe(true);
    expect(r.ignores('sub/cache', false)).toBe(false);
    expect(r.ignores('a/z', false)).toBe(true);
    expect(r.ignores('a/b/c/z', false)).toBe(true);
    expect(r.ignores('logs', true)).toBe(false);
    expect(r.ignores('logs/x.txt', false)).toBe(true);
    expect(r.ignores('logs/keep.txt', false)).toBe(false);
    expect(r.ignores('#hash', false)).toBe(true);
    expect(r.ignores('spaced ', false)).toBe(true);
    expect(r.ignores('f7.txt', false)).toBe(true);
    expect(r.ignores('fx.txt', false)).toBe(false);
  });

  it('git: a nested file applies below its own directory only', () => {
    const r = new IgnoreRules('git').add('*.tmp').add('secret.txt\n!keep.tmp', 'sub');
    expect(r.ignores('sub/secret.txt', false)).toBe(true);
    expect(r.ignores('secret.txt', false)).toBe(false);
    expect(r.ignores('sub/keep.tmp', false)).toBe(false);
    expect(r.ignores('keep.tmp', false)).toBe(true);
  });
});

describe('listSource and packSource', () => {
  it('honours .dockerignore over .gitignore, keeps the Dockerfile, never sends .git', async () => {
    const dir = await tree('docker', {
      '.dockerignore': 'Dockerfile\n*.md\n!README.md\nsecrets\n**/*.pyc\nvendor\n!vendor/keep.js\n',
      '.gitignore': 'app.js\n',
      Dockerfile: 'FROM scratch\n',
      'README.md': 'readme',
      'NOTES.md': 'notes',
      'app.js': 'x',
      'lib/a.pyc': 'c',
      'lib/a.py': 'p',
      'secrets/key': 'k',
      'vendor/big.js': 'b',
      'vendor/keep.js': 'k',
      'empty/': '',
      '.git/HEAD': 'ref',
    });
    const listing = await listSource(dir, ['Dockerfile']);
    expect(listing.ignoreFile).toBe('.dockerignore');
    expect(listing.entries).toEqual([
      '.dockerignore',
      '.gitignore',
      'Dockerfile',
      'README.md',
      'app.js',
      'empty',
      'lib',
      'lib/a.py',
      'vendor/keep.js',
    ]);
  });

  it('uses .gitignore files (nested too) without a .dockerignore; an ignored directory stays out', async () => {
    const dir = await tree('git', {
      '.gitignore': 'node_modules/\n*.log\nbuild/\n',
      'index.js': 'x',
      'debug.log': 'l',
      'node_modules/dep/index.js': 'd',
      'build/out.js': 'o',
      'src/.gitignore': 'generated.js\n!important.log\n',
      'src/main.js': 'm',
      'src/generated.js': 'g',
      'src/important.log': 'i',
      'docker/Dockerfile': 'FROM scratch\n',
      '.git/config': 'c',
      'sub/.git': 'gitdir: elsewhere',
    });
    const listing = await listSource(dir, ['docker/Dockerfile']);
    expect(listing.ignoreFile).toBe('.gitignore');
    expect(listing.entries).toEqual([
      '.gitignore',
      'docker',
      'docker/Dockerfile',
      'index.js',
      'src',
      'src/.gitignore',
      'src/important.log',
      'src/main.js',
      'sub',
    ]);
  });

  it('packs exactly the listed entries, links as links, into a gzip tar with its sha256', async () => {
    const dir = await tree('pack', {
      '.gitignore': 'tmp/\n',
      'index.html': '<h1>hi</h1>\n',
      'tmp/scratch': 's',
      'assets/site.css': 'body{}',
    });
    await symlink('index.html', path.join(dir, 'home.html'));
    const packed = await packSource(dir);
    try {
      const seen: string[] = [];
      await list({ file: packed.file, onReadEntry: (e) => seen.push(`${e.type}:${e.path}`) });
      expect(seen).toEqual([
        'File:.gitignore',
        'Directory:assets/',
        'File:assets/site.css',
        'SymbolicLink:home.html',
        'File:index.html',
      ]);
      expect(packed.sha256).toMatch(/^[0-9a-f]{64}$/);
      // The same tree packs to the same bytes: a re-deploy uploads an identical archive.
      const again = await packSource(dir);
      expect(again.sha256).toBe(packed.sha256);
      await again.remove();
    } finally {
      await packed.remove();
    }
    await expect(packSource(path.join(dir, 'index.html'))).rejects.toThrow(/is not a directory/);
    await expect(packSource(path.join(dir, 'nope'))).rejects.toThrow(/cannot read .*ENOENT/);
  });
});
