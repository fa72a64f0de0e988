/**
 * The shapes of the API answers the client reads: the API's own records (src/contracts/;
 * spec 2.1, 2.2, 2.8, 4.1, 4.10; CONTRACT 3).
 */
export type { App } from '../../contracts/apps.js';
export type { DeviceCode, DeviceToken } from '../../contracts/device.js';
export type { PutSecretsAnswer, Secret } from '../../contracts/secrets.js';
export type { SshKey } from '../../contracts/ssh.js';
export type { CreatedWebhook, Delivery, Webhook } from '../../contracts/webhooks.js';
export type {
  CreatedKey as CreatedToken,
  KeyAgent as AgentBlock,
  KeyRecord as TokenRecord,
} from '../../contracts/tokens.js';
export type { AccessToken, CreatedLink, Protection } from '../../contracts/protection.js';
export type { DnsRecord, Domain } from '../../contracts/domains.js';
export type { Zone } from '../../contracts/zones.js';
export type { Build, Source } from '../../contracts/builds.js';
export type { Deploy, Release } from '../../contracts/deploys.js';
export type { Preview } from '../../contracts/previews.js';
export type { AppGit } from '../../contracts/git.js';
