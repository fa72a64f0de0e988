/**
 * The MCP tools, as data: each tool stands for one `/v1` route and says how its input
 * fills that route's path, query string and body. The executor (route-call.ts) sends the
 * call through that very route, so the route's auth row, agent judge, audit, validation
 * and errors apply unchanged. Input schemas stay loose on purpose: the route validates,
 * and its `bad-request` with `issues` reaches the agent as the tool's error.
 */
import { z } from 'zod';
import { SOURCE_UPLOAD_TOOL } from './source-upload.js';
import type { ToolRoute } from './tool-route.js';

export type { HttpMethod, RawBody, ToolRoute } from './tool-route.js';

/** The shell-session route `machine_exec` runs as (a WebSocket: mcp/exec-call.ts). */
export const EXEC_ROUTE = 'GET /v1/machines/:id/exec';

const name = (what: string) => z.string().min(1).max(63).describe(what);
const app = name('The app’s name.');
const machineId = z.string().min(1).max(64).describe('The machine’s id.');
const volumeId = z.string().min(1).max(64).describe('The volume’s id.');
const bucket = name('The bucket’s name.');
const database = name('The database’s name.');
const buildId = z.string().min(1).max(64).describe('The build’s id.');
const sourceId = z.string().min(1).max(64).describe('A source’s id (from app_source_upload).');
const timestamp = z.string().describe('An ISO 8601 timestamp.');
const copyLifetime = {
  expiresAt: timestamp.optional().describe('When the copy is removed (not with ttlSeconds).'),
  ttlSeconds: z
    .number()
    .int()
    .min(60)
    .max(2592000)
    .optional()
    .describe('Lifetime from now, 60–2592000 s.'),
};
const none = z.object({});

