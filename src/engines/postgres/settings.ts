/**
 * The text of pier.conf (included last by postgresql.conf) and pg_hba.conf, as pure
 * functions of what the server is: its port, memory, archive and role. Nothing here
 * touches the disk, so every rule can be tested on its own.
 */

/** The superuser pier itself connects as, only ever over the private socket. */
export const SUPERUSER = 'pier';
/** The customer's role. */
export const APP_ROLE = 'app';
/**
 * The role pier's read-only SQL runs as (`POST /v1/resources/:name/sql` read-only, the
 * MCP tool of production agents): it may read every table and nothing else, so a
 * statement cannot end other sessions (pg_terminate_backend needs the session's role or
 * pg_signal_backend) nor create anything. Its login is the database `app` over TLS only.
 */
export const SQL_READER_ROLE = 'pier_sql_reader';

/** Everything pier.conf depends on. */
/** How long written WAL may wait for the archive when the database sets no flushIntervalS. */
export const DEFAULT_ARCHIVE_TIMEOUT_S = 60;

export interface SettingsInput {
  /** Stable id of the instance: cluster_name, so `ps` tells servers apart. */
  id: string;
  port: number;
  socketDir: string;
  /** Listen on 127.0.0.1 with TLS (false for a template being built: socket only). */
  listen: boolean;
  memoryMb: number;
  sizeGb: number;
  /** Where finished WAL segments go, and whether basic_archive can do it (else a command). */
  archive?: { dir: string; library: boolean; timeoutS?: number };
  /** WAL directory of an archive to replay from (restore, or a standby catching up). */
  restoreFrom?: string;
  /** Stop replay after the last commit at or before this moment, then promote. */
  recoveryTarget?: Date;
  /** Stream from this primary (a standby); `applicationName` is what the primary waits for. */
  upstream?: { socketDir: string; port: number; applicationName: string };
  /** A standby needs at least the primary's max_connections to replay its WAL. */
  minConnections?: number;
  /** The standby every commit waits for (synchronous replication), if any. */
  syncStandby?: string;
  /** Accept read-only connections during recovery (off while a restore replays). */
  hotStandby: boolean;
}

/** Memory settings for a server given `memoryMb` of RAM, in MB (tuned as pgtune does). */
export function memorySettings(memoryMb: number) {
  const mem = Math.max(64, Math.floor(memoryMb));
  const sharedBuffers = Math.max(16, Math.round(mem * 0.25));
  const maxConnections = clamp(Math.round(mem / 10), 20, 500);
  return {
    sharedBuffersMb: sharedBuffers,
    effectiveCacheSizeMb: Math.round(mem * 0.75),
    maxConnections,
    // Each connection may sort or hash several times at once; keep the sum inside RAM.
    workMemMb: clamp(Math.floor((mem - sharedBuffers) / (maxConnections * 3)), 4, 1024),
    maintenanceWorkMemMb: clamp(Math.round(mem / 16), 16, 2048),
  };
}

/** WAL sizes scaled to the volume, so a small database's WAL cannot fill its own quota. */
export function walSettings(sizeGb: number) {
  const sizeMb = Math.max(1, sizeGb) * 1024;
  const maxWal = clamp(Math.round(sizeMb / 8), 64, 4096);
  return {
    maxWalSizeMb: maxWal,
    minWalSizeMb: Math.min(80, Math.floor(maxWal / 2)),
    walKeepSizeMb: clamp(Math.round(sizeMb / 16), 64, 1024),
  };
}

function clamp(n: number, lo: number, hi: number): number {
  return Math.min(hi, Math.max(lo, n));
}

/** A postgresql.conf string literal: quotes doubled, backslashes escaped. */
export function confString(value: string): string {
  return `'${value.replace(/\\/g, '\\\\').replace(/'/g, "''")}'`;
}

/** A POSIX shell word for `value`, in single quotes. */
export function shellQuote(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`;
}

/** `value` escaped for archive_command and restore_command, which expand %-sequences. */
function percentEscape(value: string): string {
  return value.replace(/%/g, '%%');
}

/** A libpq connection-string value. */
function conninfoValue(value: string): string {
  return `'${value.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
}

/**
 * The archive_command used when basic_archive is missing: an existing identical file is
 * success (a retry after a crash), anything else is copied under a temporary name, synced
 * and renamed, so the archive never holds half a segment.
 */
export function archiveCommand(dir: string): string {
  const target = `${shellQuote(percentEscape(dir))}/%f`;
  const temp = `${shellQuote(percentEscape(dir))}/.tmp.%f`;
  return (
    `if [ -f ${target} ]; then cmp -s %p ${target}; ` +
    `else cp %p ${temp} && sync ${temp} && mv ${temp} ${target}; fi`
  );
}

