/**
 * `pier volumes` (spec 4.4): list, show, create, resize, attach, detach and delete. The
 * API addresses a volume by its id; the commands take its name or its id, and find the
 * id of a name in the organization's list.
 */
import { type Command, Option } from 'commander';
import { type ApiClient, apiPath } from './api-client.js';
import { type CommonOptions, connect, withCommonOptions } from './connect.js';
import { wholeNumber } from './db-common.js';
import { ApiCallError, CliError, action } from './errors.js';
import { confirm } from './machines-common.js';
import { printFields, printJson, printTable, say, when } from './output.js';

/** A volume record (spec 2.6). */
export interface Volume {
  id: string;
  name: string;
  orgId: string;
  sizeGb: number;
  mountPath: string;
  class: 'standard' | 'durable';
  flushIntervalS: number;
  machineId?: string;
  appName?: string;
  leaseHost?: string;
  leaseGen: number;
  durableGen: number;
  durableAt?: string;
  walDurableAt?: string;
  createdAt: string;
}

interface CreateOptions extends CommonOptions {
  size?: number;
  mountPath?: string;
  class?: 'standard' | 'durable';
  flushInterval?: number;
}

interface UpdateOptions extends CommonOptions {
  size?: number;
  flushInterval?: number;
}

interface DeleteOptions extends CommonOptions {
  yes?: boolean;
}