export const TOOLS: ToolRoute[] = [
  // Apps.
  {
    name: 'apps_list',
    description: 'List the organization’s apps.',
    route: 'GET /v1/apps',
    input: none,
  },
  {
    name: 'app_get',
    description: 'Read one app.',
    route: 'GET /v1/apps/:name',
    input: z.object({ name: app }),
  },
  {
    name: 'app_create',
    description: 'Create an app (a name unique across the platform).',
    route: 'POST /v1/apps',
    input: z.object({ name: app }),
  },
  {
    name: 'app_delete',
    description: 'Delete an app with its machines.',
    route: 'DELETE /v1/apps/:name',
    input: z.object({ name: app }),
  },
  {
    name: 'app_attach',
    description:
      'Attach one bucket (optionally under a prefix `as`), database or volume to an app: give exactly one of bucket, database, volume.',
    route: 'POST /v1/apps/:name/attach',
    params: { name: 'app' },
    input: z.object({
      app,
      bucket: bucket.optional(),
      as: z.string().optional().describe('Bucket prefix the app sees (buckets only).'),
      database: database.optional(),
      volume: name('The volume’s name.').optional(),
    }),
  },
  {
    name: 'app_detach',
    description: 'Detach one bucket, database or volume from an app: give exactly one of them.',
    route: 'POST /v1/apps/:name/detach',
    params: { name: 'app' },
    input: z.object({
      app,
      bucket: bucket.optional(),
      database: database.optional(),
      volume: name('The volume’s name.').optional(),
    }),
  },
  // Machines.
  {
    name: 'machines_list',
    description: 'List the machines of an app.',
    route: 'GET /v1/apps/:name/machines',
    input: z.object({ name: app }),
  },
  {
    name: 'machine_get',
    description: 'Read one machine.',
    route: 'GET /v1/machines/:id',
    input: z.object({ id: machineId }),
  },
  {
    name: 'machine_create',
    description:
      'Create a machine in an app from a machine config (image, vcpus, memoryMb, env, command, …); waits until it runs unless wait is false.',
    route: 'POST /v1/apps/:name/machines',
    query: ['wait'],
    bodyField: 'config',
    input: z.object({
      name: app,
      wait: z.boolean().optional().describe('false: answer as soon as the machine exists.'),
      config: z.record(z.string(), z.unknown()).describe('The machine config (spec 2.12).'),
    }),
  },
  {
    name: 'machine_action',
    description: 'Start, stop, suspend or destroy a machine.',
    route: 'POST /v1/machines/:id/:action',
    input: z.object({ id: machineId, action: z.enum(['start', 'stop', 'suspend', 'destroy']) }),
  },
  {
    name: 'app_logs',
    description:
      'Console output of an app’s machines; pass the returned cursor to read on from there.',
    route: 'GET /v1/apps/:name/logs',
    query: ['cursor', 'limit', 'machine'],
    input: z.object({
      name: app,
      cursor: z.string().optional(),
      limit: z.number().int().min(1).max(1000).optional(),
      machine: machineId.optional().describe('Only this machine’s output.'),
    }),
  },
  // Databases.
  {
    name: 'databases_list',
    description: 'List the organization’s databases (never their URLs).',
    route: 'GET /v1/resources',
    input: none,
  },
  {
    name: 'database_get',
    description: 'Read one database.',
    route: 'GET /v1/resources/:name',
    input: z.object({ name: database }),
  },
  {
    name: 'database_create',
    description: 'Create a database (kind postgres or redis); the answer carries its URL once.',
    route: 'POST /v1/resources',
    input: z.object({
      name: database,
      kind: z.enum(['postgres', 'redis']),
      memoryMb: z.number().int().min(128).max(16384).optional(),
      sizeGb: z.number().int().min(1).max(500).optional(),
      persistent: z.boolean().optional(),
    }),
  },
  {
    name: 'database_delete',
    description: 'Delete a database, its machine and volume; irreversible.',
    route: 'DELETE /v1/resources/:name',
    input: z.object({ name: database }),
  },
  {
    name: 'database_branch',
    description: 'Copy-on-write branch of a database as it is now (202: it is being made).',
    route: 'POST /v1/resources/:name/branch',
    params: { name: 'database' },
    input: z.object({
      database,
      name: name('The branch’s name.'),
      ephemeral: z.boolean().optional(),
      ...copyLifetime,
    }),
  },
  {
    name: 'database_fork',
    description: 'Full copy of a database from its archive, optionally as of a past moment.',
    route: 'POST /v1/resources/:name/fork',
    params: { name: 'database' },
    input: z.object({
      database,
      name: name('The fork’s name.'),
      asOf: timestamp.optional(),
      ...copyLifetime,
    }),
  },
  {
    name: 'database_restore',
    description:
      'Restore a database in place to a past moment; its state before is kept as a branch.',
    route: 'POST /v1/resources/:name/restore',
    params: { name: 'database' },
    input: z.object({
      database,
      asOf: timestamp,
      preserveUnderName: name('Name of the branch that keeps the state before.').optional(),
    }),
  },
  {
    name: 'database_sql',
    description:
      'Run one SQL statement on a PostgreSQL database as its role app (read-only: as a role that may only read); answers columns, rows (values as text), rowCount and truncated. A production-class agent token always runs read-only and needs prodDataRead.',
    route: 'POST /v1/resources/:name/sql',
    params: { name: 'database' },
    input: z.object({
      database,
      sql: z.string().min(1).max(100000).describe('One statement; $1, $2… for params.'),
      params: z
        .array(z.union([z.string(), z.number(), z.boolean(), z.null()]))
        .optional()
        .describe('Values of $1, $2…'),
      readOnly: z.boolean().optional().describe('Run in a read-only transaction.'),
      timeoutMs: z.number().int().min(1).max(30000).optional().describe('Default 10000.'),
      maxRows: z.number().int().min(1).max(10000).optional().describe('Default 1000.'),
    }),
  },
  // Volumes.
  { name: 'volumes_list', description: 'List volumes.', route: 'GET /v1/volumes', input: none },
  {
    name: 'volume_create',
    description: 'Create a volume.',
    route: 'POST /v1/volumes',
    input: z.object({
      name: name('The volume’s name.'),
      sizeGb: z.number().int().min(1).max(500).optional(),
      mountPath: z.string().optional(),
      class: z.enum(['standard', 'durable']).optional(),
    }),
  },
  {
    name: 'volume_update',
    description: 'Grow a volume or change its flush interval.',
    route: 'PATCH /v1/volumes/:id',
    input: z.object({
      id: volumeId,
      sizeGb: z.number().int().min(1).max(500).optional(),
      flushIntervalS: z.number().int().min(15).max(86400).optional(),
    }),
  },
  {
    name: 'volume_delete',
    description: 'Delete a volume that is not attached.',
    route: 'DELETE /v1/volumes/:id',
    input: z.object({ id: volumeId }),
  },
  {
    name: 'volume_detach',
    description: 'Detach a volume from its app.',
    route: 'DELETE /v1/volumes/:id/attachment',
    input: z.object({ id: volumeId }),
  },
  // Buckets.
  { name: 'buckets_list', description: 'List buckets.', route: 'GET /v1/buckets', input: none },
  {
    name: 'bucket_get',
    description: 'Read one bucket.',
    route: 'GET /v1/buckets/:name',
    input: z.object({ name: bucket }),
  },
  {
    name: 'bucket_create',
    description: 'Create a bucket.',
    route: 'POST /v1/buckets',
    input: z.object({ name: bucket }),
  },
  {
    name: 'bucket_delete',
    description: 'Delete a bucket; force deletes its objects too.',
    route: 'DELETE /v1/buckets/:name',
    query: ['force'],
    input: z.object({ name: bucket, force: z.boolean().optional() }),
  },
  {
    name: 'bucket_objects_list',
    description: 'List a bucket’s objects, a page at a time (pass nextCursor as cursor).',
    route: 'GET /v1/buckets/:name/objects',
    query: ['prefix', 'limit', 'cursor'],
    input: z.object({
      name: bucket,
      prefix: z.string().optional(),
      limit: z.number().int().min(1).max(1000).optional(),
      cursor: z.string().optional(),
    }),
  },
  {
    name: 'bucket_object_delete',
    description: 'Delete one object of a bucket.',
    route: 'DELETE /v1/buckets/:name/objects',
    query: ['key'],
    input: z.object({ name: bucket, key: z.string().min(1).max(1024) }),
  },
  {
    name: 'bucket_presign',
    description: 'A presigned URL to get or put one object.',
    route: 'POST /v1/buckets/:name/presign',
    input: z.object({
      name: bucket,
      key: z.string().min(1).max(1024),
      op: z.enum(['get', 'put']).optional(),
      expiresInS: z.number().int().min(1).max(604800).optional(),
      contentType: z.string().optional().describe('put only; part of the signature.'),
    }),
  },
  // Builds, deploys and releases (CONTRACT 7): upload, detect, build, deploy, roll back.
  SOURCE_UPLOAD_TOOL,
  {
    name: 'app_detect',
    description:
      'What kind of app a source is (dockerfile, static, node, python, go), its start command and port, and the Dockerfile pier would build it with.',
    route: 'POST /v1/apps/:name/detect',
    params: { name: 'app' },
    input: z.object({ app, source: sourceId }),
  },
  {
    name: 'app_build',
    description:
      'Build an image from a source (its Dockerfile, else what app_detect finds); answers the build at once (state queued), to follow with build_get and build_logs.',
    route: 'POST /v1/apps/:name/builds',
    params: { name: 'app' },
    input: z.object({
      app,
      source: sourceId,
      dockerfile: z
        .string()
        .optional()
        .describe('Path of the Dockerfile inside the source (default Dockerfile).'),
    }),
  },
  {
    name: 'builds_list',
    description: 'List an app’s builds, newest first.',
    route: 'GET /v1/apps/:name/builds',
    params: { name: 'app' },
    input: z.object({ app }),
  },
  {
    name: 'build_get',
    description:
      'Read one build: state queued, building, done (with imageDigest) or failed (with error).',
    route: 'GET /v1/builds/:id',
    input: z.object({ id: buildId }),
  },
  {
    name: 'build_logs',
    description: 'The builder’s output so far, as text (call again while the build runs).',
    route: 'GET /v1/builds/:id/logs',
    input: z.object({ id: buildId }),
  },
  {
    name: 'app_deploy',
    description:
      'Deploy an app to an image (an OCI reference, or build:<id>) and optionally a new machine config (without image; omitted: the live release’s); rolling (default) or immediate. Answers the deploy at once (status pending), to follow with deploy_get.',
    route: 'POST /v1/apps/:name/deploys',
    params: { name: 'app' },
    input: z.object({
      app,
      image: z.string().min(1).max(512).describe('An OCI reference, or build:<id>.'),
      config: z
        .record(z.string(), z.unknown())
        .optional()
        .describe('The machine config (spec 2.12) without image.'),
      strategy: z.enum(['rolling', 'immediate']).optional(),
    }),
  },
  {
    name: 'deploys_list',
    description: 'List an app’s deploys, newest first.',
    route: 'GET /v1/apps/:name/deploys',
    params: { name: 'app' },
    input: z.object({ app }),
  },
  {
    name: 'deploy_get',
    description:
      'Read one deploy: status pending, running, done or error, its step, and the release it made.',
    route: 'GET /v1/deploys/:id',
    input: z.object({ id: z.string().min(1).max(64).describe('The deploy’s id.') }),
  },
  {
    name: 'releases_list',
    description:
      'List an app’s releases, newest first: version, image and digest, build, status (live, superseded, failed), when it went live.',
    route: 'GET /v1/apps/:name/releases',
    params: { name: 'app' },
    input: z.object({ app }),
  },
  {
    name: 'app_rollback',
    description:
      'Deploy a recorded release again exactly (image digest, config, secrets); without version, the release live before the current one. Answers the deploy.',
    route: 'POST /v1/apps/:name/rollback',
    params: { name: 'app' },
    input: z.object({
      app,
      version: z.number().int().min(1).optional().describe('The release’s version.'),
    }),
  },
  // Previews (issue #26 item 3).
  {
    name: 'previews_list',
    description:
      'List an app’s preview environments: state (creating, ready, failed), address, database branches, expiry.',
    route: 'GET /v1/apps/:name/previews',
    params: { name: 'app' },
    input: z.object({ app }),
  },
  {
    name: 'preview_get',
    description: 'Read one preview environment of an app.',
    route: 'GET /v1/apps/:name/previews/:preview',
    params: { name: 'app' },
    input: z.object({ app, preview: name('The preview’s name.') }),
  },
  {
    name: 'preview_create',
    description:
      'Make a preview environment <app>--<name>: its own address, the app’s live release, secrets and protection, a branch of each attached database, read-only buckets; removed after ttlSeconds (default 7 days). Answers at once (state creating), to follow with preview_get.',
    route: 'POST /v1/apps/:name/previews',
    params: { name: 'app' },
    input: z.object({
      app,
      name: name('The preview’s name (a DNS label).'),
      ttlSeconds: z
        .number()
        .int()
        .optional()
        .describe('Lifetime from now, 3600–2592000 s (default 604800: 7 days).'),
      expiresAt: timestamp.optional().describe('When it is removed (not with ttlSeconds).'),
    }),
  },
  {
    name: 'preview_delete',
    description:
      'Delete a preview environment and exactly what it made (its app, machines, database branches, bucket keys).',
    route: 'DELETE /v1/apps/:name/previews/:preview',
    params: { name: 'app' },
    input: z.object({ app, preview: name('The preview’s name.') }),
  },
  // Git settings (issue #26).
  {
    name: 'app_git_get',
    description:
      'Read an app’s Git settings: its production branch (null: main or master), whether a push of another branch deploys its preview, and the HTTPS and SSH push URLs.',
    route: 'GET /v1/apps/:name/git',
    params: { name: 'app' },
    input: z.object({ app }),
  },
  {
    name: 'app_git_set',
    description:
      'Set an app’s production branch (null: back to main or master) and whether a push of another branch deploys its preview (false: the branch is stored, nothing deploys); a field left out keeps its value.',
    route: 'PUT /v1/apps/:name/git',
    params: { name: 'app' },
    input: z.object({
      app,
      productionBranch: z
        .string()
        .nullable()
        .optional()
        .describe('A git branch name, or null for the default (main or master).'),
      branchPreviews: z.boolean().optional(),
    }),
  },
  // Secrets.
  {
    name: 'secrets_list',
    description: 'List an app’s secrets: names and metadata, never values.',
    route: 'GET /v1/apps/:name/secrets',
    params: { name: 'app' },
    input: z.object({ app }),
  },
  {
    name: 'secrets_set',
    description:
      'Set secret values of an app; staged (default) applies them at the next deploy, false rolls the app now.',
    route: 'PUT /v1/apps/:name/secrets',
    params: { name: 'app' },
    input: z.object({
      app,
      secrets: z.record(z.string(), z.string()).describe('Names to values.'),
      staged: z.boolean().optional(),
    }),
  },
  {
    name: 'secret_delete',
    description: 'Delete one secret of an app.',
    route: 'DELETE /v1/apps/:name/secrets/:key',
    params: { name: 'app' },
    input: z.object({ app, key: z.string().min(1).max(255) }),
  },
  // Billing, usage, audit.
  {
    name: 'billing_credits',
    description: 'The credit account: balance and auto-recharge.',
    route: 'GET /v1/billing/credits',
    input: none,
  },
  {
    name: 'billing_ledger',
    description: 'The latest ledger entries.',
    route: 'GET /v1/billing/ledger',
    query: ['limit'],
    input: z.object({ limit: z.number().int().min(1).max(500).optional() }),
  },
  {
    name: 'usage_get',
    description: 'Metered usage between two moments.',
    route: 'GET /v1/usage',
    query: ['from', 'to'],
    input: z.object({ from: timestamp.optional(), to: timestamp.optional() }),
  },
  {
    name: 'agent_actions_list',
    description: 'The audit of agent-token actions, newest first.',
    route: 'GET /v1/agent-actions',
    query: ['limit', 'token'],
    input: z.object({
      limit: z.number().int().min(1).max(1000).optional(),
      token: z.string().optional().describe('Only this key’s actions (its id).'),
    }),
  },
];
