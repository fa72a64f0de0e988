/**
 * The branch-name rule of `PUT /v1/apps/:name/git` agrees with git's own
 * (`git check-ref-format --branch`), name by name, for names of every kind of problem.
 */
import { execFileSync } from 'node:child_process';
import os from 'node:os';
import { describe, expect, it } from 'vitest';
import { BRANCH_NAME_MAX, branchNameProblem } from './git.js';

function gitTakes(name: string): boolean {
  try {
    // Outside any repository: `--branch` would otherwise expand `@{-1}` and the like there.
    execFileSync('git', ['check-ref-format', '--branch', name], {
      stdio: 'ignore',
      cwd: os.tmpdir(),
    });
    return true;
  } catch {
    return false;
  }
}

describe('branchNameProblem', () => {
  const good = ['main', 'trunk', 'release/2024', 'feature/New-Look', 'a.b', 'x-y_z', 'v1@2', 'été'];
  const bad = [
    'a..b',
    '-lead',
    'has space',
    'tab\there',
    'ctl\u0001',
    'del\u007f',
    'a~b',
    'a^b',
    'a:b',
    'a?b',
    'a*b',
    'a[b',
    'a\\b',
    'trail/',
    '/lead',
    'a//b',
    'x.lock',
    'a/b.lock/c',
    'dot.',
    '.hidden',
    'a/.hidden',
    'at@{x',
    'HEAD',
  ];

  it('takes what git takes and refuses what git refuses', () => {
    for (const name of good) {
      expect(branchNameProblem(name), name).toBeUndefined();
      expect(gitTakes(name), name).toBe(true);
    }
    for (const name of bad) {
      expect(branchNameProblem(name), name).toBeDefined();
      expect(gitTakes(name), name).toBe(false);
    }
    // git reads a lone `@` as HEAD (and answers the branch checked out); pier refuses it.
    expect(branchNameProblem('@')).toBe("may not be '@'");
  });

  it('bounds the length, and names the problem', () => {
    expect(branchNameProblem('b'.repeat(BRANCH_NAME_MAX))).toBeUndefined();
    expect(branchNameProblem('b'.repeat(BRANCH_NAME_MAX + 1))).toMatch(/longer than 255/);
    expect(branchNameProblem('')).toBe('is empty');
    expect(branchNameProblem('a..b')).toBe("may not contain '..'");
    expect(branchNameProblem('a b')).toBe('may not contain spaces or control characters');
  });
});
