/**
 * Webhooks of an organization (spec 4.11, 6): create (the secret once), list, get,
 * deliveries, delete. The URL goes through the outbound guard at create (and again at
 * every attempt, send.ts); the secret is sealed at rest. docs/webhooks.md.
 */
import type {
  CreateWebhookBody,
  CreatedWebhook,
  Delivery,
  Webhook,
} from '../../contracts/webhooks.js';
import { newId } from '../../crypto/tokens.js';
import { ApiError, badRequest, notFound, type ValidationIssue } from '../../errors/api-error.js';
import { OutboundRefused } from '../../host/outbound-guard.js';
import type { ServiceContext } from '../context.js';
import { deliveryRows, findWebhook, listWebhookRows, secretBinding, toWebhook } from './records.js';
import { newWebhookSecret } from './signature.js';

/** Webhooks one organization may have (docs/webhooks.md, Limits). */
export const MAX_WEBHOOKS_PER_ORG = 20;

/**
 * Why the guard refuses `url` as a webhook target, as a validation issue, or undefined
 * when it may be called. A name that does not resolve is refused too: it cannot be
 * judged, and is most often a typing error.
 */
export async function webhookUrlIssue(
  ctx: ServiceContext,
  url: string,
): Promise<ValidationIssue | undefined> {
  try {
    await ctx.outbound.check(url);
    return undefined;
  } catch (err) {
    if (err instanceof OutboundRefused) {
      return {
        path: 'url',
        message: `refused: ${err.address} is ${err.reason}; webhooks are sent to public addresses only`,
      };
    }
    return { path: 'url', message: 'the host name does not resolve' };
  }
}

export async function createWebhook(
  ctx: ServiceContext,
  orgId: string,
  body: CreateWebhookBody,
): Promise<CreatedWebhook> {
  const issue = await webhookUrlIssue(ctx, body.url);
  if (issue) throw badRequest([issue]);
  const secret = newWebhookSecret();
  const id = newId('wh');
  const sealed = ctx.box.seal(secret, secretBinding(id));
  const row = await ctx.db.transaction().execute(async (tx) => {
    // The org row's lock makes concurrent creates count one after the other.
    await tx.selectFrom('orgs').select('id').where('id', '=', orgId).forNoKeyUpdate().execute();
    const { n } = await tx
      .selectFrom('webhooks')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('org_id', '=', orgId)
      .executeTakeFirstOrThrow();
    const current = Number(n);
    if (current >= MAX_WEBHOOKS_PER_ORG) {
      throw new ApiError(
        'org-limit-webhooks',
        `The organization has ${current} webhooks, as many as allowed (${MAX_WEBHOOKS_PER_ORG}).`,
        { limit: MAX_WEBHOOKS_PER_ORG, current },
      );
    }
    return tx
      .insertInto('webhooks')
      .values({
        id,
        org_id: orgId,
        url: body.url,
        events: [...new Set(body.events)],
        secret_nonce: sealed.nonce,
        secret_ciphertext: sealed.ciphertext,
        disabled_reason: null,
        disabled_at: null,
        created_at: ctx.clock(),
      })
      .returningAll()
      .executeTakeFirstOrThrow();
  });
  return { ...toWebhook(row), secret };
}

export async function listWebhooks(ctx: ServiceContext, orgId: string): Promise<Webhook[]> {
  return listWebhookRows(ctx.db, orgId);
}

export async function getWebhook(ctx: ServiceContext, orgId: string, id: string): Promise<Webhook> {
  return findWebhook(ctx.db, orgId, id);
}

export async function listDeliveries(
  ctx: ServiceContext,
  orgId: string,
  id: string,
  limit: number,
): Promise<Delivery[]> {
  await findWebhook(ctx.db, orgId, id);
  return deliveryRows(ctx.db, id, limit);
}

/**
 * Removes the webhook with its deliveries and their attempts: nothing pending is sent
 * after this commits, and an attempt under way finds its row gone and records nothing.
 */
export async function deleteWebhook(ctx: ServiceContext, orgId: string, id: string): Promise<void> {
  const gone = await ctx.db
    .deleteFrom('webhooks')
    .where('org_id', '=', orgId)
    .where('id', '=', id)
    .executeTakeFirst();
  if (gone.numDeletedRows === 0n) throw notFound(`Webhook '${id}'`);
}
