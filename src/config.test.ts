import { describe, expect, it } from 'vitest';
import { configFromEnv, mergeConfig, resolveConfig, servicesUrl } from './config.js';

describe('config', () => {
  it('reads PIER_APPS_DOMAIN, a DNS name', () => {
    expect(resolveConfig(configFromEnv({ PIER_APPS_DOMAIN: 'apps.example.net' })).appsDomain).toBe(
      'apps.example.net',
    );
    expect(resolveConfig(configFromEnv({})).appsDomain).toBeUndefined();
    for (const bad of ['https://apps.example.net', 'apps.example.net:8080', '-x.example']) {
      expect(() => resolveConfig(configFromEnv({ PIER_APPS_DOMAIN: bad })), bad).toThrow(
        /appsDomain/,
      );
    }
  });

  it('has the defaults of CONTRACT 1', () => {
    const c = resolveConfig({});
    expect(c.listen).toBe('127.0.0.1:8080');
    expect(c.publicUrl).toBe('http://127.0.0.1:8080');
    expect(c.dataDir.endsWith('.pier')).toBe(true);
    expect(c.databaseUrl).toBeUndefined();
    expect(c.allowPrivateTargets).toBe(false);
  });

  it('reads where the SSH gateway listens (CONTRACT 8), HOST:PORT', () => {
    expect(resolveConfig({}).sshListen).toBe('127.0.0.1:2222');
    expect(resolveConfig(configFromEnv({ PIER_SSH_LISTEN: '0.0.0.0:22' })).sshListen).toBe(
      '0.0.0.0:22',
    );
    expect(() => resolveConfig(configFromEnv({ PIER_SSH_LISTEN: '2222' }))).toThrow(/sshListen/);
  });

  it('names the services host machines dial: the gateway of their network unless set', () => {
    expect(resolveConfig({}).servicesHost).toBe('10.213.0.1');
    expect(resolveConfig({}).servicesPort).toBe(8443);
    expect(resolveConfig({ machinesCidr: '10.250.16.0/20' }).servicesHost).toBe('10.250.16.1');
    const c = resolveConfig(
      configFromEnv({ PIER_SERVICES_HOST: 'services.pier.internal', PIER_SERVICES_PORT: '9443' }),
    );
    expect(servicesUrl(c)).toBe('https://services.pier.internal:9443');
    expect(servicesUrl({ servicesHost: 'fd00::1', servicesPort: 8443 })).toBe(
      'https://[fd00::1]:8443',
    );
  });

  it('lets flags override the environment twins', () => {
    const env = configFromEnv({
      PIER_LISTEN: '0.0.0.0:9000',
      PIER_DATA_DIR: '/srv/pier',
      PIER_ALLOW_PRIVATE_TARGETS: '1',
    });
    const c = resolveConfig(mergeConfig(env, { listen: '127.0.0.1:7000', dataDir: undefined }));
    expect(c.listen).toBe('127.0.0.1:7000');
    expect(c.dataDir).toBe('/srv/pier');
    expect(c.allowPrivateTargets).toBe(true);
    expect(c.publicUrlGiven).toBe(false);
  });

  it('reads trusted registries as a comma-separated list of HOST or HOST:PORT', () => {
    expect(resolveConfig({}).trustedRegistries).toEqual([]);
    const env = configFromEnv({
      PIER_TRUSTED_REGISTRIES: 'registry.lan:5000, mirror.lan,[::1]:5001',
    });
    expect(resolveConfig(env).trustedRegistries).toEqual([
      'registry.lan:5000',
      'mirror.lan',
      '[::1]:5001',
    ]);
    expect(() => resolveConfig({ trustedRegistries: ['http://registry.lan'] })).toThrow(
      /trustedRegistries/,
    );
  });

  it('reads the caps on one image, with their defaults', () => {
    const d = resolveConfig({});
    expect([d.imageMaxUnpackedGb, d.imageMaxEntries, d.imageMaxDownloadGb]).toEqual([
      10, 1_000_000, 5,
    ]);
    const c = resolveConfig(
      configFromEnv({
        PIER_IMAGE_MAX_UNPACKED_GB: '2.5',
        PIER_IMAGE_MAX_ENTRIES: '5000',
        PIER_IMAGE_MAX_DOWNLOAD_GB: '1',
      }),
    );
    expect([c.imageMaxUnpackedGb, c.imageMaxEntries, c.imageMaxDownloadGb]).toEqual([2.5, 5000, 1]);
    expect(() => resolveConfig(configFromEnv({ PIER_IMAGE_MAX_ENTRIES: '0' }))).toThrow(
      /imageMaxEntries/,
    );
    expect(() => resolveConfig(configFromEnv({ PIER_IMAGE_MAX_UNPACKED_GB: 'lots' }))).toThrow(
      /imageMaxUnpackedGb/,
    );
  });

  it('handles IPv6 listeners and explicit public URLs', () => {
    const c = resolveConfig({ listen: '[::1]:8443', publicUrl: 'https://pier.example.com/' });
    expect(c.listenHost).toBe('::1');
    expect(c.listenPort).toBe(8443);
    expect(c.publicUrl).toBe('https://pier.example.com');
    expect(resolveConfig({ listen: '[::1]:8443' }).publicUrl).toBe('http://[::1]:8443');
  });

  it('names every invalid setting', () => {
    expect(() => resolveConfig({ listen: 'nope', databaseUrl: 'not a url' })).toThrow(
      /listen[\s\S]*databaseUrl/,
    );
  });
});
