/**
 * Device login (spec 2.2, 4.2, 5.8; RFC 8628 in the platform's own error style): a CLI
 * asks for a code, a person approves it in the console, and the CLI's poll, no faster
 * than `interval`, receives a key of that person exactly once.
 */
import { sql } from 'kysely';
import type { DeviceApproveBody, DeviceCodeBody } from '../contracts/device.js';
import { ApiError, notFound } from '../errors/api-error.js';
import { mintSecret, newId, sha256, userCode } from '../crypto/tokens.js';
import type { ServiceContext } from './context.js';
import { mintKey } from './keys.js';

export const DEVICE_CODE_TTL_S = 600;
export const DEVICE_POLL_INTERVAL_S = 5;

/** People type codes in any case, with or without the dash. */
function normalizeUserCode(code: string): string {
  const c = code.toUpperCase().replace(/[^A-Z]/g, '');
  return c.length === 8 ? `${c.slice(0, 4)}-${c.slice(4)}` : code;
}

export async function createDeviceCode(
  ctx: ServiceContext,
  body: DeviceCodeBody,
  requestedFrom: string,
) {
  const now = ctx.clock();
  const device = mintSecret('pierd');
  // User codes are short enough to collide, very rarely, with a live one: draw again.
  let code = '';
  for (let attempt = 0; attempt < 5 && !code; attempt++) {
    const candidate = userCode();
    const inserted = await ctx.db
      .insertInto('device_logins')
      .values({
        id: newId('dev'),
        device_code_hash: device.hash,
        user_code: candidate,
        client: body.client ?? null,
        version: body.version ?? null,
        requested_from: requestedFrom,
        requested_at: now,
        expires_at: new Date(now.getTime() + DEVICE_CODE_TTL_S * 1000),
        interval_s: DEVICE_POLL_INTERVAL_S,
        last_polled_at: null,
        org_id: null,
        user_id: null,
      })
      .onConflict((oc) => oc.column('user_code').doNothing())
      .returning('id')
      .executeTakeFirst();
    if (inserted) code = candidate;
  }
  if (!code) throw new ApiError('unavailable', 'No free user code could be drawn; retry.');
  const verificationUri = `${ctx.config.publicUrl}/console/device`;
  return {
    deviceCode: device.value,
    userCode: code,
    verificationUri,
    verificationUriComplete: `${verificationUri}?userCode=${encodeURIComponent(code)}`,
    expiresIn: DEVICE_CODE_TTL_S,
    interval: DEVICE_POLL_INTERVAL_S,
  };
}

/** One poll of the CLI. Answers the key once the person approved, else says why not yet. */
export async function pollDeviceToken(ctx: ServiceContext, deviceCode: string) {
  const now = ctx.clock();
  // Refusals are returned, not thrown, out of the transaction: a throw would roll back the
  // recorded poll time, and the next poll, however soon, would not count as too fast.
  const outcome = await ctx.db.transaction().execute(async (tx) => {
    const row = await tx
      .selectFrom('device_logins')
      .selectAll()
      .where('device_code_hash', '=', sha256(deviceCode))
      .forUpdate()
      .executeTakeFirst();
    if (!row) return { refusal: notFound('Device code') };
    if (row.state === 'redeemed')
      return { refusal: new ApiError('gone', 'This device code was already used.') };
    if (row.expires_at.getTime() <= now.getTime())
      return { refusal: new ApiError('expired-token') };
    await tx
      .updateTable('device_logins')
      .set({ last_polled_at: now })
      .where('id', '=', row.id)
      .execute();
    if (
      row.last_polled_at &&
      row.last_polled_at.getTime() + row.interval_s * 1000 > now.getTime()
    ) {
      // The too-fast poll counts as the last one: the next is welcome a full interval from now.
      return {
        refusal: new ApiError(
          'rate-limited',
          `Polling too fast; poll every ${row.interval_s} s.`,
          { interval: row.interval_s },
          row.interval_s,
        ),
      };
    }
    if (row.state === 'denied') return { refusal: new ApiError('access-denied') };
    if (row.state === 'pending') {
      return {
        refusal: new ApiError(
          'authorization-pending',
          'The login is waiting for approval in the console.',
          {
            interval: row.interval_s,
          },
        ),
      };
    }
    const name = `pier CLI${row.client ? ` (${row.client}${row.version ? ` ${row.version}` : ''})` : ''}`;
    // The key lives as long as the approver's key allows (spec 5.6), no longer.
    const bound = row.approver_expires_at;
    if (bound && bound.getTime() <= now.getTime()) {
      return {
        refusal: new ApiError('expired-token', 'The key that approved this login has expired.'),
      };
    }
    // And never longer than the operator's term for device keys: a forgotten laptop's key
    // ends by itself.
    const term = new Date(now.getTime() + ctx.config.deviceKeyTtlDays * 86_400_000);
    const expiresAt = bound && bound < term ? bound : term;
    const key = await mintKey(
      tx,
      now,
      { orgId: row.org_id!, userId: row.user_id, expiresAt: bound },
      { name: name.slice(0, 120), expiresAt: expiresAt.toISOString() },
    );
    await tx
      .updateTable('device_logins')
      .set({ state: 'redeemed' })
      .where('id', '=', row.id)
      .execute();
    const org = await tx
      .selectFrom('orgs')
      .select(['id', 'name'])
      .where('id', '=', row.org_id!)
      .executeTakeFirstOrThrow();
    return { token: key.token, org: { id: org.id, name: org.name }, key };
  });
  if ('refusal' in outcome) throw outcome.refusal;
  await ctx.auth.keysChanged(outcome.org.id);
  return outcome;
}

async function pendingByUserCode(ctx: ServiceContext, code: string) {
  const row = await ctx.db
    .selectFrom('device_logins')
    .selectAll()
    .where('user_code', '=', normalizeUserCode(code))
    .where('state', '=', 'pending')
    .where('expires_at', '>', sql<Date>`${ctx.clock()}`)
    .executeTakeFirst();
  if (!row) throw notFound('Pending login with this code');
  return row;
}

export async function lookupDevice(ctx: ServiceContext, code: string) {
  const row = await pendingByUserCode(ctx, code);
  return {
    client: row.client,
    version: row.version,
    requestedFrom: row.requested_from,
    requestedAt: row.requested_at.toISOString(),
    expiresAt: row.expires_at.toISOString(),
  };
}

/**
 * Approves or declines a pending login. `approverExpiresAt` bounds the key the CLI will
 * receive: an expiring key cannot approve a longer-lived one (spec 5.6). A console
 * sign-in is the person themselves, so their approval is not bounded by the session.
 */
export async function approveDevice(
  ctx: ServiceContext,
  orgId: string,
  userId: string | null,
  approverExpiresAt: Date | null,
  body: DeviceApproveBody,
) {
  const row = await pendingByUserCode(ctx, body.userCode);
  const res = await ctx.db
    .updateTable('device_logins')
    .set({
      state: body.approve ? 'approved' : 'denied',
      org_id: orgId,
      user_id: userId,
      approver_expires_at: approverExpiresAt,
    })
    .where('id', '=', row.id)
    .where('state', '=', 'pending')
    .executeTakeFirst();
  if (res.numUpdatedRows === 0n) throw notFound('Pending login with this code');
  return { ok: true, approved: body.approve };
}
