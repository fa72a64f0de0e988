/**
 * `pier zones list|claim|show|check|release`: whole zones of the organization (spec 2.10,
 * 4.8; docs/api.md "Zone record"). `claim` and `show` print the `acme` and `point`
 * records; a claim on an installation without the edge DNS fails with
 * `zones-unavailable`.
 */
import type { Command } from 'commander';
import { apiPath } from './api-client.js';
import { type CommonOptions, connect, withCommonOptions } from './connect.js';
import { printRecords, progressFields } from './domains.js';
import { action } from './errors.js';
import { printFields, printJson, printTable, say, when } from './output.js';
import type { Zone } from './types.js';

function showZone(z: Zone): void {
  printFields([['Zone', z.zone], ...progressFields(z), ['Claimed', when(z.createdAt)]]);
  say('', 'DNS records to set:');
  printRecords([
    ['acme', z.dns.acme],
    ['point', z.dns.point],
  ]);
}

/** Registers `pier zones`. */
export function registerZones(program: Command): void {
  const zones = program
    .command('zones')
    .description('whole zones: every <app>.<zone> served with one wildcard certificate');
  const V1 = '/v1/domains/zones';
  const one = (zone: string) => apiPath`/v1/domains/zones/${zone}`;

  withCommonOptions(zones.command('list').description("list the organization's zones")).action(
    action(async (opts: CommonOptions) => {
      const list = await (await connect(opts)).call<Zone[]>('GET', V1);
      if (opts.json) return printJson(list);
      printTable(
        ['ZONE', 'STATUS', 'CHECKS', 'LAST CHECKED', 'CERT EXPIRES', 'REASON'],
        list.map((z) => [
          z.zone,
          z.status,
          String(z.attempts),
          when(z.lastCheckedAt),
          when(z.certNotAfter),
          z.error ?? '',
        ]),
        'No zones.',
      );
    }),
  );

  withCommonOptions(zones.command('claim').description('claim a zone; prints the DNS records'))
    .argument('<zone>', 'the zone, e.g. example.com')
    .action(
      action(async (zone: string, opts: CommonOptions) => {
        const z = await (await connect(opts)).call<Zone>('POST', V1, { zone });
        if (opts.json) return printJson(z);
        showZone(z);
        say('', `Set these records, then run: pier zones check ${z.zone}`);
      }),
    );

  withCommonOptions(zones.command('show').description('show a zone and its records'))
    .argument('<zone>', 'the zone')
    .action(
      action(async (zone: string, opts: CommonOptions) => {
        const z = await (await connect(opts)).call<Zone>('GET', one(zone));
        if (opts.json) return printJson(z);
        showZone(z);
      }),
    );

  withCommonOptions(zones.command('check').description("queue a check of the zone's records"))
    .argument('<zone>', 'the zone')
    .action(
      action(async (zone: string, opts: CommonOptions) => {
        const answer = await (
          await connect(opts)
        ).call<{ status: 'queued'; zone: string; record: Zone }>('POST', `${one(zone)}/check`);
        if (opts.json) return printJson(answer);
        say(`Check of ${answer.zone} queued. As it stands:`, '');
        showZone(answer.record);
      }),
    );

  withCommonOptions(
    zones.command('release').description('release a zone and its wildcard certificate'),
    { json: false },
  )
    .argument('<zone>', 'the zone')
    .action(
      action(async (zone: string, opts: CommonOptions) => {
        await (await connect(opts)).call('DELETE', one(zone));
        say(`Released zone ${zone}.`);
      }),
    );
}
