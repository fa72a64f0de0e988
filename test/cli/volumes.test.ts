/**
 * `pier volumes …` against a real pier: create, list and show (by name and by id),
 * resize, attach and detach, delete with and without --yes, `--json`, and the error
 * paths (bad fields with their issues, unknown volume, delete while attached).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestOrg, type TestPlatform } from '../helpers/platform.js';
import { pierWith, startCliBed, type CliBed } from './run-cli.js';

let tp: TestPlatform;
let org: TestOrg;
let tmp: CliBed['tmp'];
let env: Record<string, string>;
const pier = pierWith(() => env);

beforeAll(async () => {
  ({ tp, org, tmp, env } = await startCliBed());
  expect(
    (await tp.request('POST', '/v1/apps', { token: org.token, body: { name: 'web' } })).status,
  ).toBe(201);
});
afterAll(async () => {
  await tp?.close();
  await tmp?.remove();
});

describe('pier volumes', () => {
  let id = '';

  it('creates volumes with the defaults and with every flag', async () => {
    const [plain, durable] = await Promise.all([
      pier(['volumes', 'create', 'uploads']),
      pier([
        'volumes',
        'create',
        'ledger',
        '--size',
        '2',
        '--mount-path',
        '/var/ledger',
        '--class',
        'durable',
        '--flush-interval',
        '60',
        '--json',
      ]),
    ]);
    expect(plain.code, plain.stderr).toBe(0);
    expect(plain.stdout).toMatch(/^Created volume uploads \((vol-\w+)\), 10 GB at \/data\.\n$/);
    id = /\((vol-\w+)\)/.exec(plain.stdout)![1]!;
    expect(durable.code, durable.stderr).toBe(0);
    expect(JSON.parse(durable.stdout)).toMatchObject({
      name: 'ledger',
      sizeGb: 2,
      mountPath: '/var/ledger',
      class: 'durable',
      flushIntervalS: 60,
    });
  });

  it('lists them and shows one by name or by id', async () => {
    const [table, json, byName, byId, showJson] = await Promise.all([
      pier(['volumes', 'list']),
      pier(['volumes', 'list', '--json']),
      pier(['volumes', 'show', 'uploads']),
      pier(['volumes', 'show', id]),
      pier(['volumes', 'show', 'ledger', '--json']),
    ]);
    for (const out of [table, json, byName, byId, showJson]) expect(out.code, out.stderr).toBe(0);
    const lines = table.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^NAME\s+ID\s+SIZE\s+CLASS\s+MOUNT\s+APP\s+MACHINE\s+CREATED$/);
    expect(table.stdout).toMatch(
      /^uploads\s+vol-\w+\s+10 GB\s+standard\s+\/data\s+-\s+-\s+\d{4}-/m,
    );
    expect(table.stdout).toMatch(/^ledger\s+vol-\w+\s+2 GB\s+durable\s+\/var\/ledger\s+-\s+-/m);
    expect(
      JSON.parse(json.stdout)
        .map((v: { name: string }) => v.name)
        .sort(),
    ).toEqual(['ledger', 'uploads']);
    expect(byName.stdout).toBe(byId.stdout);
    expect(byName.stdout).toMatch(/^Name: +uploads$/m);
    expect(byName.stdout).toMatch(new RegExp(`^ID: +${id}$`, 'm'));
    expect(byName.stdout).toMatch(/^Size: +10 GB$/m);
    expect(byName.stdout).toMatch(/^App: +-$/m);
    expect(byName.stdout).not.toMatch(/^Copied every/m);
    expect(JSON.parse(showJson.stdout)).toMatchObject({ name: 'ledger', class: 'durable' });
  });

  it('resizes (also as extend) and changes the copy interval', async () => {
    const grown = await pier(['volumes', 'resize', 'uploads', '--size', '12']);
    expect(grown.code, grown.stderr).toBe(0);
    expect(grown.stdout).toBe('Volume uploads is 12 GB.\n');
    const extended = await pier(['volumes', 'extend', id, '--size', '13', '--json']);
    expect(JSON.parse(extended.stdout)).toMatchObject({ id, sizeGb: 13 });
    const interval = await pier(['volumes', 'resize', 'ledger', '--flush-interval', '120']);
    expect(interval.stdout).toBe('Volume ledger is 2 GB, copied every 120s.\n');
    const nothing = await pier(['volumes', 'resize', 'uploads']);
    expect(nothing.code).toBe(1);
    expect(nothing.stderr).toBe('pier: give --size and/or --flush-interval\n');
    const tooBig = await pier(['volumes', 'resize', 'uploads', '--size', '501']);
    expect(tooBig.code).toBe(1);
    expect(tooBig.stderr).toMatch(/^pier: .+ \(bad-request\)\n {2}- sizeGb: /);
  });

  it('attaches to an app, refuses to delete while attached, detaches', async () => {
    const attached = await pier(['volumes', 'attach', 'uploads', 'web']);
    expect(attached.code, attached.stderr).toBe(0);
    expect(attached.stdout).toBe('Attached volume uploads to web at /data.\n');
    expect((await pier(['volumes', 'show', 'uploads'])).stdout).toMatch(/^App: +web$/m);
    const busy = await pier(['volumes', 'delete', 'uploads', '--yes']);
    expect(busy.code).toBe(1);
    expect(busy.stderr).toMatch(/\(volume-attached\)\n$/);
    const detached = await pier(['volumes', 'detach', 'uploads']);
    expect(detached.code, detached.stderr).toBe(0);
    expect(detached.stdout).toBe('Detached volume uploads from web.\n');
    const again = await pier(['volumes', 'detach', 'uploads']);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/\(not-attached\)\n$/);
  });

  it('deletes only with --yes when there is no terminal to ask on', async () => {
    const refused = await pier(['volumes', 'delete', 'ledger']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toBe(
      'pier: refusing to delete ledger without --yes (no terminal to ask on)\n',
    );
    const deleted = await pier(['volumes', 'delete', 'ledger', '--yes']);
    expect(deleted.code, deleted.stderr).toBe(0);
    expect(deleted.stdout).toBe('Deleted volume ledger.\n');
    const list = JSON.parse((await pier(['volumes', 'list', '--json'])).stdout);
    expect(list.map((v: { name: string }) => v.name)).toEqual(['uploads']);
  });

  it('reports bad fields, unknown volumes and a missing key plainly', async () => {
    const [bad, taken, unknown, unknownId, noKey] = await Promise.all([
      pier(['volumes', 'create', 'Bad Name', '--mount-path', '/proc/x']),
      pier(['volumes', 'create', 'web']),
      pier(['volumes', 'show', 'nosuch']),
      pier(['volumes', 'delete', 'vol-nosuch', '--yes']),
      pier(['volumes', 'list'], { env: { PIER_API_KEY: undefined } }),
    ]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/^pier: .+ \(bad-request\)$/m);
    expect(bad.stderr).toMatch(/^ {2}- name: /m);
    expect(bad.stderr).toMatch(/^ {2}- mountPath: /m);
    expect(taken.code).toBe(1);
    expect(taken.stderr).toMatch(/\(name-taken\)\n$/);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toBe("pier: Volume 'nosuch' not found. (not-found)\n");
    expect(unknownId.stderr).toBe("pier: Volume 'vol-nosuch' not found. (not-found)\n");
    expect(noKey.code).toBe(1);
    expect(noKey.stderr).toMatch(/^pier: no API key for .+; run `pier login` or set PIER_API_KEY/);
  });
});
