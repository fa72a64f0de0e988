import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { APP_RULES, passwordDigest, quote, renderConfig } from './config.js';
import { redisPaths } from './paths.js';

const input = (persistent: boolean) => ({
  paths: redisPaths('/pool/volumes/redis-dbi-1'),
  tlsPort: 7001,
  memoryMb: 256,
  appPassword: 'app pass "quoted"',
  adminPassword: 'admin-secret',
  persistent,
});

describe('redis.conf', () => {
  it('listens with TLS only, on loopback, with the platform socket', () => {
    const conf = renderConfig(input(true));
    expect(conf).toContain('bind 127.0.0.1\n');
    expect(conf).toContain('port 0\n');
    expect(conf).toContain('tls-port 7001\n');
    expect(conf).toContain('tls-auth-clients no\n');
    expect(conf).toContain('unixsocket "/pool/volumes/redis-dbi-1/run/redis.sock"\n');
    expect(conf).toContain('unixsocketperm 700\n');
    expect(conf).toContain('maxmemory 256mb\nmaxmemory-policy noeviction\n');
    expect(conf).not.toMatch(/^pidfile/m);
  });

  it('keeps a timestamped AOF that is never rewritten when persistent', () => {
    const conf = renderConfig(input(true));
    for (const line of [
      'appendonly yes',
      'aof-timestamp-enabled yes',
      'appendfsync everysec',
      'auto-aof-rewrite-percentage 0',
      'aof-load-truncated yes',
      'save ""',
    ]) {
      expect(conf).toContain(`${line}\n`);
    }
    const plain = renderConfig(input(false));
    expect(plain).toContain('appendonly no\n');
    expect(plain).toContain('save ""\n');
    expect(plain).not.toContain('aof-timestamp-enabled');
  });

  it('holds password digests, never passwords; default is off', () => {
    const conf = renderConfig(input(true));
    expect(conf).not.toContain('app pass');
    expect(conf).not.toContain('admin-secret');
    const digest = createHash('sha256').update('app pass "quoted"').digest('hex');
    expect(passwordDigest('app pass "quoted"')).toBe(`#${digest}`);
    expect(conf).toContain(`user app on #${digest} ${APP_RULES.join(' ')}\n`);
    expect(conf).toMatch(/^user default off resetpass/m);
    expect(conf).toMatch(/^user pier on #[0-9a-f]{64} ~\* &\* \+@all$/m);
    expect(APP_RULES).toContain('-@admin');
  });

  it('quotes values for Redis and refuses control characters', () => {
    expect(quote('/a b/"c"\\d')).toBe('"/a b/\\"c\\"\\\\d"');
    expect(() => quote('a\nb')).toThrow();
  });
});
