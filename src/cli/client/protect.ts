/**
 * `pier protect`: an app's protection (spec 4.6, 5.10; docs/api.md "Protection"): show,
 * public, password, signed, rotate, signed links and access tokens. A password pier
 * generates is printed once; `--password-stdin` sets one without it reaching the shell's
 * history or the process list.
 */
import type { Command } from 'commander';
import { apiPath } from './api-client.js';
import { type CommonOptions, connect, withCommonOptions } from './connect.js';
import { action } from './errors.js';
import { chompNewline, readStdin } from './input.js';
import { printFields, printJson, printTable, say, when } from './output.js';
import type { AccessToken, CreatedLink, Protection } from './types.js';

interface PasswordOptions extends CommonOptions {
  passwordStdin?: boolean;
}
interface LinkOptions extends CommonOptions {
  expiresAt?: string;
}
interface TokenOptions extends CommonOptions {
  ttl?: string;
  sub?: string;
  next?: string;
}

function showProtection(p: Protection, json: boolean | undefined): void {
  if (json) return printJson(p);
  printFields([
    ['App', p.appName],
    ['Mode', p.mode],
    ['Password', p.password ?? (p.passwordSet ? '(set; shown only once)' : undefined)],
    ['Token header', p.mode === 'signed' ? p.header : undefined],
    ['Updated', p.updatedAt ? when(p.updatedAt) : undefined],
  ]);
  if (p.links.length) {
    say('');
    printTable(
      ['LINK', 'LABEL', 'EXPIRES', 'CREATED'],
      p.links.map((l) => [
        l.id,
        l.label,
        l.expiresAt ? when(l.expiresAt) : 'never',
        when(l.createdAt),
      ]),
      '',
    );
  }
}

/** Registers `pier protect`. */
export function registerProtect(program: Command): void {
  const protect = program
    .command('protect')
    .description("an app's protection: public, password, or signed links and tokens");
  const path = (app: string) => apiPath`/v1/apps/${app}/protection`;
  const put = async (opts: CommonOptions, app: string, body: Record<string, unknown>) =>
    showProtection(await (await connect(opts)).call<Protection>('PUT', path(app), body), opts.json);

  withCommonOptions(protect.command('show').description('show the mode and the signed links'))
    .argument('<app>', 'app name')
    .action(
      action(async (app: string, opts: CommonOptions) =>
        showProtection(await (await connect(opts)).call<Protection>('GET', path(app)), opts.json),
      ),
    );

  withCommonOptions(protect.command('public').description('remove protection'))
    .argument('<app>', 'app name')
    .action(action(async (app: string, opts: CommonOptions) => put(opts, app, { mode: 'public' })));

  withCommonOptions(
    protect.command('password').description('ask visitors for a password (generated unless given)'),
  )
    .argument('<app>', 'app name')
    .option('--password-stdin', 'read the password from stdin')
    .action(
      action(async (app: string, opts: PasswordOptions) => {
        const body: Record<string, unknown> = { mode: 'password' };
        if (opts.passwordStdin) body.password = chompNewline(await readStdin('the password'));
        await put(opts, app, body);
      }),
    );

  withCommonOptions(protect.command('signed').description('admit signed links and tokens only'))
    .argument('<app>', 'app name')
    .action(action(async (app: string, opts: CommonOptions) => put(opts, app, { mode: 'signed' })));

  withCommonOptions(
    protect.command('rotate').description('new signing secret (and password): old ones stop'),
  )
    .argument('<app>', 'app name')
    .action(
      action(async (app: string, opts: CommonOptions) =>
        showProtection(
          await (
            await connect(opts)
          ).call<Protection>('POST', apiPath`/v1/apps/${app}/protection/rotate`),
          opts.json,
        ),
      ),
    );

  withCommonOptions(protect.command('link').description('create a signed link'))
    .argument('<app>', 'app name')
    .argument('<label>', 'what the link is for (1-64 characters)')
    .option('--expires-at <time>', 'ISO 8601 moment the link stops working')
    .action(
      action(async (app: string, label: string, opts: LinkOptions) => {
        const body: Record<string, unknown> = { label };
        if (opts.expiresAt) body.expiresAt = opts.expiresAt;
        const link = await (
          await connect(opts)
        ).call<CreatedLink>('POST', apiPath`/v1/apps/${app}/protection/links`, body);
        if (opts.json) return printJson(link);
        say(`Link ${link.id} (${link.label}):`, link.url);
      }),
    );

  withCommonOptions(protect.command('unlink').description('revoke a signed link'))
    .argument('<app>', 'app name')
    .argument('<id>', 'link id')
    .action(
      action(async (app: string, id: string, opts: CommonOptions) => {
        await (await connect(opts)).call('DELETE', apiPath`/v1/apps/${app}/protection/links/${id}`);
        if (!opts.json) say(`Revoked link ${id}.`);
      }),
    );

  withCommonOptions(protect.command('token').description('mint an access token (signed mode)'))
    .argument('<app>', 'app name')
    .option('--ttl <seconds>', 'lifetime, 1-86400 (default 3600)')
    .option('--sub <subject>', 'who or what the token is for')
    .option('--next <path>', 'where the token URL leads')
    .action(
      action(async (app: string, opts: TokenOptions) => {
        const body: Record<string, unknown> = {};
        if (opts.ttl !== undefined) body.ttlSeconds = Number(opts.ttl);
        if (opts.sub !== undefined) body.sub = opts.sub;
        if (opts.next !== undefined) body.next = opts.next;
        const t = await (
          await connect(opts)
        ).call<AccessToken>('POST', apiPath`/v1/apps/${app}/protection/tokens`, body);
        if (opts.json) return printJson(t);
        printFields([
          ['Token', t.token],
          ['Header', t.header],
          ['URL', t.url],
          ['Expires', when(t.expiresAt)],
        ]);
      }),
    );
}
