/**
 * An app's console output (spec 4.9 `GET /v1/apps/:name/logs`): the entries of each of
 * its machines after a cursor, merged by time. The cursor is opaque to clients: the
 * base64url of `{machineId: seq}`, one position per machine, so following goes on where
 * each machine's log left off even as machines come and go.
 */
import { ApiError, badRequest } from '../../errors/api-error.js';
import { findApp } from '../apps/records.js';
import type { ServiceContext } from '../context.js';
import { runtimeOf } from './lifecycle.js';
import { machinesQuery } from './records.js';

export interface AppLogs {
  entries: { machineId: string; at: string; stream: 'stdout' | 'stderr'; text: string }[];
  cursor: string;
  /** Machines whose entries after the cursor were rotated away before this read. */
  truncated: string[];
}

function decodeCursor(cursor: string | undefined): Record<string, number> {
  if (!cursor) return {};
  try {
    const parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown;
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) {
      const out: Record<string, number> = {};
      for (const [k, v] of Object.entries(parsed)) if (Number.isInteger(v)) out[k] = v as number;
      return out;
    }
  } catch {
    // fall through
  }
  throw badRequest([{ path: 'cursor', message: 'is not a cursor this route handed out' }]);
}

export async function appLogs(
  ctx: ServiceContext,
  orgId: string,
  appName: string,
  opts: { cursor?: string; limit: number; machine?: string },
): Promise<AppLogs> {
  const app = await findApp(ctx.db, orgId, appName);
  const after = decodeCursor(opts.cursor);
  let q = machinesQuery(ctx.db).where('machines.app_id', '=', app.id);
  if (opts.machine) q = q.where('machines.id', '=', opts.machine);
  const machines = await q.where('machines.observed_state', '<>', 'deleted').execute();
  if (opts.machine && machines.length === 0) {
    throw new ApiError('not-found', `Machine '${opts.machine}' not found in '${appName}'.`);
  }
  const runtime = runtimeOf(ctx);
  const entries: (AppLogs['entries'][number] & { seq: number })[] = [];
  const next = { ...after };
  const truncated: string[] = [];
  for (const m of machines) {
    const page = await runtime.logs(m.id, { after: after[m.id], limit: opts.limit });
    for (const e of page.entries) entries.push({ machineId: m.id, ...e });
    // With nothing to read, the cursor still moves past what was rotated away.
    if (page.entries.length === 0) next[m.id] = page.cursor;
    if (page.truncated) truncated.push(m.id);
  }
  entries.sort((a, b) => a.at.localeCompare(b.at) || a.seq - b.seq);
  // Each machine's cursor ends at its last entry answered, not at the end of its page:
  // entries cut by the limit come in the next call.
  const answered = entries.slice(0, opts.limit);
  for (const e of answered) next[e.machineId] = e.seq;
  return {
    entries: answered.map(({ seq: _seq, ...e }) => e),
    cursor: Buffer.from(JSON.stringify(next)).toString('base64url'),
    truncated,
  };
}