/** Registers `pier volumes`. */
export function registerVolumes(program: Command): void {
  const volumes = program
    .command('volumes')
    .description('volumes: disks that keep their data across machines of an app');

  withCommonOptions(volumes.command('list').description('list volumes')).action(
    action(async (opts: CommonOptions) => {
      const list = await (await connect(opts)).call<Volume[]>('GET', '/v1/volumes');
      if (opts.json) return printJson(list);
      printTable(
        ['NAME', 'ID', 'SIZE', 'CLASS', 'MOUNT', 'APP', 'MACHINE', 'CREATED'],
        list.map((v) => [
          v.name,
          v.id,
          `${v.sizeGb} GB`,
          v.class,
          v.mountPath,
          v.appName ?? '-',
          v.machineId ?? '-',
          when(v.createdAt),
        ]),
        'No volumes.',
      );
    }),
  );

  withCommonOptions(volumes.command('show').description('show one volume'))
    .argument('<volume>', 'volume name or id')
    .action(
      action(async (ref: string, opts: CommonOptions) => {
        const v = await findVolume(await connect(opts), ref);
        if (opts.json) return printJson(v);
        printFields(volumeFields(v));
      }),
    );

  withCommonOptions(volumes.command('create').description('create a volume'))
    .argument('<name>', '1-63 lowercase letters, digits and hyphens; unique on the platform')
    .option('--size <gb>', 'size in GB, 1-500 (default: 10)', wholeNumber)
    .option('--mount-path <path>', 'where machines see it (default: /data)')
    .addOption(
      new Option(
        '--class <class>',
        'durable copies it to the archive every --flush-interval',
      ).choices(['standard', 'durable']),
    )
    .option('--flush-interval <seconds>', 'durable: seconds between copies, 15-86400', wholeNumber)
    .action(
      action(async (name: string, opts: CreateOptions) => {
        const body: Record<string, unknown> = { name };
        if (opts.size !== undefined) body.sizeGb = opts.size;
        if (opts.mountPath !== undefined) body.mountPath = opts.mountPath;
        if (opts.class !== undefined) body.class = opts.class;
        if (opts.flushInterval !== undefined) body.flushIntervalS = opts.flushInterval;
        const v = await (await connect(opts)).call<Volume>('POST', '/v1/volumes', body);
        if (opts.json) return printJson(v);
        say(`Created volume ${v.name} (${v.id}), ${v.sizeGb} GB at ${v.mountPath}.`);
      }),
    );

  withCommonOptions(
    volumes
      .command('resize')
      .aliases(['extend', 'update'])
      .description("change a volume's size or how often a durable one is copied"),
  )
    .argument('<volume>', 'volume name or id')
    .option('--size <gb>', 'the new size in GB, 1-500', wholeNumber)
    .option('--flush-interval <seconds>', 'durable: seconds between copies, 15-86400', wholeNumber)
    .action(
      action(async (ref: string, opts: UpdateOptions) => {
        if (opts.size === undefined && opts.flushInterval === undefined) {
          throw new CliError('give --size and/or --flush-interval');
        }
        const client = await connect(opts);
        const { id } = await findVolume(client, ref);
        const body: Record<string, unknown> = {};
        if (opts.size !== undefined) body.sizeGb = opts.size;
        if (opts.flushInterval !== undefined) body.flushIntervalS = opts.flushInterval;
        const v = await client.call<Volume>('PATCH', apiPath`/v1/volumes/${id}`, body);
        if (opts.json) return printJson(v);
        say(
          `Volume ${v.name} is ${v.sizeGb} GB` +
            (v.class === 'durable' ? `, copied every ${v.flushIntervalS}s.` : '.'),
        );
      }),
    );

  withCommonOptions(volumes.command('attach').description('attach a volume to an app'))
    .argument('<volume>', 'volume name')
    .argument('<app>', 'app name')
    .action(
      action(async (volume: string, app: string, opts: CommonOptions) => {
        const answer = await (
          await connect(opts)
        ).call<{ mountPath?: string }>('POST', apiPath`/v1/apps/${app}/attach`, { volume });
        if (opts.json) return printJson(answer);
        say(
          `Attached volume ${volume} to ${app}` +
            (answer.mountPath ? ` at ${answer.mountPath}.` : '.'),
        );
      }),
    );

  withCommonOptions(volumes.command('detach').description('detach a volume from its app'), {
    json: false,
  })
    .argument('<volume>', 'volume name or id')
    .action(
      action(async (ref: string, opts: CommonOptions) => {
        const client = await connect(opts);
        const v = await findVolume(client, ref);
        await client.call('DELETE', apiPath`/v1/volumes/${v.id}/attachment`);
        say(`Detached volume ${v.name}${v.appName ? ` from ${v.appName}` : ''}.`);
      }),
    );

  withCommonOptions(
    volumes.command('delete').description('delete a volume with its data and durable copies'),
    { json: false },
  )
    .argument('<volume>', 'volume name or id')
    .option('--yes', 'do not ask; needed when stdin is not a terminal')
    .action(
      action(async (ref: string, opts: DeleteOptions) => {
        const client = await connect(opts);
        const v = await findVolume(client, ref);
        if (!opts.yes) {
          await confirm(
            `Delete volume ${v.name} (${v.sizeGb} GB) with all its data?`,
            `refusing to delete ${v.name}`,
          );
        }
        await client.call('DELETE', apiPath`/v1/volumes/${v.id}`);
        say(`Deleted volume ${v.name}.`);
      }),
    );
}

/** The volume named `ref` (or with the id `ref`), or the API's own 404 wording. */
async function findVolume(client: ApiClient, ref: string): Promise<Volume> {
  const list = await client.call<Volume[]>('GET', '/v1/volumes');
  const v = list.find((x) => x.name === ref) ?? list.find((x) => x.id === ref);
  if (!v) throw new ApiCallError(404, 'not-found', `Volume '${ref}' not found.`);
  return v;
}

function volumeFields(v: Volume): [string, string | undefined][] {
  const durable = v.class === 'durable';
  return [
    ['Name', v.name],
    ['ID', v.id],
    ['Size', `${v.sizeGb} GB`],
    ['Mount path', v.mountPath],
    ['Class', v.class],
    ['Copied every', durable ? `${v.flushIntervalS}s` : undefined],
    [
      'Copies',
      durable ? `${v.durableGen}` + (v.durableAt ? `, last ${when(v.durableAt)}` : '') : undefined,
    ],
    ['App', v.appName ?? '-'],
    ['Machine', v.machineId],
    ['Lease host', v.leaseHost],
    ['Created', when(v.createdAt)],
  ];
}
