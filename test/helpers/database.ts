/**
 * A fresh database per test file, on the run's server, dropped at the end: a copy of the
 * run's migrated template (template-database.ts).
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';

export interface TestDatabase {
  url: string;
  name: string;
  drop(): Promise<void>;
}

function withDatabase(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

export async function createTestDatabase(): Promise<TestDatabase> {
  const admin = inject('adminDatabaseUrl');
  const name = `pier_t_${randomBytes(6).toString('hex')}`;
  const client = new pg.Client({ connectionString: admin });
  await client.connect();
  try {
    // Copies of one template at once may meet: a copy waits for no session on the template.
    for (let tries = 1; ; tries++) {
      try {
        await client.query(`CREATE DATABASE ${name} TEMPLATE ${inject('templateDatabase')}`);
        break;
      } catch (err) {
        if ((err as { code?: string }).code !== '55006' || tries >= 50) throw err;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  } finally {
    await client.end();
  }
  return {
    name,
    url: withDatabase(admin, name),
    async drop() {
      const c = new pg.Client({ connectionString: admin });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}