/** The restore_command fetching a segment or history file from an archive's WAL directory. */
export function restoreCommand(dir: string): string {
  return `cp ${shellQuote(percentEscape(dir))}/%f %p`;
}

/** recovery_target_time for `at`: ISO 8601 with an explicit zone, millisecond precision. */
export function recoveryTime(at: Date): string {
  return at.toISOString().replace('T', ' ').replace('Z', '+00');
}

/** The text of pier.conf. */
export function renderSettings(s: SettingsInput): string {
  const mem = memorySettings(s.memoryMb);
  const wal = walSettings(s.sizeGb);
  const lines: [string, string | number][] = [
    ['cluster_name', confString(s.id)],
    ['listen_addresses', confString(s.listen ? '127.0.0.1' : '')],
    ['port', s.port],
    ['unix_socket_directories', confString(s.socketDir)],
    ['unix_socket_permissions', '0700'],
    // TLS only where there is TCP: a template's build server has just its socket.
    ...(s.listen
      ? ([
          ['ssl', 'on'],
          ['ssl_cert_file', confString('server.crt')],
          ['ssl_key_file', confString('server.key')],
          ['ssl_ca_file', confString('root.crt')],
          ['ssl_min_protocol_version', confString('TLSv1.2')],
        ] as [string, string][])
      : [['ssl', 'off'] as [string, string]]),
    ['password_encryption', confString('scram-sha-256')],
    ['max_connections', Math.max(mem.maxConnections, s.minConnections ?? 0)],
    ['shared_buffers', confString(`${mem.sharedBuffersMb}MB`)],
    ['effective_cache_size', confString(`${mem.effectiveCacheSizeMb}MB`)],
    ['work_mem', confString(`${mem.workMemMb}MB`)],
    ['maintenance_work_mem', confString(`${mem.maintenanceWorkMemMb}MB`)],
    ['wal_level', 'replica'],
    ['max_wal_size', confString(`${wal.maxWalSizeMb}MB`)],
    ['min_wal_size', confString(`${wal.minWalSizeMb}MB`)],
    ['wal_keep_size', confString(`${wal.walKeepSizeMb}MB`)],
    ['max_wal_senders', 10],
    ['hot_standby', s.hotStandby ? 'on' : 'off'],
    ['synchronous_commit', 'on'],
    ['synchronous_standby_names', confString(s.syncStandby ? `"${s.syncStandby}"` : '')],
    ['logging_collector', 'off'],
    ['log_destination', confString('stderr')],
    ['log_line_prefix', confString('%m [%p] ')],
  ];
  if (s.archive) {
    lines.push(['archive_mode', 'on']);
    // A segment is switched at least this often when there were writes, bounding how much
    // committed work only the server's own disk holds (the database's flushIntervalS).
    lines.push(['archive_timeout', s.archive.timeoutS ?? DEFAULT_ARCHIVE_TIMEOUT_S]);
    if (s.archive.library) {
      lines.push(['archive_library', confString('basic_archive')]);
      lines.push(['basic_archive.archive_directory', confString(s.archive.dir)]);
    } else {
      lines.push(['archive_command', confString(archiveCommand(s.archive.dir))]);
    }
  } else {
    lines.push(['archive_mode', 'off']);
  }
  if (s.restoreFrom) lines.push(['restore_command', confString(restoreCommand(s.restoreFrom))]);
  if (s.recoveryTarget) {
    lines.push(['recovery_target_time', confString(recoveryTime(s.recoveryTarget))]);
    lines.push(['recovery_target_inclusive', 'on']);
    lines.push(['recovery_target_action', confString('promote')]);
  }
  if (s.upstream) {
    const conninfo = [
      `host=${conninfoValue(s.upstream.socketDir)}`,
      `port=${s.upstream.port}`,
      `user=${SUPERUSER}`,
      `application_name=${conninfoValue(s.upstream.applicationName)}`,
    ].join(' ');
    lines.push(['primary_conninfo', confString(conninfo)]);
  }
  const body = lines.map(([k, v]) => `${k} = ${v}`).join('\n');
  return `# Written by pier on every configuration change; edits here are lost.\n${body}\n`;
}

/**
 * pg_hba.conf: the platform over the private socket (only it can reach that directory),
 * standbys over the same socket, the customer over TLS with SCRAM, and nothing else:
 * every connection without TLS is refused.
 */
export function renderHba(): string {
  return [
    '# Written by pier; edits here are lost.',
    '# TYPE  DATABASE     USER  ADDRESS       METHOD',
    'local   all          all                 trust',
    'local   replication  all                 trust',
    `hostssl all          ${APP_ROLE}   127.0.0.1/32  scram-sha-256`,
    `hostssl ${APP_ROLE}          ${SQL_READER_ROLE}   127.0.0.1/32  scram-sha-256`,
    'host    all          all   all           reject',
    'host    replication  all   all           reject',
    '',
  ].join('\n');
}
