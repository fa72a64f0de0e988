/**
 * `DELETE /v1/apps/:name` (CONTRACT): the one place that knows what an app owns and how
 * each of those goes with it. The steps below run in order; a family that gives apps
 * something new (domains, protection, UDP endpoints) adds its step here, where it must
 * run, and nowhere else.
 */
import { ApiError } from '../../errors/api-error.js';
import type { Tx } from '../../store/db.js';
import { detachAppBuckets } from '../buckets/attachments.js';
import { appBuildsRemoval } from '../builds/teardown.js';
import { detachAppDatabases } from '../databases/attachments.js';
import type { ServiceContext } from '../context.js';
import { machineAction } from '../machines/lifecycle.js';
import { liveMachineIds } from '../machines/records.js';
import { releaseName } from '../names.js';
import { removeDomains } from '../domains/domains.js';
import { reloadEdgeTable } from '../domains/hosts.js';
import { announceEdgeChange, noteAppOfZoneOrg } from '../domains/memory.js';
import { removePreviewBranches } from '../previews/branches.js';
import { previewOfApp, previewsOf } from '../previews/records.js';
import { findApp, type AppRow } from './records.js';

/** A step that does its own work and commits it, before the app's transaction. */
type Before = (ctx: ServiceContext, orgId: string, app: AppRow) => Promise<void>;
/**
 * A step inside the one transaction that removes the app, which holds its row locked. It
 * may answer work to run once that has committed (bytes on the host named by its rows).
 */
type Within = (
  tx: Tx,
  ctx: ServiceContext,
  orgId: string,
  app: AppRow,
) => Promise<void | (() => Promise<void>)>;

/**
 * Outside the transaction: work that takes seconds and cannot be undone by a rollback.
 * A failure here leaves the app as it was, less what was already done: the client tries
 * again.
 */
const BEFORE: [owner: string, step: Before][] = [
  // Machines: destroyed one at a time (processes stopped, cgroup, network namespace and
  // disks reclaimed). Their rows go with the app's (ON DELETE CASCADE), so one still running
  // then would run on with nothing left to stop it. A machine in the middle of another
  // operation answers 409 `machine-busy`.
  ['machines', destroyMachines],
  // Previews: of this app, each goes whole (its app, by this very teardown, and its
  // database branches); of a preview's own app, the branches that preview made.
  ['previews', removePreviews],
];

/** In one transaction: the app and everything it holds go together, or nothing does. */
const WITHIN: [owner: string, step: Within][] = [
  // Machines: one created after BEFORE ran (creation locks the app row too, so none can be
  // added from here on) is refused with 409 `conflict` rather than lost with the row.
  ['machines', refuseLiveMachines],
  // Buckets: each attachment's S3 key is revoked (every gateway drops it when this
  // commits), its managed secrets and its row removed. The bucket itself stays.
  ['buckets', (tx, ctx, _orgId, app) => detachAppBuckets(tx, ctx, app.id)],
  // Databases: each attachment and the managed secret holding its URL. The database stays.
  ['databases', (tx, _ctx, _orgId, app) => detachAppDatabases(tx, app.id)],
  // Volumes: released, with their data, for the organization to attach elsewhere.
  ['volumes', releaseVolumes],
  // Domains: each with its certificate (and sealed key), its queued checks and redirects
  // to it; a check running meanwhile stores nothing. Every replica stops routing them, and
  // the app's names below its organization's zones, when this commits (NOTIFY).
  ['domains', removeEdgeNames],
  // Builds: their rows and sources' go with the app's by cascade; once that commits, its
  // running builds stop, and their logs, sources, images and layer cache leave the host.
  ['builds', (tx, ctx, _orgId, app) => appBuildsRemoval(tx, ctx, app.id)],
  // Previews: a preview whose app this is goes with it; a failed one keeps its row (with
  // why it failed) until it is deleted or expires. This app's own previews' rows go with
  // its row by cascade.
  ['previews', (tx, _ctx, _orgId, app) => deletePreviewRow(tx, app)],
  // The app row; its own secrets and its (destroyed) machines' rows go with it by cascade.
  ['apps', (tx, _ctx, _orgId, app) => deleteAppRow(tx, app)],
  // Its name, free again in the platform-wide namespace.
  ['names', (tx, _ctx, orgId, app) => releaseName(tx, orgId, app.name)],
];

