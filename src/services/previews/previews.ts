/**
 * Previews (issue #26 item 3): reading them. Making one is create.ts (and work.ts, its
 * job); removing one is remove.ts. An app or preview of another organization is not
 * found, exactly like a missing one.
 */
import type { Preview } from '../../contracts/previews.js';
import { findApp } from '../apps/records.js';
import type { ServiceContext } from '../context.js';
import { findPreview, previewsOf, toPreview } from './records.js';

export { createPreview, type PreviewRequest } from './create.js';
export { deletePreview, removePreviewsOfBranch } from './remove.js';

export async function listPreviews(
  ctx: ServiceContext,
  orgId: string,
  appName: string,
): Promise<Preview[]> {
  const app = await findApp(ctx.db, orgId, appName);
  const rows = await previewsOf(ctx.db, app.id);
  return Promise.all(rows.map((r) => toPreview(ctx.db, ctx, appName, r)));
}

export async function getPreview(
  ctx: ServiceContext,
  orgId: string,
  appName: string,
  name: string,
): Promise<Preview> {
  const app = await findApp(ctx.db, orgId, appName);
  return toPreview(ctx.db, ctx, appName, await findPreview(ctx.db, app.id, name));
}
