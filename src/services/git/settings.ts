/**
 * An app's Git settings (issue #26; docs/api.md "git push"): the branch whose push
 * deploys the app (null: `main` or `master`) and whether a push of another branch deploys
 * its preview or is only stored. Kept on the app's row; read by every push (plan.ts).
 *
 * A preview (`<app>--<x>`) is an app with a repository of its own, but it makes no
 * previews (a preview of a preview is refused): its `branchPreviews` is always false, and
 * turning it on is 409 `conflict`. Its production branch may be set like any app's.
 */
import type { AppGit, SetAppGitBody } from '../../contracts/git.js';
import { ApiError } from '../../errors/api-error.js';
import type { Executor } from '../../store/db.js';
import { findApp } from '../apps/records.js';
import type { ServiceContext } from '../context.js';
import { splitAddress, type SshGateway } from '../ssh.js';
import { productionBranchesOf, type PushSettings } from './plan.js';

/** The settings a push of the app follows, and the app it previews if it is a preview. */
export interface AppPushSettings extends PushSettings {
  previewOf?: string;
}

/** The Git settings of app `appId` (a row of the caller's organization). */
export async function pushSettingsOf(ex: Executor, appId: string): Promise<AppPushSettings> {
  const row = await ex
    .selectFrom('apps')
    .leftJoin('previews', 'previews.preview_app_id', 'apps.id')
    .leftJoin('apps as parent', 'parent.id', 'previews.app_id')
    .select(['apps.git_production_branch', 'apps.git_branch_previews', 'parent.name as parent'])
    .where('apps.id', '=', appId)
    .executeTakeFirstOrThrow();
  return {
    productionBranch: row.git_production_branch,
    branchPreviews: row.parent === null && row.git_branch_previews,
    ...(row.parent !== null ? { previewOf: row.parent } : {}),
  };
}

/** `ssh://git@<gateway>/<app>.git`, the port left out when it is SSH's own (22). */
function sshPushUrl(gateway: Pick<SshGateway, 'address'>, app: string): string {
  const [host, port] = splitAddress(gateway.address);
  const named = host.includes(':') ? `[${host}]` : host;
  return `ssh://git@${named}${port === 22 ? '' : `:${port}`}/${app}.git`;
}

function answer(
  ctx: ServiceContext,
  gateway: Pick<SshGateway, 'address'>,
  app: string,
  s: AppPushSettings,
): AppGit {
  return {
    app,
    productionBranch: s.productionBranch,
    productionBranches: productionBranchesOf(s),
    branchPreviews: s.branchPreviews,
    ...(s.previewOf !== undefined ? { previewOf: s.previewOf } : {}),
    pushUrls: {
      https: `${ctx.config.publicUrl}/git/${app}.git`,
      ssh: sshPushUrl(gateway, app),
    },
  };
}

/** `GET /v1/apps/:name/git`: 404 for an app not of the organization. */
export async function getAppGit(
  ctx: ServiceContext,
  gateway: Pick<SshGateway, 'address'>,
  orgId: string,
  appName: string,
): Promise<AppGit> {
  const app = await findApp(ctx.db, orgId, appName);
  return answer(ctx, gateway, app.name, await pushSettingsOf(ctx.db, app.id));
}

/**
 * `PUT /v1/apps/:name/git`: the fields given change, the others stay. Turning branch
 * previews off leaves the previews there are (they expire or are deleted as before).
 */
export async function setAppGit(
  ctx: ServiceContext,
  gateway: Pick<SshGateway, 'address'>,
  orgId: string,
  appName: string,
  body: SetAppGitBody,
): Promise<AppGit> {
  const settings = await ctx.db.transaction().execute(async (tx) => {
    const app = await findApp(tx, orgId, appName, { lock: true });
    const now = await pushSettingsOf(tx, app.id);
    if (now.previewOf !== undefined && body.branchPreviews === true) {
      throw new ApiError(
        'conflict',
        `'${appName}' is a preview of '${now.previewOf}' and makes no previews; set them on '${now.previewOf}'.`,
      );
    }
    const change = {
      ...(body.productionBranch !== undefined
        ? { git_production_branch: body.productionBranch }
        : {}),
      ...(body.branchPreviews !== undefined ? { git_branch_previews: body.branchPreviews } : {}),
    };
    if (Object.keys(change).length === 0) return now;
    await tx.updateTable('apps').set(change).where('id', '=', app.id).execute();
    return pushSettingsOf(tx, app.id);
  });
  return answer(ctx, gateway, appName, settings);
}
