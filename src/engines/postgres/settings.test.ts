import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { PoolError } from '../../storage/pool/pool.js';
import { EngineError } from '../engine.js';
import { asEngineError } from './index.js';
import { layoutOf } from './layout.js';
import { normalizeLocale } from './locale.js';
import {
  archiveCommand,
  confString,
  memorySettings,
  recoveryTime,
  renderHba,
  renderSettings,
  restoreCommand,
  type SettingsInput,
} from './settings.js';
import { appMayCreateRoles, templateName } from './template.js';

const sh = promisify(execFile);

const base: SettingsInput = {
  id: 'dbi-1',
  port: 6543,
  socketDir: '/pool/dbi-1/run',
  listen: true,
  memoryMb: 1024,
  sizeGb: 10,
  hotStandby: true,
};

/** Runs an archive or restore command as PostgreSQL would: %p and %f substituted, via sh. */
async function runAsPostgres(command: string, p: string, f: string): Promise<number> {
  const line = command.replace(/%[pf%]/g, (m) => (m === '%p' ? p : m === '%f' ? f : '%'));
  return sh('/bin/sh', ['-c', line]).then(
    () => 0,
    (err: { code: number }) => err.code,
  );
}

describe('postgres settings', () => {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });

  it('sizes memory from memoryMb', () => {
    expect(memorySettings(1024)).toMatchObject({
      sharedBuffersMb: 256,
      effectiveCacheSizeMb: 768,
      maxConnections: 102,
    });
    expect(memorySettings(256).maxConnections).toBe(26);
    expect(memorySettings(64 * 1024).maxConnections).toBe(500);
    for (const mb of [128, 512, 4096, 65536]) {
      const m = memorySettings(mb);
      // Worst case of all connections using work_mem three times stays within RAM.
      expect(m.sharedBuffersMb + m.maxConnections * 3 * m.workMemMb).toBeLessThanOrEqual(
        Math.max(mb, m.sharedBuffersMb + m.maxConnections * 12),
      );
    }
  });

  it('renders the server settings, TLS only with TCP', () => {
    const text = renderSettings(base);
    expect(text).toContain(`listen_addresses = '127.0.0.1'`);
    expect(text).toContain('port = 6543');
    expect(text).toContain(`ssl = on`);
    expect(text).toContain(`shared_buffers = '256MB'`);
    expect(text).toContain(`archive_mode = off`);
    expect(text).toContain(`synchronous_standby_names = ''`);
    const socketOnly = renderSettings({ ...base, listen: false });
    expect(socketOnly).toContain(`listen_addresses = ''`);
    expect(socketOnly).toContain('ssl = off');
    const sync = renderSettings({ ...base, syncStandby: 'dbi-2' });
    expect(sync).toContain(`synchronous_standby_names = '"dbi-2"'`);
  });

  it('archives with basic_archive when present, else with a careful command', () => {
    const lib = renderSettings({ ...base, archive: { dir: '/a/wal', library: true } });
    expect(lib).toContain(`archive_library = 'basic_archive'`);
    expect(lib).toContain(`basic_archive.archive_directory = '/a/wal'`);
    expect(lib).not.toContain('archive_command');
    const cmd = renderSettings({ ...base, archive: { dir: '/a/wal', library: false } });
    expect(cmd).toContain('archive_command = ');
    expect(cmd).not.toContain('archive_library');
  });

  it('the fallback archive_command copies whole files, accepts identical retries, refuses others', async () => {
    // The archive's path is awkward (quote, percent, space); %p is always a plain
    // relative path such as pg_wal/000000010000000000000001.
    const dir = await mkdtemp(path.join(os.tmpdir(), 'pier-pg-arch-'));
    dirs.push(dir);
    const wal = path.join(dir, `it's 100% wal`);
    await mkdir(wal);
    const seg = path.join(dir, 'seg');
    await writeFile(seg, 'segment one');
    const command = archiveCommand(wal);
    expect(await runAsPostgres(command, seg, '000000010000000000000001')).toBe(0);
    expect(await readFile(path.join(wal, '000000010000000000000001'), 'utf8')).toBe('segment one');
    expect(await runAsPostgres(command, seg, '000000010000000000000001')).toBe(0);
    await writeFile(seg, 'something else');
    expect(await runAsPostgres(command, seg, '000000010000000000000001')).not.toBe(0);
    expect(await readdir(wal)).toEqual(['000000010000000000000001']);

    const restored = path.join(dir, 'restored');
    expect(await runAsPostgres(restoreCommand(wal), restored, '000000010000000000000001')).toBe(0);
    expect(await readFile(restored, 'utf8')).toBe('segment one');
    expect(await runAsPostgres(restoreCommand(wal), restored, '00000002.history')).not.toBe(0);
  });

  it('quotes configuration strings', () => {
    expect(confString(`it's a\\b`)).toBe(`'it''s a\\\\b'`);
    expect(recoveryTime(new Date('2024-05-06T07:08:09.123Z'))).toBe('2024-05-06 07:08:09.123+00');
    const standby = renderSettings({
      ...base,
      upstream: { socketDir: "/p/it's", port: 1, applicationName: 'dbi-2' },
    });
    expect(standby).toContain(
      `primary_conninfo = 'host=''/p/it\\\\''s'' port=1 user=pier application_name=''dbi-2'''`,
    );
  });

  it('lets the customer in over TLS only, and the platform over the socket only', () => {
    const hba = renderHba();
    expect(hba).toMatch(/^local\s+all\s+all\s+trust$/m);
    expect(hba).toMatch(/^hostssl\s+all\s+app\s+127\.0\.0\.1\/32\s+scram-sha-256$/m);
    // The SQL reader: its login to database app only, over TLS with SCRAM.
    expect(hba).toMatch(/^hostssl\s+app\s+pier_sql_reader\s+127\.0\.0\.1\/32\s+scram-sha-256$/m);
    expect(hba).toMatch(/^host\s+all\s+all\s+all\s+reject$/m);
    expect(hba).not.toMatch(/^host(ssl)?\s+\S+\s+(all|pier)\s+\S+\s+trust/m);
  });

  it('normalizes locale names and refuses anything else', () => {
    expect(normalizeLocale('de_de')).toBe('de-DE');
    expect(normalizeLocale('SR-latn-rs')).toBe('sr-Latn-RS');
    expect(normalizeLocale('es-419')).toBe('es-419');
    expect(normalizeLocale('en-US-u-va-POSIX')).toBe('en-US-u-va-posix');
    for (const bad of ['', 'de DE', 'de/../x', "de'", '-de', 'de-', 'de--DE', 'x'.repeat(65)]) {
      expect(() => normalizeLocale(bad)).toThrow(EngineError);
    }
    expect(templateName(15)).toBe('pgtpl15-libc');
    expect(templateName(15, 'sr-Latn-RS')).toBe('pgtpl15-icu-sr-latn-rs');
  });

  it('withholds CREATEROLE where it can reach the host (before PostgreSQL 16)', () => {
    expect(appMayCreateRoles(15)).toBe(false);
    expect(appMayCreateRoles(16)).toBe(true);
  });

  it('keeps socket paths within sun_path', () => {
    expect(layoutOf('/pool/dbi-1').socketDir).toBe('/pool/dbi-1/run');
    const deep = layoutOf(`/${'d'.repeat(120)}/dbi-1`);
    expect(deep.socketDir).toMatch(/^\/tmp\/pier-pg-[0-9a-f]{16}$/);
  });

  it('maps a full pool to no-space', () => {
    expect(asEngineError(new PoolError('no-space', 'full')).code).toBe('no-space');
    const enospc = Object.assign(new Error('write'), { code: 'ENOSPC' });
    expect(asEngineError(enospc).code).toBe('no-space');
    expect(asEngineError(new Error('boom')).code).toBe('failed');
    const kept = new EngineError('as-of-out-of-range', 'x');
    expect(asEngineError(kept)).toBe(kept);
  });
});
