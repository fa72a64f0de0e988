/**
 * What the database runtime reports of its own accord, written to the rows: a database
 * fell asleep or woke, a standby replaced its dead primary, a standby was lost; and
 * whether a client may wake a database now (not while its credit is blocked). The
 * runtime never writes rows itself (a remote host agent could not), so these handlers
 * are the only place its observations reach the store. A redundant database that lost
 * its standby either way gets a new one by a durable job.
 */
import type { DatabaseRuntimeEvents } from '../../engines/runtime.js';
import type { JobCatalogue } from '../../jobs/catalogue.js';
import { enqueue } from '../../jobs/queue.js';
import type { Db } from '../../store/db.js';
import { creditBlocked } from '../billing/blocking.js';

export function databaseRuntimeEvents(deps: { db: Db; jobs: JobCatalogue }): DatabaseRuntimeEvents {
  const { db, jobs } = deps;
  return {
    async onPowerChanged(databaseId, power) {
      await db.updateTable('databases').set({ power }).where('id', '=', databaseId).execute();
    },
    async onFailover({ databaseId, promoted, removed }) {
      await db.transaction().execute(async (tx) => {
        await tx.deleteFrom('database_instances').where('id', '=', removed).execute();
        await tx
          .updateTable('database_instances')
          .set({ role: 'primary' })
          .where('id', '=', promoted)
          .execute();
        await enqueue(tx, jobs, 'databases.rebuild-standby', { databaseId });
      });
    },
    async onStandbyLost(databaseId) {
      await enqueue(db, jobs, 'databases.rebuild-standby', { databaseId });
    },
    async mayWake(databaseId) {
      const row = await db
        .selectFrom('databases')
        .select('org_id')
        .where('id', '=', databaseId)
        .executeTakeFirst();
      return !row || !(await creditBlocked(db, row.org_id));
    },
  };
}
