/**
 * Shell sessions into machines (spec 4.9 exec, 7.6, 8). Opening one is two steps, so that
 * every refusal is an ordinary HTTP answer before the WebSocket upgrade:
 *
 * 1. `admitExecSession` checks the machine (404 `machine-not-found`, 409 `console-machine`,
 *    `machine-stopped`, a suspended one woken or 409 `machine-suspended-no-wake`), the
 *    organization's start rate (120 a minute, 429 `rate-limited` with Retry-After) and the
 *    machine's cap (429 `too-many-sessions`), and writes the audit row (503
 *    `audit-unavailable` when it cannot: no row, no session).
 * 2. `startExecSession`, once upgraded, starts the process in the machine and closes the
 *    audit row with its exit code (or why it ended) when it ends.
 *
 * Open rows are the sessions (`exec-sessions` lists them). A session lives in this
 * process: when pier stops, its sessions end, and the next start closes their rows and
 * kills whatever they left running (`endOrphanSessions`).
 */
import { sql } from 'kysely';
import { newId } from '../../crypto/tokens.js';
import { ApiError } from '../../errors/api-error.js';
import type { GuestSession, ShellOptions } from '../../runtime/runtime.js';
import { isRunning, killTree, procRef } from '../../runtime/sandbox/proc.js';
import type { RateLimiter } from '../rate-limit.js';
import type { ServiceContext } from '../context.js';
import { guestMachine, reachGuest } from './guest-access.js';
import { runtimeOf } from './lifecycle.js';
import { configOf } from './records.js';

/** Shell sessions one machine may have open at once. */
export const MAX_SESSIONS_PER_MACHINE = 8;
/** Session starts per organization per minute (spec 8). */
export const SESSION_STARTS_PER_MINUTE = 120;
/** An admitted session whose WebSocket never arrives is closed after this long. */
const ATTACH_WITHIN_MS = 15_000;

/** The host sessions run on (one host per installation for now). */
const HOST = 'local';

/** A session as `exec-sessions` lists it. */
export interface ExecSession {
  id: string;
  machineId: string;
  /** The command, or absent for an interactive shell. */
  command?: string[];
  tty: boolean;
  keyId: string;
  agent: boolean;
  startedAt: string;
  endedAt?: string;
  exitCode?: number;
  exitSignal?: string;
  endReason?: string;
}

/** Who opens a session. */
export interface SessionCaller {
  orgId: string;
  keyId: string;
  agent: boolean;
  ip: string;
}

/** An admitted session: audited, not started yet. */
export interface AdmittedSession {
  id: string;
  machineId: string;
  options: ShellOptions;
}

/** Live sessions of this process, by id: what a restart of pier loses. */
const liveOf = (ctx: ServiceContext): Map<string, GuestSession> => ctx.memory.execSessions;

export async function admitExecSession(
  ctx: ServiceContext,
  rateLimiter: RateLimiter,
  caller: SessionCaller,
  machineId: string,
  options: ShellOptions,
): Promise<AdmittedSession> {
  const row = await guestMachine(ctx, caller.orgId, machineId);
  const config = configOf(row);
  if (config.console || config.command) {
    throw new ApiError(
      'console-machine',
      `Machine ${machineId} is a ${config.console ? 'console' : 'job'} machine and takes no shell.`,
    );
  }
  rateLimiter.hit(`exec:${caller.orgId}`, SESSION_STARTS_PER_MINUTE, 60_000);
  await reachGuest(ctx, row, { wake: true });
  const id = newId('exs');
  try {
    // Counted and inserted under a lock of the machine: two starts at once cannot both
    // take the last place.
    const admitted = await ctx.db.transaction().execute(async (tx) => {
      await sql`SELECT pg_advisory_xact_lock(hashtext(${`exec:${machineId}`}))`.execute(tx);
      const open = await tx
        .selectFrom('exec_sessions')
        .select((eb) => eb.fn.countAll<string>().as('n'))
        .where('machine_id', '=', machineId)
        .where('ended_at', 'is', null)
        .executeTakeFirstOrThrow();
      if (Number(open.n) >= MAX_SESSIONS_PER_MACHINE) return false;
      await tx
        .insertInto('exec_sessions')
        .values({
          id,
          org_id: caller.orgId,
          machine_id: machineId,
          key_id: caller.keyId,
          agent: caller.agent,
          command: options.argv ? JSON.stringify(options.argv) : null,
          tty: options.tty,
          client_ip: caller.ip,
          host: HOST,
        })
        .execute();
      return true;
    });
    if (!admitted) {
      throw new ApiError(
        'too-many-sessions',
        `Machine ${machineId} has ${MAX_SESSIONS_PER_MACHINE} shell sessions open, as many as allowed.`,
        { limit: MAX_SESSIONS_PER_MACHINE },
      );
    }
  } catch (err) {
    if (err instanceof ApiError) throw err;
    ctx.log.error({ err, machine: machineId }, 'exec session audit write failed');
    throw new ApiError('audit-unavailable');
  }
  // A client that never completes its upgrade does not keep a place.
  setTimeout(() => {
    if (!liveOf(ctx).has(id)) void closeRow(ctx, id, { reason: 'not-attached' });
  }, ATTACH_WITHIN_MS).unref();
  return { id, machineId, options };
}

