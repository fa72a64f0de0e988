/** `pier ssh-keys list|add|remove`: the organization's SSH public keys (spec 4.1). */
import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { apiPath } from './api-client.js';
import { type CommonOptions, connect, withCommonOptions } from './connect.js';
import { CliError, action } from './errors.js';
import { readStdin } from './input.js';
import { printJson, printTable, say, when } from './output.js';
import type { SshKey } from './types.js';

interface AddOptions extends CommonOptions {
  name?: string;
}

/** Registers `pier ssh-keys`. */
export function registerSshKeys(program: Command): void {
  const keys = program.command('ssh-keys').description('SSH public keys of the organization');

  withCommonOptions(keys.command('list').description('list SSH public keys')).action(
    action(async (opts: CommonOptions) => {
      const list = await (await connect(opts)).call<SshKey[]>('GET', '/v1/ssh-keys');
      if (opts.json) return printJson(list);
      printTable(
        ['ID', 'NAME', 'TYPE', 'BITS', 'FINGERPRINT', 'CREATED'],
        list.map((k) => [k.id, k.name, k.type, String(k.bits), k.fingerprint, when(k.createdAt)]),
        'No SSH keys.',
      );
    }),
  );

  withCommonOptions(keys.command('add').description('add an SSH public key'))
    .argument('<file>', "public key file (e.g. ~/.ssh/id_ed25519.pub), or '-' for stdin")
    .option('--name <name>', 'a name for the key (default: its comment)')
    .action(
      action(async (file: string, opts: AddOptions) => {
        const publicKey = await readPublicKey(file);
        const body = opts.name ? { publicKey, name: opts.name } : { publicKey };
        const key = await (await connect(opts)).call<SshKey>('POST', '/v1/ssh-keys', body);
        if (opts.json) return printJson(key);
        say(`Added SSH key ${key.name} (${key.type} ${key.fingerprint}) as ${key.id}.`);
      }),
    );

  withCommonOptions(keys.command('remove').description('remove an SSH public key'), { json: false })
    .argument('<id>', 'key id')
    .action(
      action(async (id: string, opts: CommonOptions) => {
        await (await connect(opts)).call('DELETE', apiPath`/v1/ssh-keys/${id}`);
        say(`Removed SSH key ${id}.`);
      }),
    );
}

/** Reads the key, refusing a private key so it can never be sent anywhere by mistake. */
async function readPublicKey(file: string): Promise<string> {
  let text: string;
  if (file === '-') {
    text = await readStdin('the public key');
  } else {
    try {
      text = await readFile(file, 'utf8');
    } catch (err) {
      throw new CliError(
        `cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
      );
    }
  }
  if (text.includes('PRIVATE KEY')) {
    throw new CliError(`${file === '-' ? 'stdin' : file} holds a private key; give the .pub file`);
  }
  const key = text.trim();
  if (!key) throw new CliError(`${file === '-' ? 'stdin' : file} is empty`);
  return key;
}
