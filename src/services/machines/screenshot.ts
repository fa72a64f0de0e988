/**
 * Screenshots of a machine's desktop (spec 4.9, 7.5). A machine is a computer when its
 * app gives it a `COMPUTER_VIEW_KEY` (a secret or an env variable) and it is neither a
 * console nor a job machine; any other answers 409 `not-a-computer`. Desktop machines
 * are not built yet, so a computer answers 501 with the reason.
 */
import { ApiError } from '../../errors/api-error.js';
import type { ServiceContext } from '../context.js';
import { guestMachine } from './guest-access.js';
import { configOf } from './records.js';

export async function machineScreenshot(
  ctx: ServiceContext,
  orgId: string,
  id: string,
): Promise<never> {
  const row = await guestMachine(ctx, orgId, id);
  const config = configOf(row);
  const secret = await ctx.db
    .selectFrom('secrets')
    .select('name')
    .where('app_id', '=', row.app_id)
    .where('name', '=', 'COMPUTER_VIEW_KEY')
    .executeTakeFirst();
  const hasKey = secret !== undefined || config.env?.COMPUTER_VIEW_KEY !== undefined;
  if (!hasKey || config.console || config.command) {
    throw new ApiError(
      'not-a-computer',
      `Machine ${id} has no desktop: it is ${
        config.console
          ? 'a console machine'
          : config.command
            ? 'a job machine'
            : 'not a computer (no COMPUTER_VIEW_KEY)'
      }.`,
    );
  }
  throw new ApiError(
    'not-implemented',
    'This installation does not run desktop machines yet, so it cannot take a screenshot.',
  );
}
