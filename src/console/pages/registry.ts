/**
 * Every family of console pages, in navigation order. To add a family: write
 * `pages/<family>.ts` exporting a `PageFamily`, and put it here. See ../README.md.
 */
import { appEdgeFamily } from './app-edge.js';
import { appsFamily } from './apps.js';
import { auditFamily } from './audit.js';
import { billingFamily } from './billing.js';
import { bucketsFamily } from './buckets.js';
import { consentFamily } from './consent.js';
import { databasesFamily } from './databases.js';
import { deploysFamily } from './deploys.js';
import { deviceFamily } from './device.js';
import { domainsFamily } from './domains.js';
import type { PageFamily } from './family.js';
import { oauthGrantsFamily } from './oauth-grants.js';
import { previewsFamily } from './previews.js';
import { secretsFamily } from './secrets.js';
import { tokensFamily } from './tokens.js';
import { volumesFamily } from './volumes.js';
import { zonesFamily } from './zones.js';
import { webhooksFamily } from './webhooks.js';

export const PAGE_FAMILIES: PageFamily[] = [
  appsFamily,
  deploysFamily,
  previewsFamily,
  appEdgeFamily,
  domainsFamily,
  zonesFamily,
  databasesFamily,
  bucketsFamily,
  volumesFamily,
  secretsFamily,
  tokensFamily,
  webhooksFamily,
  oauthGrantsFamily,
  auditFamily,
  billingFamily,
  deviceFamily,
  consentFamily,
];
