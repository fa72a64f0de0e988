/** `pier webhooks list|create|deliveries|delete` (spec 4.11; docs/webhooks.md). */
import type { Command } from 'commander';
import { apiPath } from './api-client.js';
import { type CommonOptions, connect, withCommonOptions } from './connect.js';
import { action } from './errors.js';
import { printJson, printTable, say, when } from './output.js';
import type { CreatedWebhook, Delivery, Webhook } from './types.js';

interface CreateOptions extends CommonOptions {
  event: string[];
}

interface DeliveriesOptions extends CommonOptions {
  limit?: string;
}

const collect = (value: string, previous: string[] = []) => [...previous, value];

/** Registers `pier webhooks`. */
export function registerWebhooks(program: Command): void {
  const hooks = program.command('webhooks').description('webhooks for mail events');

  withCommonOptions(hooks.command('list').description('list webhooks')).action(
    action(async (opts: CommonOptions) => {
      const list = await (await connect(opts)).call<Webhook[]>('GET', '/v1/webhooks');
      if (opts.json) return printJson(list);
      printTable(
        ['ID', 'URL', 'EVENTS', 'STATE', 'CREATED'],
        list.map((h) => [
          h.id,
          h.url,
          h.events.join(','),
          h.enabled ? 'enabled' : 'disabled',
          when(h.createdAt),
        ]),
        'No webhooks.',
      );
    }),
  );

  withCommonOptions(hooks.command('create').description('create a webhook; prints its secret once'))
    .argument('<url>', 'the endpoint')
    .requiredOption(
      '--event <kind>',
      'an event kind (repeat for more), e.g. email.delivered',
      collect,
    )
    .action(
      action(async (url: string, opts: CreateOptions) => {
        const made = await (
          await connect(opts)
        ).call<CreatedWebhook>('POST', '/v1/webhooks', {
          url,
          events: opts.event,
        });
        if (opts.json) return printJson(made);
        say(`Created webhook ${made.id} for ${made.events.join(', ')}.`);
        say(`Signing secret (shown once): ${made.secret}`);
      }),
    );

  withCommonOptions(hooks.command('deliveries').description("a webhook's newest deliveries"))
    .argument('<id>', 'webhook id')
    .option('--limit <n>', 'how many (1–100, default 20)')
    .action(
      action(async (id: string, opts: DeliveriesOptions) => {
        const query = opts.limit ? `?limit=${encodeURIComponent(opts.limit)}` : '';
        const list = await (
          await connect(opts)
        ).call<Delivery[]>('GET', `${apiPath`/v1/webhooks/${id}/deliveries`}${query}`);
        if (opts.json) return printJson(list);
        printTable(
          ['ID', 'EVENT', 'TYPE', 'STATUS', 'ATTEMPTS', 'LAST', 'CREATED'],
          list.map((d) => [
            d.id,
            d.eventId,
            d.type,
            d.status,
            String(d.attempts.length),
            d.responseStatus !== undefined ? String(d.responseStatus) : (d.error ?? '-'),
            when(d.createdAt),
          ]),
          'No deliveries.',
        );
      }),
    );

  withCommonOptions(hooks.command('delete').description('delete a webhook'), { json: false })
    .argument('<id>', 'webhook id')
    .action(
      action(async (id: string, opts: CommonOptions) => {
        await (await connect(opts)).call('DELETE', apiPath`/v1/webhooks/${id}`);
        say(`Deleted webhook ${id}.`);
      }),
    );
}
