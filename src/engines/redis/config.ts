/**
 * The redis.conf of an instance, as text. It is derived from the instance spec on every
 * start (port, memory, password, persistence), so a changed spec takes effect at the next
 * start and nothing hand-edited survives.
 */
import { createHash } from 'node:crypto';
import type { RedisPaths } from './paths.js';

/** ACL user of the platform's own control connection (unix socket, password in a file). */
export const ADMIN_USER = 'pier';
/** ACL user of the customer (the contract: redis role `app`). */
export const APP_USER = 'app';

/**
 * What the customer may run: everything except the `@admin` category, which in Redis 7.0
 * holds CONFIG, SHUTDOWN, DEBUG, MODULE, ACL's writing and listing subcommands, MONITOR,
 * CLIENT KILL/PAUSE/LIST, REPLICAOF/SYNC/PSYNC/FAILOVER, SAVE/BGSAVE/BGREWRITEAOF (a
 * rewrite would drop the timestamped history forks read), SLOWLOG/LATENCY and CLUSTER
 * administration. MIGRATE is denied too: it opens connections to arbitrary hosts. A few
 * read-only diagnostics of @admin are given back because client libraries and operators
 * use them and they reveal nothing of the host.
 */
export const APP_RULES = [
  '~*',
  '&*',
  '+@all',
  '-@admin',
  '-migrate',
  '+role',
  '+lastsave',
  '+slowlog|get',
  '+slowlog|len',
  '+latency|latest',
  '+latency|history',
  '+latency|histogram',
  '+latency|doctor',
];

/** What the config says; everything else follows from the paths. */
export interface ConfigInput {
  paths: RedisPaths;
  /** TLS port on 127.0.0.1 (the spec's internalPort). */
  tlsPort: number;
  memoryMb: number;
  appPassword: string;
  adminPassword: string;
  /** Persistent (the spec has an archive): a timestamped AOF that forks can cut. */
  persistent: boolean;
}

/** The ACL form of a password: its SHA-256, so the config never holds the password itself. */
export function passwordDigest(password: string): string {
  return `#${createHash('sha256').update(password, 'utf8').digest('hex')}`;
}

/** A config value Redis reads as one argument, whatever characters the path holds. */
export function quote(value: string): string {
  // eslint-disable-next-line no-control-regex -- control characters are what is refused
  if (/[\0-\x1f\x7f]/.test(value)) throw new Error(`unusable value in redis.conf: ${value}`);
  return `"${value.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
}

/** The text of redis.conf. */
export function renderConfig(c: ConfigInput): string {
  const p = c.paths;
  const lines = [
    '# Written by pier on every start of this instance; changes here are overwritten.',
    'bind 127.0.0.1',
    'protected-mode yes',
    // Plain TCP is off: clients reach the TLS port through the platform's front.
    'port 0',
    `tls-port ${c.tlsPort}`,
    `tls-cert-file ${quote(p.certFile)}`,
    `tls-key-file ${quote(p.keyFile)}`,
    `tls-ca-cert-file ${quote(p.caFile)}`,
    'tls-auth-clients no',
    'tls-replication no',
    // The platform's control connection: no TLS, reachable only by the service user and root.
    `unixsocket ${quote(p.socket)}`,
    'unixsocketperm 700',
    // pier starts the process detached itself, writes its pidfile (in a directory the
    // server cannot write) and sends its output to the log file.
    'daemonize no',
    'supervised no',
    'logfile ""',
    'loglevel notice',
    'always-show-logo no',
    `dir ${quote(p.dataDir)}`,
    'dbfilename dump.rdb',
    // The cgroup the host puts the server in has headroom above this for forks and buffers.
    `maxmemory ${Math.max(1, Math.floor(c.memoryMb))}mb`,
    // A database, not a cache: a full instance refuses writes instead of dropping keys.
    'maxmemory-policy noeviction',
    // No periodic RDB snapshots; a non-persistent instance saves one only on a planned stop.
    'save ""',
    'appenddirname appendonlydir',
    'appendfilename appendonly.aof',
    ...(c.persistent
      ? [
          'appendonly yes',
          // One `#TS:<unix seconds>` line before the first write of each second: what
          // redis-check-aof --truncate-to-timestamp cuts a fork at.
          'aof-timestamp-enabled yes',
          'appendfsync everysec',
          // A rewrite would replace the timestamped history with a snapshot.
          'auto-aof-rewrite-percentage 0',
          'aof-use-rdb-preamble yes',
          // A copy taken while the server writes may end inside a command.
          'aof-load-truncated yes',
        ]
      : ['appendonly no']),
    'enable-debug-command no',
    'enable-module-command no',
    'enable-protected-configs no',
    'user default off resetpass resetkeys resetchannels -@all',
    `user ${ADMIN_USER} on ${passwordDigest(c.adminPassword)} ~* &* +@all`,
    `user ${APP_USER} on ${passwordDigest(c.appPassword)} ${APP_RULES.join(' ')}`,
    '',
  ];
  return lines.join('\n');
}
