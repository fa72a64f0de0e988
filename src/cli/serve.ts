/** `pier serve` (CONTRACT 1): flags with environment twins, graceful SIGTERM. */
import type { Command } from 'commander';
import { configFromEnv, mergeConfig, resolveConfig } from '../config.js';
import { startPlatform, type Platform } from '../platform.js';

interface ServeFlags {
  listen?: string;
  dataDir?: string;
  databaseUrl?: string;
  publicUrl?: string;
}

export function registerServe(program: Command): void {
  program
    .command('serve')
    .description('run the platform: API, console, object gateway and workers')
    .option('--listen <host:port>', 'address of the API (env PIER_LISTEN; default 127.0.0.1:8080)')
    .option(
      '--data-dir <dir>',
      'where the platform keeps its files (env PIER_DATA_DIR; default ./.pier)',
    )
    .option(
      '--database-url <url>',
      'external PostgreSQL for platform state (env PIER_DATABASE_URL)',
    )
    .option(
      '--public-url <url>',
      'base of handed-out URLs (env PIER_PUBLIC_URL; default http://LISTEN)',
    )
    .action(async (flags: ServeFlags) => {
      let config;
      try {
        config = resolveConfig(mergeConfig(configFromEnv(process.env), flags));
      } catch (err) {
        console.error(`pier serve: ${(err as Error).message}`);
        process.exit(2);
      }
      // The handlers go in before the start: the listener answers health checks while
      // machines and databases are still being taken back, and a SIGTERM then must wait
      // for the start to finish and shut down cleanly, not kill the process outright.
      let platform: Awaited<ReturnType<typeof startPlatform>> | undefined;
      let stopping = false;
      let asked: string | undefined;
      const stop = (signal: string) => {
        if (!platform) {
          // A second signal during the start quits at once (as a hung start would need).
          if (asked) process.exit(1);
          asked = signal;
          console.error(`pier serve: ${signal}: stopping once started (again to quit now)`);
          return;
        }
        if (stopping) return;
        stopping = true;
        platform.app.log.info({ signal }, 'shutting down');
        platform.close().then(
          () => process.exit(0),
          (err) => {
            console.error(`pier serve: shutdown failed: ${(err as Error).message}`);
            process.exit(1);
          },
        );
      };
      process.on('SIGTERM', () => stop('SIGTERM'));
      process.on('SIGINT', () => stop('SIGINT'));
      try {
        platform = await startPlatform(config);
      } catch (err) {
        console.error(`pier serve: ${(err as Error).message}`);
        process.exit(1);
      }
      console.error(
        `pier is serving on ${platform.url} (operator token in ${config.dataDir}/operator-token unless PIER_OPERATOR_TOKEN is set)`,
      );
      if (asked) stop(asked);
      else openPoolEarly(platform);
    });
}

/**
 * The storage pool opens on first use (tests start many platforms that never need one),
 * but a server is started to be used: opening it now, while nothing waits, takes its
 * mount (and on a new install its making, some 0.5 s) off the first deploy, machine,
 * volume or database. A failure here is only logged: that first use tries again and
 * answers with the reason.
 */
function openPoolEarly(platform: Platform): void {
  platform.ctx.pool.get().then(
    () => platform.app.log.info('storage pool open'),
    (err: unknown) =>
      platform.app.log.warn({ err }, 'storage pool not opened yet; its first use tries again'),
  );
}