/** Deletes the app named `appName` of `orgId` and everything it owns, as listed above. */
export async function deleteApp(
  ctx: ServiceContext,
  orgId: string,
  appName: string,
): Promise<void> {
  const app = await findApp(ctx.db, orgId, appName);
  for (const [, step] of BEFORE) await step(ctx, orgId, app);
  const after: (() => Promise<void>)[] = [];
  await ctx.db.transaction().execute(async (tx) => {
    // Locked, as machine creation and attachments lock it: nothing is added until this commits.
    const locked = await findApp(tx, orgId, appName, { lock: true });
    for (const [, step] of WITHIN) {
      const then = await step(tx, ctx, orgId, locked);
      if (then) after.push(then);
    }
  });
  for (const then of after) {
    // The app is gone whatever happens here: a failure leaves bytes, never the app.
    await then().catch((err: unknown) => ctx.log.warn({ err, app: appName }, 'app teardown'));
  }
  noteAppOfZoneOrg(ctx, orgId, appName, false);
  // The certificates' TLS contexts go now, before the notice comes back.
  await reloadEdgeTable(ctx);
}

async function destroyMachines(ctx: ServiceContext, orgId: string, app: AppRow): Promise<void> {
  for (const id of await liveMachineIds(ctx.db, app.id)) {
    try {
      await machineAction(ctx, orgId, id, 'destroy');
    } catch (err) {
      // Destroyed meanwhile by another request: what this one wanted.
      if (!(err instanceof ApiError && err.code === 'not-found')) throw err;
    }
  }
}

async function removePreviews(ctx: ServiceContext, orgId: string, app: AppRow): Promise<void> {
  for (const p of await previewsOf(ctx.db, app.id)) {
    if (p.preview_app_id) {
      await deleteApp(ctx, orgId, p.app_name).catch((err: unknown) => {
        if (!(err instanceof ApiError && err.code === 'not-found')) throw err;
      });
    }
    await removePreviewBranches(ctx, orgId, p.id);
  }
  const own = await previewOfApp(ctx.db, app.id);
  if (own) await removePreviewBranches(ctx, orgId, own.id);
}

async function deletePreviewRow(tx: Tx, app: AppRow): Promise<void> {
  // A branch made for it after BEFORE ran (its creation locks this app's row too) would
  // lose its record with the row: refused, as a late machine is, for the client to retry.
  const late = await tx
    .selectFrom('preview_databases as d')
    .innerJoin('previews as p', 'p.id', 'd.preview_id')
    .select('d.database_id')
    .where('p.preview_app_id', '=', app.id)
    .where('p.state', '<>', 'failed')
    .executeTakeFirst();
  if (late) {
    throw new ApiError(
      'conflict',
      `The preview app '${app.name}' got a database branch while it was being deleted; try again.`,
    );
  }
  await tx
    .deleteFrom('previews')
    .where('preview_app_id', '=', app.id)
    .where('state', '<>', 'failed')
    .execute();
}

async function refuseLiveMachines(tx: Tx, _ctx: ServiceContext, _orgId: string, app: AppRow) {
  const [live] = await liveMachineIds(tx, app.id);
  if (live) {
    throw new ApiError(
      'conflict',
      `App '${app.name}' has a machine (${live}) that was created while it was being deleted; try again.`,
    );
  }
}

async function removeEdgeNames(tx: Tx, _ctx: ServiceContext, _orgId: string, app: AppRow) {
  await removeDomains(tx, app.id);
  await announceEdgeChange(tx);
}

async function releaseVolumes(tx: Tx, _ctx: ServiceContext, _orgId: string, app: AppRow) {
  await tx.updateTable('volumes').set({ app_id: null }).where('app_id', '=', app.id).execute();
}

async function deleteAppRow(tx: Tx, app: AppRow): Promise<void> {
  await tx.deleteFrom('apps').where('id', '=', app.id).execute();
}
