/**
 * `pier buckets`: S3-compatible buckets of the organization (spec 2.7, 4.5). The bucket
 * commands live here; objects, copying and CORS in the buckets-*.ts files beside it.
 */
import type { Command } from 'commander';
import { apiPath } from './api-client.js';
import { registerBucketCors } from './buckets-cors.js';
import { registerBucketCp } from './buckets-cp.js';
import { registerBucketObjects } from './buckets-objects.js';
import type { Bucket, DeletedBucket } from './buckets-types.js';
import { type CommonOptions, connect, withCommonOptions } from './connect.js';
import { action } from './errors.js';
import { printFields, printJson, printTable, say, when } from './output.js';

interface DeleteOptions extends CommonOptions {
  force?: boolean;
}

/** Registers `pier buckets`. */
export function registerBuckets(program: Command): void {
  const buckets = program
    .command('buckets')
    .description('buckets of the organization and their objects');

  withCommonOptions(buckets.command('create').description('create a bucket'))
    .argument('<name>', '3-63 lowercase letters, digits and hyphens; unique on the platform')
    .action(
      action(async (name: string, opts: CommonOptions) => {
        const bucket = await (await connect(opts)).call<Bucket>('POST', '/v1/buckets', { name });
        if (opts.json) return printJson(bucket);
        say(`Created bucket ${bucket.name} (${bucket.id}).`);
      }),
    );

  withCommonOptions(buckets.command('list').description('list buckets')).action(
    action(async (opts: CommonOptions) => {
      const list = await (await connect(opts)).call<Bucket[]>('GET', '/v1/buckets');
      if (opts.json) return printJson(list);
      printTable(
        ['NAME', 'ID', 'CREATED'],
        list.map((b) => [b.name, b.id, when(b.createdAt)]),
        'No buckets.',
      );
    }),
  );

  withCommonOptions(buckets.command('show').description('show one bucket'))
    .argument('<name>', 'bucket name')
    .action(
      action(async (name: string, opts: CommonOptions) => {
        const bucket = await (
          await connect(opts)
        ).call<Bucket>('GET', apiPath`/v1/buckets/${name}`);
        if (opts.json) return printJson(bucket);
        printFields([
          ['Name', bucket.name],
          ['ID', bucket.id],
          ['Organization', bucket.orgId],
          ['Storage', bucket.backendRef],
          ['Created', when(bucket.createdAt)],
        ]);
      }),
    );

  withCommonOptions(
    buckets
      .command('delete')
      .description(
        'delete a bucket; refused while it holds objects or is attached, unless --force',
      ),
  )
    .argument('<name>', 'bucket name')
    .option('--force', 'also delete every object and detach it from every app')
    .action(
      action(async (name: string, opts: DeleteOptions) => {
        const force = opts.force ? 'true' : 'false';
        const answer = await (
          await connect(opts)
        ).call<DeletedBucket>('DELETE', `${apiPath`/v1/buckets/${name}`}?force=${force}`);
        if (opts.json) return printJson(answer);
        const details = [
          answer.deletedObjects > 0 ? `deleted ${answer.deletedObjects} objects` : undefined,
          answer.detached.length > 0 ? `detached from ${answer.detached.join(', ')}` : undefined,
        ].filter((d) => d !== undefined);
        say(`Deleted bucket ${name}${details.length > 0 ? ` (${details.join('; ')})` : ''}.`);
      }),
    );

  registerBucketObjects(buckets);
  registerBucketCp(buckets);
  registerBucketCors(buckets);
}
