/**
 * `pier login`: the device flow (spec 2.2, 4.2, 5.8; RFC 8628 in the platform's error
 * style). The CLI shows a code, the person approves it in the console, and the CLI's
 * polls, never faster than the server allows, receive a key that is saved locally.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Command } from 'commander';
import { ApiClient } from './api-client.js';
import { configPath, readConfigFile, resolveSettings, writeConfigFile } from './config-file.js';
import { ApiCallError, CliError, NetworkError, action } from './errors.js';
import { say } from './output.js';
import type { DeviceCode, DeviceToken } from './types.js';

/** RFC 8628 3.5: on `slow_down` the client adds 5 seconds to its interval for good. */
const SLOW_DOWN_MS = 5000;
/** A few network blips during a minutes-long wait should not throw the login away. */
const MAX_NETWORK_FAILURES = 3;

interface LoginOptions {
  apiUrl?: string;
}

/** Registers `pier login`. */
export function registerLogin(program: Command, version: string): void {
  program
    .command('login')
    .description('sign this CLI in through the console (device login) and save the key')
    .option('--api-url <url>', 'API address (default: PIER_API_URL, else the saved one)')
    .action(
      action(async (opts: LoginOptions) => {
        const { apiUrl } = await resolveSettings(opts);
        const client = new ApiClient(apiUrl);
        const code = await client.call<DeviceCode>('POST', '/v1/device/code', {
          client: 'pier-cli',
          version,
        });
        say(
          'To log in, open this address and approve the request:',
          '',
          `  ${code.verificationUriComplete}`,
          '',
          `Check that the console shows the code ${code.userCode}.`,
          `Waiting for approval (the code expires in ${Math.round(code.expiresIn / 60)} min)...`,
        );
        const { token, org } = await waitForApproval(client, code);

        const file = configPath();
        await writeConfigFile({ ...(await readConfigFile(file)), apiUrl, apiKey: token }, file);
        say(`Logged in to ${org.name} (${org.id})`, `Key saved to ${file}`);
        if (process.env.PIER_API_KEY) {
          process.stderr.write(
            'Note: PIER_API_KEY is set and takes precedence over the saved key.\n',
          );
        }
      }),
    );
}

/** The poll interval: the server's, unless the hidden PIER_LOGIN_POLL_MS (for tests) replaces it. */
function initialIntervalMs(code: DeviceCode): number {
  const override = Number(process.env.PIER_LOGIN_POLL_MS);
  if (process.env.PIER_LOGIN_POLL_MS && Number.isFinite(override) && override > 0) return override;
  return Math.max(1, code.interval) * 1000;
}

/** Polls `POST /v1/device/token` until the login is approved, declined or expired. */
async function waitForApproval(client: ApiClient, code: DeviceCode): Promise<DeviceToken> {
  const expiresAt = Date.now() + code.expiresIn * 1000;
  let intervalMs = initialIntervalMs(code);
  let waitMs = intervalMs;
  let networkFailures = 0;
  for (;;) {
    await sleep(waitMs);
    if (Date.now() >= expiresAt) throw expired();
    waitMs = intervalMs;
    try {
      return await client.call<DeviceToken>('POST', '/v1/device/token', {
        deviceCode: code.deviceCode,
      });
    } catch (err) {
      if (err instanceof NetworkError && ++networkFailures < MAX_NETWORK_FAILURES) continue;
      if (!(err instanceof ApiCallError)) throw err;
      networkFailures = 0;
      switch (err.code) {
        case 'authorization-pending':
          continue;
        case 'rate-limited':
          // slow_down: widen the interval, and wait at least what the server asked. The
          // larger of the two also covers a server that restarts its clock on each early poll.
          intervalMs += SLOW_DOWN_MS;
          waitMs = Math.max(intervalMs, (err.retryAfter ?? 0) * 1000);
          continue;
        case 'access-denied':
          throw new CliError('the login was declined in the console');
        case 'expired-token':
          throw expired();
        case 'gone':
          throw new CliError('this login code was already used; run `pier login` again');
        default:
          throw err;
      }
    }
  }
}

function expired(): CliError {
  return new CliError('the login code expired before it was approved; run `pier login` again');
}
