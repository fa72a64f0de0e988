/** Every route family of the control API, registered on one app. */
import type { FastifyInstance } from 'fastify';
import type { AppDeps } from '../deps.js';
import { hostRoutes } from './admin/hosts.js';
import { mailEventRoutes } from './admin/mail-events.js';
import { priceRoutes } from './admin/prices.js';
import { adminRoutes } from './admin/orgs.js';
import { appRoutes } from './apps/apps.js';
import { attachRoutes } from './apps/attach.js';
import { protectionRoutes } from './apps/protection.js';
import { networkPolicyRoutes } from './apps/policy.js';
import { udpRoutes } from './apps/udp.js';
import { buildRoutes } from './builds/builds.js';
import { deployRoutes } from './deploys/deploys.js';
import { gitRoutes } from './git/git.js';
import { gitSettingsRoutes } from './git/settings.js';
import { previewRoutes } from './previews/previews.js';
import { bucketRoutes } from './buckets/buckets.js';
import { bucketCorsRoutes } from './buckets/cors.js';
import { bucketCredentialRoutes } from './buckets/credentials.js';
import { bucketObjectRoutes } from './buckets/objects.js';
import { billingRoutes } from './billing/credits.js';
import { paymentRoutes } from './billing/payments.js';
import { consoleMeRoutes } from './console/me.js';
import { consoleRoutes } from './console/sign-in.js';
import { databaseRoutes } from './databases/databases.js';
import { databaseSqlRoutes } from './databases/sql.js';
import { databaseTunnelRoutes } from './databases/tunnel.js';
import { caRoutes } from './admin/ca.js';
import { volumeRoutes } from './volumes/volumes.js';
import { machineRoutes } from './machines/machines.js';
import { machineCheckpointRoutes } from './machines/checkpoints.js';
import { machineFileRoutes } from './machines/files.js';
import { machineExecRoutes } from './machines/exec.js';
import { mcpRoutes } from './mcp/mcp.js';
import { oauthConsentRoutes } from './oauth/consent.js';
import { oauthDiscoveryRoutes } from './oauth/discovery.js';
import { oauthEntranceRoutes } from './oauth/entrances.js';
import { deviceRoutes } from './device/device.js';
import { domainRoutes } from './domains/domains.js';
import { zoneRoutes } from './domains/zones.js';
import { secretRoutes } from './secrets/secrets.js';
import { sshRoutes } from './ssh/ssh.js';
import { agentActionRoutes } from './tokens/agent-actions.js';
import { tokenRoutes } from './tokens/tokens.js';
import { webhookRoutes } from './webhooks/webhooks.js';

export async function registerRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  for (const family of [
    tokenRoutes,
    agentActionRoutes,
    sshRoutes,
    deviceRoutes,
    adminRoutes,
    hostRoutes,
    priceRoutes,
    consoleRoutes,
    consoleMeRoutes,
    appRoutes,
    attachRoutes,
    protectionRoutes,
    networkPolicyRoutes,
    udpRoutes,
    buildRoutes,
    deployRoutes,
    gitRoutes,
    gitSettingsRoutes,
    previewRoutes,
    secretRoutes,
    bucketRoutes,
    bucketObjectRoutes,
    bucketCorsRoutes,
    bucketCredentialRoutes,
    billingRoutes,
    paymentRoutes,
    databaseRoutes,
    databaseTunnelRoutes,
    databaseSqlRoutes,
    caRoutes,
    volumeRoutes,
    machineRoutes,
    machineCheckpointRoutes,
    machineFileRoutes,
    machineExecRoutes,
    mcpRoutes,
    oauthDiscoveryRoutes,
    oauthEntranceRoutes,
    oauthConsentRoutes,
    mailEventRoutes,
    webhookRoutes,
    domainRoutes,
    zoneRoutes,
  ]) {
    family(app, deps);
  }
}
