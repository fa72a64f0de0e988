/**
 * `pier db url|connect|proxy`: getting a copy's one-time URL, opening `psql` or
 * `redis-cli` on a database, and a local port that reaches it. A database's front serves
 * only its host and the machines' network, so `connect` and `proxy` go through the API's
 * tunnel (db-tunnel.ts) unless `--direct` says the front is reachable. The client runs with an argument array (no shell), the
 * terminal handed straight to it, and its exit code passed on. The password goes to the
 * client through its environment variable, not its arguments: any local user can read
 * another's command line in /proc, but not their environment.
 */
import { spawn } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import type { Command } from 'commander';
import { apiPath } from './api-client.js';
import { resolveSettings } from './config-file.js';
import { type CommonOptions, connect, withCommonOptions } from './connect.js';
import { note } from './db-common.js';
import type { CopyUrl } from './db-types.js';
import { savedUrl, saveUrl } from './db-url-store.js';
import { listenTunnel, type TunnelTarget } from './db-tunnel.js';
import { CliError, action } from './errors.js';
import { printJson, say } from './output.js';

interface UrlOptions extends CommonOptions {
  save?: boolean;
}

interface ConnectOptions {
  apiUrl?: string;
  url?: string;
  caFile?: string;
  direct?: boolean;
}

interface ProxyOptions {
  apiUrl?: string;
  port?: string;
}

/** A database client to run: the program, its arguments and extra environment. */
export interface ClientCommand {
  bin: string;
  args: string[];
  env: Record<string, string>;
  /** What to install when `bin` is missing. */
  install: string;
}

/** Registers `pier db url`, `pier db connect` and `pier db proxy`. */
export function registerDbConnect(db: Command): void {
  withCommonOptions(
    db.command('url').description("hand out a branch's or fork's URL; works once per copy"),
  )
    .argument('<name>', 'the copy (a database made by branch, fork or restore)')
    .option('--save', 'keep the URL in databases.json beside the CLI config, for `pier db connect`')
    .action(
      action(async (name: string, opts: UrlOptions) => {
        const client = await connect(opts);
        const answer = await client.call<CopyUrl>('POST', apiPath`/v1/resources/${name}/url`);
        // Out first: the server will never answer this again.
        if (opts.json) printJson(answer);
        else say(answer.url);
        if (opts.save) {
          const file = await saveUrl(client.baseUrl, answer.name, answer.url);
          note(`Saved the URL in ${file}; \`pier db connect ${answer.name}\` uses it.`);
        } else if (!opts.json) {
          note('This is the only time the URL is shown; store it now.');
        }
      }),
    );

  db.command('connect')
    .description('open psql or redis-cli on a database; arguments after -- go to the client')
    .argument('<name>', 'database name')
    .argument('[args...]', 'extra arguments for psql or redis-cli, after --')
    .option('--api-url <url>', 'API address the saved URL belongs to (default as for the others)')
    .option('--url <url>', 'connect with this URL instead of the saved one')
    .option('--ca-file <pem>', "verify the server's certificate against this CA (the platform CA)")
    .option(
      '--direct',
      "dial the URL's host instead of tunnelling through the API (on the host, or public fronts)",
    )
    .addHelpText('after', '\nExample:\n  pier db connect main -- -c "select 1"')
    .action(
      action(async (name: string, extra: string[], opts: ConnectOptions) => {
        const settings = await resolveSettings(opts);
        const url = opts.url ?? (await savedUrl(settings.apiUrl, name));
        if (url === undefined) {
          throw new CliError(
            `no saved URL for ${name}. Pass --url, or save one: a branch or fork with ` +
              `\`pier db url ${name} --save\` (once); a database's URL is shown only when it ` +
              'is created (`pier db create … --save` keeps it).',
          );
        }
        if (opts.direct) {
          process.exitCode = await run(clientCommand(url, extra, opts.caFile));
          return;
        }
        // The URL's credentials and options, dialed at the tunnel's local end. TLS still
        // runs end to end with the server: require, or verify-ca with --ca-file (the
        // certificate names the services host, never 127.0.0.1).
        const tunnel = await listenTunnel(tunnelTarget(settings, name), 0, (line) =>
          note(`pier: ${line}`),
        );
        try {
          const local = atLocalPort(url, tunnel.port);
          process.exitCode = await run(clientCommand(local, extra, opts.caFile));
        } finally {
          await tunnel.close();
        }
      }),
    );

  db.command('proxy')
    .description('listen on 127.0.0.1 and carry each connection to a database through the API')
    .argument('<name>', 'database name')
    .option('--api-url <url>', 'API address (default: PIER_API_URL, else the one saved by login)')
    .option('--port <n>', 'local port (default: a free one)', '0')
    .addHelpText(
      'after',
      "\nThen point any client at 127.0.0.1 and the port, with the database URL's user,\n" +
        'password and TLS (sslmode=require). Ctrl-C stops it.',
    )
    .action(
      action(async (name: string, opts: ProxyOptions) => {
        const port = Number(opts.port ?? '0');
        if (!Number.isInteger(port) || port < 0 || port > 65535) {
          throw new CliError(`--port must be a TCP port (0-65535), not ${opts.port}`);
        }
        const settings = await resolveSettings(opts);
        const tunnel = await listenTunnel(tunnelTarget(settings, name), port, (line) =>
          note(`pier: ${line}`),
        );
        // stdout holds only the address, for scripts; the rest is a note.
        say(`127.0.0.1:${tunnel.port}`);
        note(`Carrying connections on 127.0.0.1:${tunnel.port} to ${name}; Ctrl-C stops.`);
        await new Promise<void>((resolve) => {
          const stop = () => resolve();
          process.once('SIGINT', stop);
          process.once('SIGTERM', stop);
        });
        await tunnel.close();
      }),
    );
}

