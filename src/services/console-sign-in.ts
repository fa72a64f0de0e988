/**
 * Console sign-in (CONTRACT 4): email and password give a short-lived full-access key
 * of that person, marked as a console key.
 */
import type { SignInBody } from '../contracts/console.js';
import { ApiError } from '../errors/api-error.js';
import { verifyPassword } from '../crypto/password.js';
import type { ServiceContext } from './context.js';
import { mintKey } from './keys.js';

export const CONSOLE_KEY_TTL_S = 12 * 3600;

export async function signIn(ctx: ServiceContext, body: SignInBody) {
  const user = await ctx.db
    .selectFrom('users')
    .select(['id', 'org_id', 'password_hash'])
    .where((eb) => eb(eb.fn('lower', ['email']), '=', body.email.toLowerCase()))
    .executeTakeFirst();
  const ok = await verifyPassword(body.password, user?.password_hash ?? null);
  if (!user || !ok) throw new ApiError('unauthenticated', 'The email or password is wrong.');
  const key = await mintKey(
    ctx.db,
    ctx.clock(),
    { orgId: user.org_id, userId: user.id, expiresAt: null },
    { name: 'console sign-in', ttlSeconds: CONSOLE_KEY_TTL_S },
    { console: true },
  );
  await ctx.auth.keysChanged(user.org_id);
  return { token: key.token, expiresAt: key.expiresAt! };
}