/** Starts an admitted session's process; rejects (and closes its row) when the host fails. */
export async function startExecSession(
  ctx: ServiceContext,
  admitted: AdmittedSession,
): Promise<GuestSession> {
  let session: GuestSession;
  try {
    session = await runtimeOf(ctx).shell(admitted.machineId, admitted.options);
  } catch (err) {
    await closeRow(ctx, admitted.id, { reason: `host-error: ${(err as Error).message}` });
    throw new ApiError('host-error', `The session could not be opened: ${(err as Error).message}`);
  }
  liveOf(ctx).set(admitted.id, session);
  const ref = await procRef(session.pid);
  await ctx.db
    .updateTable('exec_sessions')
    .set({ pid: session.pid, pid_start: ref?.start ?? null })
    .where('id', '=', admitted.id)
    .execute()
    .catch((err: unknown) => ctx.log.warn({ err }, 'exec session pid not recorded'));
  session.onExit((code, signal) => {
    // Ended from here (the client left, the key was revoked): its row says why instead.
    if (liveOf(ctx).get(admitted.id) !== session) return;
    liveOf(ctx).delete(admitted.id);
    void closeRow(ctx, admitted.id, { code, signal, reason: 'exited' });
  });
  return session;
}

/**
 * Ends a session: its process tree is killed and its row closed with `reason`
 * (`client-closed`, or `revoked`, `expired`, `org-suspended` when its key may no longer).
 */
export function endExecSession(ctx: ServiceContext, id: string, reason: string): void {
  const session = liveOf(ctx).get(id);
  liveOf(ctx).delete(id);
  session?.kill();
  void closeRow(ctx, id, { reason });
}

async function closeRow(
  ctx: ServiceContext,
  id: string,
  end: { code?: number | null; signal?: string | null; reason: string },
): Promise<void> {
  await ctx.db
    .updateTable('exec_sessions')
    .set({
      ended_at: new Date(),
      exit_code: end.code ?? null,
      exit_signal: end.signal ?? null,
      end_reason: end.reason.slice(0, 500),
    })
    .where('id', '=', id)
    .where('ended_at', 'is', null)
    .execute()
    .catch((err: unknown) => ctx.log.warn({ err, session: id }, 'exec session not closed'));
}

/** The machine's sessions: the open ones, or with `all` the last 100 of any kind. */
export async function listExecSessions(
  ctx: ServiceContext,
  orgId: string,
  machineId: string,
  all = false,
): Promise<ExecSession[]> {
  await guestMachine(ctx, orgId, machineId);
  let q = ctx.db
    .selectFrom('exec_sessions')
    .selectAll()
    .where('org_id', '=', orgId)
    .where('machine_id', '=', machineId);
  if (!all) q = q.where('ended_at', 'is', null);
  const rows = await q.orderBy('started_at', 'desc').orderBy('id').limit(100).execute();
  return rows.map((r) => ({
    id: r.id,
    machineId: r.machine_id,
    ...(r.command ? { command: r.command } : {}),
    tty: r.tty,
    keyId: r.key_id,
    agent: r.agent,
    startedAt: r.started_at.toISOString(),
    ...(r.ended_at ? { endedAt: r.ended_at.toISOString() } : {}),
    ...(r.exit_code !== null ? { exitCode: r.exit_code } : {}),
    ...(r.exit_signal ? { exitSignal: r.exit_signal } : {}),
    ...(r.end_reason ? { endReason: r.end_reason } : {}),
  }));
}

/**
 * At start: sessions of this host still open in the table belonged to a pier that is
 * gone. Whatever they left running is killed (by pid and start time, never a stranger)
 * and their rows are closed.
 */
export async function endOrphanSessions(ctx: ServiceContext): Promise<number> {
  const rows = await ctx.db
    .selectFrom('exec_sessions')
    .select(['id', 'pid', 'pid_start'])
    .where('host', '=', HOST)
    .where('ended_at', 'is', null)
    .execute();
  for (const r of rows) {
    if (liveOf(ctx).has(r.id)) continue;
    const ref =
      r.pid !== null && r.pid_start !== null
        ? { pid: r.pid, start: Number(r.pid_start) }
        : undefined;
    if (ref && (await isRunning(ref))) await killTree(ref.pid);
    await closeRow(ctx, r.id, { reason: 'platform-restart' });
  }
  return rows.length;
}