/** Where tunnels go and as whom, or a hint on how to get a key. */
function tunnelTarget(settings: { apiUrl: string; apiKey?: string }, name: string): TunnelTarget {
  if (!settings.apiKey) {
    throw new CliError(`no API key for ${settings.apiUrl}; run \`pier login\` or set PIER_API_KEY`);
  }
  return { apiUrl: settings.apiUrl, apiKey: settings.apiKey, name };
}

/** The URL with its host and port replaced by the tunnel's local end. */
export function atLocalPort(url: string, port: number): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new CliError('the URL does not parse');
  }
  u.hostname = '127.0.0.1';
  u.port = String(port);
  return u.toString();
}

/** The client for a URL: psql for postgres(ql)://, redis-cli for redis(s)://. */
export function clientCommand(url: string, extra: string[] = [], caFile?: string): ClientCommand {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    // Not echoed: it may be a mistyped URL with the password in it.
    throw new CliError('the URL does not parse');
  }
  const password = decodeURIComponent(u.password);
  const env: Record<string, string> = {};
  if (u.protocol === 'postgres:' || u.protocol === 'postgresql:') {
    u.password = '';
    if (password) env.PGPASSWORD = password;
    if (caFile) {
      // verify-ca, not verify-full: the certificate names the platform, not every address
      // a person may reach it by.
      u.searchParams.set('sslmode', 'verify-ca');
      u.searchParams.set('sslrootcert', path.resolve(caFile));
    }
    // --dbname rather than a bare operand: psql builds that do not reorder arguments would
    // read options after an operand as a user name.
    return {
      bin: 'psql',
      args: ['--dbname', u.toString(), ...extra],
      env,
      install: 'the PostgreSQL client (psql), e.g. `apt install postgresql-client`',
    };
  }
  if (u.protocol === 'redis:' || u.protocol === 'rediss:') {
    if (password) env.REDISCLI_AUTH = password;
    const args = ['-h', u.hostname.replace(/^\[(.*)\]$/, '$1'), '-p', u.port || '6379'];
    if (u.username) args.push('--user', decodeURIComponent(u.username));
    const dbIndex = u.pathname.replace(/^\//, '');
    if (/^\d+$/.test(dbIndex)) args.push('-n', dbIndex);
    if (u.protocol === 'rediss:') {
      // Without a CA, encrypt without verifying, as postgres' sslmode=require does; the
      // platform CA is private, so redis-cli's default verification would always fail.
      args.push('--tls', ...(caFile ? ['--cacert', path.resolve(caFile)] : ['--insecure']));
    }
    return {
      bin: 'redis-cli',
      args: [...args, ...extra],
      env,
      install: 'redis-cli, e.g. `apt install redis-tools`',
    };
  }
  throw new CliError(`a ${u.protocol}// URL is neither postgres nor redis`);
}

/** Runs the client on this terminal; answers its exit code (128+signal if killed). */
async function run(cmd: ClientCommand): Promise<number> {
  const child = spawn(cmd.bin, cmd.args, {
    stdio: 'inherit',
    env: { ...process.env, ...cmd.env },
  });
  // Ctrl-C reaches the whole foreground group: psql cancels the query, redis-cli its
  // command; pier must not die under them. A kill meant for pier is passed on.
  const ignore = () => {};
  const forward = (signal: NodeJS.Signals) => child.kill(signal);
  process.on('SIGINT', ignore);
  process.on('SIGTERM', forward);
  process.on('SIGHUP', forward);
  try {
    return await new Promise<number>((resolve, reject) => {
      child.once('error', (err: NodeJS.ErrnoException) => {
        reject(
          err.code === 'ENOENT'
            ? new CliError(`${cmd.bin} is not installed (or not on PATH); install ${cmd.install}`)
            : new CliError(`cannot run ${cmd.bin}: ${err.message}`),
        );
      });
      child.once('exit', (code, signal) => {
        resolve(code ?? 128 + (signal ? (os.constants.signals[signal] ?? 0) : 0));
      });
    });
  } finally {
    process.off('SIGINT', ignore);
    process.off('SIGTERM', forward);
    process.off('SIGHUP', forward);
  }
}
