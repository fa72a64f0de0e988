/**
 * The run's template database: migrated once in the global setup, so each test file's
 * fresh database is a copy of it (`CREATE DATABASE … TEMPLATE`, about 0.4 s) instead of
 * an empty one that every platform start then migrates (about 1 s, some 150 times a run).
 */
import pg from 'pg';
import { migrate } from '../../src/store/migrate.js';

const PREFIX = 'pier_tpl_';

function withDatabase(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
};

/**
 * Makes this run's template (named by its process id) and drops the ones of runs whose
 * process is gone (a killed run never reached its teardown). Answers its name.
 */
export async function makeTemplateDatabase(adminUrl: string): Promise<string> {
  const name = `${PREFIX}${process.pid}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    const { rows } = await admin.query<{ datname: string }>(
      `SELECT datname FROM pg_database WHERE datname LIKE '${PREFIX}%'`,
    );
    for (const { datname } of rows) {
      const pid = Number(datname.slice(PREFIX.length));
      if (datname === name || !alive(pid)) await dropDatabase(admin, datname);
    }
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const pool = new pg.Pool({ connectionString: withDatabase(adminUrl, name), max: 1 });
  try {
    await migrate(pool);
  } finally {
    await pool.end(); // no session may stay on a template that is copied
  }
  return name;
}

async function dropDatabase(admin: pg.Client, name: string): Promise<void> {
  await admin.query(`UPDATE pg_database SET datistemplate = false WHERE datname = $1`, [name]);
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
}

/** Drops this run's template (the global teardown). */
export async function dropTemplateDatabase(adminUrl: string, name: string): Promise<void> {
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await dropDatabase(admin, name);
  } finally {
    await admin.end();
  }
}
