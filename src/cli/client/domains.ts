/**
 * `pier domains list|add|check|redirect|remove <app> …`: an app's custom domains (spec
 * 4.8; docs/api.md "Custom domains and zones"). `add` prints the DNS records to set;
 * `check` queues a check (a durable job on the server) and prints the record as it stands.
 */
import type { Command } from 'commander';
import { apiPath } from './api-client.js';
import { type CommonOptions, connect, withCommonOptions } from './connect.js';
import { action, CliError } from './errors.js';
import { printFields, printJson, printTable, say, when } from './output.js';
import type { DnsRecord, Domain } from './types.js';

interface RedirectOptions extends CommonOptions {
  clear?: boolean;
}

/** The DNS records to set, one line each; `label` says what a record is for. */
export function printRecords(records: [label: string, record: DnsRecord | undefined][]): void {
  const rows = records.flatMap(([label, r]) => (r ? [[label, r.type, r.name, r.value]] : []));
  printTable(['RECORD', 'TYPE', 'NAME', 'VALUE'], rows, '');
}

/** Status and progress lines domains and zones share (spec 2.10). */
export function progressFields(
  p: Pick<Domain, 'status' | 'error' | 'attempts' | 'lastCheckedAt' | 'certNotAfter'>,
): [string, string | undefined][] {
  return [
    ['Status', p.status],
    ['Reason', p.error ?? undefined],
    ['Checks', String(p.attempts)],
    ['Last checked', p.lastCheckedAt ? when(p.lastCheckedAt) : undefined],
    ['Certificate expires', p.certNotAfter ? when(p.certNotAfter) : undefined],
  ];
}

function showDomain(d: Domain): void {
  printFields([
    ['Domain', d.domain],
    ['App', d.app],
    ...progressFields(d),
    ['Zone', d.zone],
    ['Redirect', d.redirectTo ? `308 to ${d.redirectTo}` : undefined],
  ]);
  say('', 'DNS records to set:');
  printRecords([
    ['proof', d.dns.proof],
    ['point', d.dns.point],
  ]);
}

/** Registers `pier domains`. */
export function registerDomains(program: Command): void {
  const domains = program
    .command('domains')
    .description("an app's custom domains: add, check, redirect, remove");
  const path = (app: string) => apiPath`/v1/apps/${app}/domains`;
  const one = (app: string, domain: string) => apiPath`/v1/apps/${app}/domains/${domain}`;

  withCommonOptions(domains.command('list').description("list an app's custom domains"))
    .argument('<app>', 'app name')
    .action(
      action(async (app: string, opts: CommonOptions) => {
        const list = await (await connect(opts)).call<Domain[]>('GET', path(app));
        if (opts.json) return printJson(list);
        printTable(
          ['DOMAIN', 'STATUS', 'CHECKS', 'CERT EXPIRES', 'REDIRECT', 'REASON'],
          list.map((d) => [
            d.domain,
            d.status,
            String(d.attempts),
            when(d.certNotAfter),
            d.redirectTo ?? '-',
            d.error ?? '',
          ]),
          `No custom domains on ${app}.`,
        );
      }),
    );

  withCommonOptions(domains.command('add').description('add a domain; prints the DNS records'))
    .argument('<app>', 'app name')
    .argument('<domain>', 'the hostname (no wildcards: claim the zone with `pier zones claim`)')
    .action(
      action(async (app: string, domain: string, opts: CommonOptions) => {
        const d = await (await connect(opts)).call<Domain>('POST', path(app), { domain });
        if (opts.json) return printJson(d);
        showDomain(d);
        say('', `Set these records, then run: pier domains check ${app} ${d.domain}`);
      }),
    );

  withCommonOptions(
    domains.command('check').description('queue a check of the DNS and certificate'),
  )
    .argument('<app>', 'app name')
    .argument('<domain>', 'the domain')
    .action(
      action(async (app: string, domain: string, opts: CommonOptions) => {
        const answer = await (
          await connect(opts)
        ).call<{ status: 'queued'; domain: string; record: Domain }>(
          'POST',
          `${one(app, domain)}/check`,
        );
        if (opts.json) return printJson(answer);
        say(`Check of ${answer.domain} queued. As it stands:`, '');
        showDomain(answer.record);
      }),
    );

  withCommonOptions(
    domains.command('redirect').description('answer the domain with a 308 to another name'),
  )
    .argument('<app>', 'app name')
    .argument('<domain>', 'the domain')
    .argument('[to]', "the app's default address or another of its domains")
    .option('--clear', 'stop redirecting')
    .action(
      action(async (app: string, domain: string, to: string | undefined, opts: RedirectOptions) => {
        if ((to === undefined) === !opts.clear)
          throw new CliError('give either the name to redirect to or --clear');
        const d = await (
          await connect(opts)
        ).call<Domain>('PUT', `${one(app, domain)}/redirect`, { to: to ?? null });
        if (opts.json) return printJson(d);
        say(
          d.redirectTo
            ? `${d.domain} redirects to ${d.redirectTo}.`
            : `${d.domain} no longer redirects.`,
        );
      }),
    );

  withCommonOptions(domains.command('remove').description('remove a domain and its certificate'), {
    json: false,
  })
    .argument('<app>', 'app name')
    .argument('<domain>', 'the domain')
    .action(
      action(async (app: string, domain: string, opts: CommonOptions) => {
        await (await connect(opts)).call('DELETE', one(app, domain));
        say(`Removed ${domain} from ${app}.`);
      }),
    );
}
