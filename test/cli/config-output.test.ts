/** The client's pure parts, in process: config resolution, the config file, tables, errors. */
import { chmod, readFile, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseRetryAfter, toApiCallError } from '../../src/cli/client/api-client.js';
import {
  configPath,
  DEFAULT_API_URL,
  resolveSettings,
  writeConfigFile,
} from '../../src/cli/client/config-file.js';
import { describeError } from '../../src/cli/client/errors.js';
import { table, when } from '../../src/cli/client/output.js';
import { tempDir } from './run-cli.js';

let tmp: Awaited<ReturnType<typeof tempDir>>;
beforeAll(async () => {
  tmp = await tempDir();
});
afterAll(async () => tmp?.remove());

describe('config file', () => {
  it('lives at PIER_CONFIG, else XDG_CONFIG_HOME, else ~/.config', () => {
    expect(configPath({ PIER_CONFIG: '/a/b.json', XDG_CONFIG_HOME: '/x' })).toBe('/a/b.json');
    expect(configPath({ XDG_CONFIG_HOME: '/x' })).toBe('/x/pier/config.json');
    expect(configPath({ HOME: '/home/p' })).toMatch(/\/\.config\/pier\/config\.json$/);
  });

  it('is written 0600 even over a wider old file', async () => {
    const file = path.join(tmp.dir, 'wide.json');
    await writeFile(file, '{}', { mode: 0o644 });
    await chmod(file, 0o644);
    await writeConfigFile({ apiUrl: 'http://h:1', apiKey: 'k' }, file);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect(JSON.parse(await readFile(file, 'utf8'))).toEqual({ apiUrl: 'http://h:1', apiKey: 'k' });
  });

  it('is overridden by the flag and the environment, and keeps its key to its own address', async () => {
    const file = path.join(tmp.dir, 'saved.json');
    await writeConfigFile({ apiUrl: 'http://saved:8080/', apiKey: 'saved-key' }, file);
    const env = { PIER_CONFIG: file };
    expect(await resolveSettings({}, env)).toEqual({
      apiUrl: 'http://saved:8080',
      apiKey: 'saved-key',
      keySource: 'file',
    });
    expect(await resolveSettings({}, { ...env, PIER_API_KEY: 'env-key' })).toMatchObject({
      apiKey: 'env-key',
      keySource: 'env',
    });
    expect(await resolveSettings({}, { ...env, PIER_API_URL: 'http://other' })).toEqual({
      apiUrl: 'http://other',
    });
    expect(
      await resolveSettings({ apiUrl: 'http://flag' }, { ...env, PIER_API_URL: 'http://other' }),
    ).toEqual({ apiUrl: 'http://flag' });
    expect(await resolveSettings({}, { PIER_CONFIG: path.join(tmp.dir, 'none.json') })).toEqual({
      apiUrl: DEFAULT_API_URL,
    });
    await expect(resolveSettings({ apiUrl: 'ftp://x' }, env)).rejects.toThrow(/http or https/);
  });

  it('reports a broken file instead of ignoring it', async () => {
    const file = path.join(tmp.dir, 'broken.json');
    await writeFile(file, '{nope');
    await expect(resolveSettings({}, { PIER_CONFIG: file })).rejects.toThrow(/not valid JSON/);
  });
});

describe('output and errors', () => {
  it('aligns table columns without trailing blanks', () => {
    expect(
      table(
        ['A', 'LONG'],
        [
          ['xyz', '1'],
          ['q', '22'],
        ],
      ),
    ).toBe('A    LONG\nxyz  1\nq    22');
  });

  it('shortens timestamps to the minute in UTC', () => {
    expect(when('2025-01-31T14:05:59.123Z')).toBe('2025-01-31 14:05Z');
    expect(when(undefined)).toBe('-');
  });

  it('renders error answers, ours and foreign', () => {
    const ours = toApiCallError({
      status: 400,
      headers: new Headers(),
      body: {
        error: 'Invalid name.',
        code: 'bad-request',
        issues: [{ path: 'name', message: 'too long' }],
      },
    });
    expect(describeError(ours)).toEqual([
      'pier: Invalid name. (bad-request)',
      '  - name: too long',
    ]);
    const proxy = toApiCallError({
      status: 502,
      headers: new Headers(),
      body: '<html>Bad Gateway</html>',
    });
    expect(describeError(proxy)).toEqual([
      'pier: the server answered HTTP 502: <html>Bad Gateway</html> (http-502)',
    ]);
    expect(describeError(new Error('x'))).toBeUndefined();
  });

  it('reads Retry-After as seconds or as a date', () => {
    expect(parseRetryAfter('5')).toBe(5);
    expect(parseRetryAfter(null)).toBeUndefined();
    expect(parseRetryAfter(new Date(Date.now() + 10_000).toUTCString())).toBeGreaterThanOrEqual(9);
  });
});
