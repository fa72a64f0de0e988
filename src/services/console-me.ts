/** Who the calling key is: its person and organization (the console's header line). */
import type { MeAnswer } from '../contracts/console.js';
import type { AuthenticatedKey } from './authenticator.js';
import type { ServiceContext } from './context.js';

export async function whoAmI(
  ctx: ServiceContext,
  key: AuthenticatedKey,
  orgId: string,
): Promise<MeAnswer> {
  const org = await ctx.db
    .selectFrom('orgs')
    .select(['id', 'name'])
    .where('id', '=', orgId)
    .executeTakeFirstOrThrow();
  const user = key.userId
    ? await ctx.db
        .selectFrom('users')
        .select(['id', 'email', 'role'])
        .where('id', '=', key.userId)
        .executeTakeFirst()
    : undefined;
  return {
    key: { id: key.id, console: key.console, expiresAt: key.expiresAt?.toISOString() ?? null },
    user: user ? { id: user.id, email: user.email, role: user.role } : null,
    org,
  };
}
