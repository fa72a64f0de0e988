/**
 * Meters what is kept rather than run: volumes, databases and buckets. Each row carries
 * `metered_at`, up to which it is recorded; a tick records, per row, the time since then
 * at the size (and for databases the power state) it has now. So a resize, an object
 * written or a database falling asleep counts from the tick that sees it (the metering
 * period, a minute by default), and the stretch between a row's last tick and its
 * deletion is not charged. Each event carries the interval it measures (`since`, `at`),
 * over which it is priced. Written under the usage lock (record.ts).
 */
import { sql } from 'kysely';
import type { Executor } from '../../store/db.js';
import { withUsageLock } from './record.js';

/** Records the storage (and database running time) of every row up to now. */
export async function meterStorage(ex: Executor): Promise<void> {
  await withUsageLock(ex, async (tx) => {
    await sql`
      WITH t AS MATERIALIZED (SELECT clock_timestamp() AS now),
      due AS (
        SELECT id, org_id, size_gb, coalesce(metered_at, created_at) AS since
        FROM volumes FOR UPDATE SKIP LOCKED),
      done AS (
        UPDATE volumes v SET metered_at = t.now FROM due, t WHERE v.id = due.id
        RETURNING due.id, due.org_id, due.size_gb, due.since, t.now AS at,
          extract(epoch FROM t.now - due.since)::numeric AS seconds)
      INSERT INTO usage_events (org_id, kind, quantity, subject, since, at)
      SELECT org_id, 'volume_storage_gb_hours', round(size_gb * seconds / 3600, 9), id, since, at
      FROM done WHERE seconds > 0`.execute(tx);

    await sql`
      WITH t AS MATERIALIZED (SELECT clock_timestamp() AS now),
      due AS (
        SELECT b.id, b.org_id, coalesce(b.metered_at, b.created_at) AS since,
          coalesce((SELECT sum(o.size) FROM objects o WHERE o.bucket_id = b.id), 0) AS bytes
        FROM buckets b FOR UPDATE OF b SKIP LOCKED),
      done AS (
        UPDATE buckets b SET metered_at = t.now FROM due, t WHERE b.id = due.id
        RETURNING due.id, due.org_id, due.bytes, due.since, t.now AS at,
          extract(epoch FROM t.now - due.since)::numeric AS seconds)
      INSERT INTO usage_events (org_id, kind, quantity, subject, since, at)
      SELECT org_id, 'bucket_storage_gb_hours',
        round(bytes::numeric * seconds / (1073741824::numeric * 3600), 9), id, since, at
      FROM done WHERE seconds > 0 AND bytes > 0`.execute(tx);

    // A host-redundant database runs a standby: a second server with its own volume.
    await sql`
      WITH t AS MATERIALIZED (SELECT clock_timestamp() AS now),
      due AS (
        SELECT d.id, d.org_id, d.size_gb, d.memory_mb, d.power = 'running' AS awake,
          coalesce(d.metered_at, d.created_at) AS since,
          greatest(1, (SELECT count(*) FROM database_instances i WHERE i.database_id = d.id)) AS copies
        FROM databases d WHERE d.state <> 'failed' FOR UPDATE OF d SKIP LOCKED),
      done AS (
        UPDATE databases d SET metered_at = t.now FROM due, t WHERE d.id = due.id
        RETURNING due.*, t.now AS at, extract(epoch FROM t.now - due.since)::numeric AS seconds)
      INSERT INTO usage_events (org_id, kind, quantity, subject, since, at)
      SELECT org_id, k.kind, k.quantity, id, since, at
      FROM done CROSS JOIN LATERAL (VALUES
        ('database_storage_gb_hours', round(size_gb * copies * seconds / 3600, 9), true),
        ('database_running_seconds', round(copies * seconds, 3), awake),
        ('database_memory_gb_seconds', round(memory_mb * copies * seconds / 1024, 6), awake)
      ) AS k(kind, quantity, counted)
      WHERE seconds > 0 AND k.counted`.execute(tx);
  });
}
