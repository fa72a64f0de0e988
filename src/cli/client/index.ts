/**
 * Client commands: login, tokens, ssh-keys, apps, secrets, protect, domains, zones, buckets,
 * db, machines, deploy (with builds, releases, rollback, deploys), previews, mcp and
 * webhooks.
 */
import type { Command } from 'commander';
import { registerApps } from './apps.js';
import { registerBuckets } from './buckets.js';
import { registerBuilds } from './builds.js';
import { registerDb } from './db.js';
import { registerDeploy } from './deploy.js';
import { registerDomains } from './domains.js';
import { registerLogin } from './login.js';
import { registerMachines } from './machines.js';
import { registerMcp } from './mcp.js';
import { registerProtect } from './protect.js';
import { registerPreviews } from './previews.js';
import { registerReleases } from './releases.js';
import { registerSecrets } from './secrets.js';
import { registerSshKeys } from './ssh-keys.js';
import { registerTokens } from './tokens.js';
import { registerWebhooks } from './webhooks.js';
import { registerZones } from './zones.js';

/** Adds the client commands to the `pier` program. */
export function registerClientCommands(program: Command): void {
  registerLogin(program, program.version() ?? '0.0.0');
  registerTokens(program);
  registerSshKeys(program);
  registerApps(program);
  registerSecrets(program);
  registerProtect(program);
  registerDomains(program);
  registerZones(program);
  registerBuckets(program);
  registerDb(program);
  registerMachines(program);
  registerDeploy(program);
  registerBuilds(program);
  registerReleases(program);
  registerPreviews(program);
  registerMcp(program);
  registerWebhooks(program);
}
