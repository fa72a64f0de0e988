/**
 * The bucket row and the one way to it by name, scoped by the caller's organization. The
 * other bucket files (keys, attachments, CORS, presign) find buckets here; this file
 * imports none of them.
 */
import { notFound } from '../../errors/api-error.js';
import type { Executor } from '../../store/db.js';

export interface BucketRow {
  id: string;
  org_id: string;
  name: string;
  backend_ref: string;
  created_at: Date;
}

/** The bucket of `orgId` named `name`, or 404 (also when another org owns it). */
export async function findBucket(ex: Executor, orgId: string, name: string): Promise<BucketRow> {
  const row = await ex
    .selectFrom('buckets')
    .select(['id', 'org_id', 'name', 'backend_ref', 'created_at'])
    .where('org_id', '=', orgId)
    .where('name', '=', name)
    .executeTakeFirst();
  if (!row) throw notFound(`Bucket '${name}'`);
  return row;
}
