/**
 * SQL the platform runs on a server: always as the superuser over the private socket,
 * which pg_hba trusts because only the platform can reach that directory.
 */
import { createHash, createHmac, pbkdf2, randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import pg from 'pg';
import type { Layout } from './layout.js';
import { APP_ROLE, SQL_READER_ROLE, SUPERUSER } from './settings.js';

const derive = promisify(pbkdf2);

/** Runs `fn` with a connection to `database` on the server of `layout` listening on `port`. */
export async function withClient<T>(
  layout: Layout,
  port: number,
  fn: (client: pg.Client) => Promise<T>,
  database = 'postgres',
): Promise<T> {
  const client = new pg.Client({
    host: layout.socketDir,
    port,
    user: SUPERUSER,
    database,
    application_name: 'pier',
    connectionTimeoutMillis: 30_000,
  });
  // An error after connect (the server going away) must not become an uncaught exception.
  client.on('error', () => undefined);
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** A SCRAM-SHA-256 verifier of `password`, as PostgreSQL stores it in pg_authid. */
export async function scramVerifier(password: string, iterations = 4096): Promise<string> {
  const salt = randomBytes(16);
  const salted = await derive(password, salt, iterations, 32, 'sha256');
  const clientKey = createHmac('sha256', salted).update('Client Key').digest();
  const storedKey = createHash('sha256').update(clientKey).digest();
  const serverKey = createHmac('sha256', salted).update('Server Key').digest();
  const b64 = (b: Buffer) => b.toString('base64');
  return `SCRAM-SHA-256$${iterations}:${b64(salt)}$${b64(storedKey)}:${b64(serverKey)}`;
}

/** A standard SQL string literal (standard_conforming_strings is on since 9.1). */
function literal(value: string): string {
  if (value.includes('\0')) throw new Error('a password cannot contain a NUL character');
  return `'${value.replace(/'/g, "''")}'`;
}

/**
 * Sets the customer role's password. For printable ASCII (what the platform generates)
 * the verifier is computed here, so the password itself never reaches the server or its
 * logs; other text is left to the server, whose SASLprep normalization must match.
 */
export async function setAppPassword(layout: Layout, port: number, password: string) {
  const printable = /^[\x20-\x7e]*$/.test(password);
  const secret = printable ? await scramVerifier(password) : password;
  await withClient(layout, port, async (c) => {
    // ALTER ROLE takes no bind parameters; the literal is escaped (and a verifier is base64).
    await c.query(`ALTER ROLE ${APP_ROLE} PASSWORD ${literal(secret)}`);
  });
  await setSqlReader(layout, port, password);
}

/**
 * The SQL reader's password: derived from the customer's, so the platform needs to keep
 * no second secret, and it follows the customer's password when that changes. Knowing it
 * gives nothing the customer's password does not already give.
 */
export function sqlReaderPassword(appPassword: string): string {
  return createHmac('sha256', appPassword).update('pier sql reader').digest('base64url');
}

/**
 * Makes the SQL reader role (settings.ts) with its password and read rights: the role
 * pg_read_all_data from PostgreSQL 14, before it SELECT on the tables of schema public
 * (those to come too). Never the owner of anything, never pg_signal_backend, no CREATE.
 */
export async function setSqlReader(layout: Layout, port: number, appPassword: string) {
  const verifier = await scramVerifier(sqlReaderPassword(appPassword));
  await withClient(layout, port, async (c) => {
    const exists = await c.query('SELECT 1 FROM pg_roles WHERE rolname = $1', [SQL_READER_ROLE]);
    if (exists.rowCount === 0)
      await c.query(`CREATE ROLE ${SQL_READER_ROLE}`).catch((err: { code?: string }) => {
        if (err.code !== '42710') throw err; // made meanwhile by another caller
      });
    await c.query(
      `ALTER ROLE ${SQL_READER_ROLE} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS PASSWORD ${literal(verifier)}`,
    );
    const { rows } = await c.query<{ v: number }>(
      "SELECT current_setting('server_version_num')::int AS v",
    );
    if (rows[0]!.v >= 140000) {
      await c.query(`GRANT pg_read_all_data TO ${SQL_READER_ROLE}`);
      return;
    }
    await withClient(
      layout,
      port,
      async (app) => {
        await app.query(`GRANT USAGE ON SCHEMA public TO ${SQL_READER_ROLE}`);
        await app.query(`GRANT SELECT ON ALL TABLES IN SCHEMA public TO ${SQL_READER_ROLE}`);
        await app.query(
          `ALTER DEFAULT PRIVILEGES FOR ROLE ${APP_ROLE} IN SCHEMA public GRANT SELECT ON TABLES TO ${SQL_READER_ROLE}`,
        );
      },
      APP_ROLE,
    );
  });
}
