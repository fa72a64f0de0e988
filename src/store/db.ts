/**
 * The platform's connection to its own PostgreSQL: a pg pool wrapped by kysely.
 * One `Store` per running platform; tests make one per test file.
 */
import { Kysely, PostgresDialect, type Transaction } from 'kysely';
import pg from 'pg';
import type { Database } from './schema.js';

export type Db = Kysely<Database>;
export type Tx = Transaction<Database>;
/** Either the pool or an open transaction: repository functions accept both. */
export type Executor = Db | Tx;

export interface Store {
  db: Db;
  pool: pg.Pool;
  url: string;
  close(): Promise<void>;
}

// int8 (bigserial ids, counts) as strings would surprise callers that compare numbers;
// they stay well inside 2^53 here.
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => Number(v));

export function openStore(url: string, opts: { max?: number } = {}): Store {
  const pool = new pg.Pool({ connectionString: url, max: opts.max ?? 10 });
  // An idle client that loses its server must not crash the process.
  pool.on('error', () => {});
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  return {
    db,
    pool,
    url,
    async close() {
      await db.destroy();
    },
  };
}
