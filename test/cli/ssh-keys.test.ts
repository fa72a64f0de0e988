import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestPlatform } from '../helpers/platform.js';
import { pierWith, startCliBed, type CliBed } from './run-cli.js';

let tp: TestPlatform;
let tmp: CliBed['tmp'];
let env: Record<string, string>;
const pier = pierWith(() => env);

/** A fresh ed25519 key pair; answers the paths of both halves. */
async function keyPair(name: string): Promise<{ priv: string; pub: string }> {
  const priv = path.join(tmp.dir, name);
  await promisify(execFile)('ssh-keygen', [
    '-t',
    'ed25519',
    '-N',
    '',
    '-C',
    `${name}@test`,
    '-f',
    priv,
    '-q',
  ]);
  return { priv, pub: `${priv}.pub` };
}

beforeAll(async () => {
  ({ tp, tmp, env } = await startCliBed());
});
afterAll(async () => {
  await tp?.close();
  await tmp?.remove();
});

describe('pier ssh-keys', () => {
  it('adds a key from a file and from stdin, lists and removes them', async () => {
    const laptop = await keyPair('laptop');
    const added = await pier(['ssh-keys', 'add', laptop.pub, '--name', 'my laptop']);
    expect(added.stderr).toBe('');
    expect(added.code).toBe(0);
    expect(added.stdout).toMatch(/^Added SSH key my laptop \(ssh-ed25519 SHA256:\S+\) as \S+\.\n$/);

    const ci = await keyPair('ci');
    const piped = await pier(['ssh-keys', 'add', '-', '--json'], {
      input: await readFile(ci.pub, 'utf8'),
    });
    expect(piped.code).toBe(0);
    const ciKey = JSON.parse(piped.stdout) as {
      id: string;
      name: string;
      type: string;
      publicKey: string;
    };
    expect(ciKey.type).toBe('ssh-ed25519');
    expect(ciKey.name).toBe('ci@test'); // no --name: the server takes the key's comment
    expect(ciKey.publicKey).toBe((await readFile(ci.pub, 'utf8')).trim());

    const [json, table] = await Promise.all([
      pier(['ssh-keys', 'list', '--json']),
      pier(['ssh-keys', 'list']),
    ]);
    const list = JSON.parse(json.stdout) as { id: string; name: string; fingerprint: string }[];
    expect(list).toHaveLength(2);
    const lines = table.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^ID\s+NAME\s+TYPE\s+BITS\s+FINGERPRINT\s+CREATED$/);
    const mine = list.find((k) => k.name === 'my laptop')!;
    expect(lines.find((l) => l.startsWith(mine.id))).toMatch(
      new RegExp(
        `my laptop\\s+ssh-ed25519\\s+256\\s+${mine.fingerprint.replace(/[+/]/g, '\\$&')}\\s`,
      ),
    );

    const removed = await pier(['ssh-keys', 'remove', mine.id]);
    expect(removed.code).toBe(0);
    expect(removed.stdout).toBe(`Removed SSH key ${mine.id}.\n`);
    const after = JSON.parse((await pier(['ssh-keys', 'list', '--json'])).stdout) as {
      id: string;
    }[];
    expect(after.map((k) => k.id)).toEqual([ciKey.id]);
  });

  it('reports a duplicate with its code', async () => {
    const dup = await keyPair('dup');
    expect((await pier(['ssh-keys', 'add', dup.pub])).code).toBe(0);
    const again = await pier(['ssh-keys', 'add', dup.pub]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/^pier: .+ \(duplicate\)\n$/);
  });

  it('never sends a private key, and says when a file is missing', async () => {
    const oops = await keyPair('oops');
    const [priv, missing] = await Promise.all([
      pier(['ssh-keys', 'add', oops.priv]),
      pier(['ssh-keys', 'add', path.join(tmp.dir, 'nope.pub')]),
    ]);
    expect(priv.code).toBe(1);
    expect(priv.stderr).toBe(`pier: ${oops.priv} holds a private key; give the .pub file\n`);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toBe(`pier: cannot read ${path.join(tmp.dir, 'nope.pub')}: ENOENT\n`);
  });

  it('reports an invalid key with its code', async () => {
    const res = await pier(['ssh-keys', 'add', '-'], { input: 'ssh-ed25519 bm90IGEga2V5 x\n' });
    expect(res.code).toBe(1);
    expect(res.stderr).toMatch(/^pier: .+ \(invalid-key\)\n/);
  });
});
