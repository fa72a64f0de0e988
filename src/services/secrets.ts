/**
 * Per-app secrets (spec 2.8, 4.10). Values are sealed with AES-256-GCM, bound to their
 * app and name, and never returned. Managed secrets (from attachments) are written by
 * the attachment services only; these routes refuse to change or remove them.
 */
import type { PutSecretsBody, Secret } from '../contracts/secrets.js';
import { ApiError, badRequest, notFound, type ValidationIssue } from '../errors/api-error.js';
import type { Executor } from '../store/db.js';
import { findApp } from './apps/records.js';
import type { ServiceContext } from './context.js';

/** Environment variable names, as a shell and a container runtime accept them. */
export const SECRET_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,255}$/;
export const RESERVED_PREFIX = 'PIER_';
/** 64 KiB per value keeps environments well under the kernel's argument limits. */
export const MAX_SECRET_BYTES = 64 * 1024;

type SecretRow = {
  name: string;
  updated_at: Date;
  managed_reason: 'attachment' | 'resource-password' | null;
  build: boolean | null;
};

function toSecret(r: SecretRow): Secret {
  return {
    name: r.name,
    updatedAt: r.updated_at.toISOString(),
    managed: r.managed_reason !== null,
    ...(r.managed_reason ? { managedReason: r.managed_reason } : {}),
    ...(r.build !== null ? { build: r.build } : {}),
  };
}

export function bindingOf(appId: string, name: string): string {
  return `secret:${appId}:${name}`;
}

async function rows(ex: Executor, appId: string): Promise<SecretRow[]> {
  return ex
    .selectFrom('secrets')
    .select(['name', 'updated_at', 'managed_reason', 'build'])
    .where('app_id', '=', appId)
    .orderBy('name')
    .execute();
}

export async function listSecrets(
  ctx: ServiceContext,
  orgId: string,
  appName: string,
): Promise<Secret[]> {
  const app = await findApp(ctx.db, orgId, appName);
  return (await rows(ctx.db, app.id)).map(toSecret);
}

function checkNames(body: PutSecretsBody): void {
  const issues: ValidationIssue[] = [];
  for (const [name, value] of Object.entries(body.secrets ?? {})) {
    if (!SECRET_NAME.test(name)) {
      issues.push({
        path: `secrets.${name}`,
        message: 'names are letters, digits and _, not starting with a digit',
      });
    } else if (name.toUpperCase().startsWith(RESERVED_PREFIX)) {
      issues.push({
        path: `secrets.${name}`,
        message: `the prefix ${RESERVED_PREFIX} is reserved by the platform`,
      });
    }
    if (Buffer.byteLength(value) > MAX_SECRET_BYTES) {
      issues.push({
        path: `secrets.${name}`,
        message: `values are at most ${MAX_SECRET_BYTES} bytes`,
      });
    }
  }
  for (const name of Object.keys(body.build ?? {})) {
    if (!SECRET_NAME.test(name))
      issues.push({ path: `build.${name}`, message: 'not a secret name' });
  }
  if (issues.length) throw badRequest(issues);
}

export interface PutSecretsAnswer {
  appName: string;
  staged: boolean;
  changed: string[];
  /** Machines replaced to take the new values (`staged: false`; see deploys/secret-roll.ts). */
  restarted: string[];
  secrets: Secret[];
}

/** Sets values and build flags in one transaction; nothing is written if any part is refused. */
export async function putSecrets(
  ctx: ServiceContext,
  orgId: string,
  appName: string,
  body: PutSecretsBody,
  /**
   * With `staged: false` and values changed: rolls the app in the same transaction (so a
   * refusal, such as a deploy in flight, writes nothing); answers the machines replaced.
   */
  roll?: (tx: Executor, appId: string) => Promise<string[]>,
): Promise<PutSecretsAnswer> {
  checkNames(body);
  return ctx.db.transaction().execute(async (tx) => {
    const app = await findApp(tx, orgId, appName, { lock: true });
    const existing = new Map((await rows(tx, app.id)).map((r) => [r.name, r]));
    const touched = new Set([...Object.keys(body.secrets ?? {}), ...Object.keys(body.build ?? {})]);
    const managed = [...touched].filter((n) => existing.get(n)?.managed_reason);
    if (managed.length) {
      throw new ApiError(
        'secret-managed',
        `${managed.join(', ')} ${managed.length > 1 ? 'are' : 'is'} managed by an attachment; detach the resource instead.`,
      );
    }
    const missing = Object.keys(body.build ?? {}).filter(
      (n) => !existing.has(n) && !(n in (body.secrets ?? {})),
    );
    if (missing.length) {
      throw badRequest(missing.map((n) => ({ path: `build.${n}`, message: 'no such secret' })));
    }
    const now = ctx.clock();
    for (const [name, value] of Object.entries(body.secrets ?? {})) {
      const sealed = ctx.box.seal(value, bindingOf(app.id, name));
      const build = body.build?.[name] ?? null;
      await tx
        .insertInto('secrets')
        .values({
          app_id: app.id,
          name,
          nonce: sealed.nonce,
          ciphertext: sealed.ciphertext,
          managed_reason: null,
          build,
          updated_at: now,
        })
        .onConflict((oc) =>
          oc
            .columns(['app_id', 'name'])
            .doUpdateSet({
              nonce: sealed.nonce,
              ciphertext: sealed.ciphertext,
              updated_at: now,
              ...(build !== null ? { build } : {}),
            })
            .where('secrets.managed_reason', 'is', null),
        )
        .execute();
    }
    for (const [name, build] of Object.entries(body.build ?? {})) {
      if (name in (body.secrets ?? {})) continue;
      await tx
        .updateTable('secrets')
        .set({ build, updated_at: now })
        .where('app_id', '=', app.id)
        .where('name', '=', name)
        .where('managed_reason', 'is', null)
        .execute();
    }
    const changedValues = Object.keys(body.secrets ?? {}).length > 0;
    const restarted = !body.staged && changedValues && roll ? await roll(tx, app.id) : [];
    return {
      appName,
      staged: body.staged,
      changed: [...touched].sort(),
      restarted,
      secrets: (await rows(tx, app.id)).map(toSecret),
    };
  });
}

export async function deleteSecret(
  ctx: ServiceContext,
  orgId: string,
  appName: string,
  name: string,
): Promise<void> {
  await ctx.db.transaction().execute(async (tx) => {
    const app = await findApp(tx, orgId, appName, { lock: true });
    const row = await tx
      .selectFrom('secrets')
      .select(['managed_reason'])
      .where('app_id', '=', app.id)
      .where('name', '=', name)
      .executeTakeFirst();
    if (!row) throw notFound(`Secret '${name}'`);
    if (row.managed_reason) {
      throw new ApiError(
        'secret-managed',
        `${name} is managed by an attachment; detach the resource instead.`,
      );
    }
    await tx.deleteFrom('secrets').where('app_id', '=', app.id).where('name', '=', name).execute();
  });
}

/**
 * Writes a secret the platform manages for a resource (an attachment's `S3_*`, a
 * database's URL), inside the caller's transaction; the secrets routes cannot change it.
 */
export async function insertManagedSecret(
  tx: Executor,
  ctx: ServiceContext,
  appId: string,
  name: string,
  value: string,
  reason: 'attachment' | 'resource-password',
): Promise<void> {
  const sealed = ctx.box.seal(value, bindingOf(appId, name));
  await tx
    .insertInto('secrets')
    .values({
      app_id: appId,
      name,
      nonce: sealed.nonce,
      ciphertext: sealed.ciphertext,
      managed_reason: reason,
      build: null,
      updated_at: ctx.clock(),
    })
    .execute();
}

/**
 * Writes a managed secret again when its value is not `value` (an attachment's URL after
 * the settings it derives from changed); true when it did. A missing secret stays missing.
 */
export async function refreshManagedSecret(
  tx: Executor,
  ctx: ServiceContext,
  appId: string,
  name: string,
  value: string,
): Promise<boolean> {
  const row = await tx
    .selectFrom('secrets')
    .select(['nonce', 'ciphertext'])
    .where('app_id', '=', appId)
    .where('name', '=', name)
    .where('managed_reason', 'is not', null)
    .executeTakeFirst();
  if (!row || ctx.box.open(row, bindingOf(appId, name)) === value) return false;
  const sealed = ctx.box.seal(value, bindingOf(appId, name));
  await tx
    .updateTable('secrets')
    .set({ nonce: sealed.nonce, ciphertext: sealed.ciphertext, updated_at: ctx.clock() })
    .where('app_id', '=', appId)
    .where('name', '=', name)
    .execute();
  return true;
}

/** Plain values for a machine's environment at start (the runtime's use only). */
export async function revealSecrets(
  ex: Executor,
  ctx: ServiceContext,
  appId: string,
  /**
   * Only those marked `build: true`: what a build sees (as build secrets, `RUN
   * --mount=type=secret,id=NAME`), never written into a layer.
   */
  opts: {
    buildOnly?: boolean;
    /**
     * `own`: the app's own values (what a release records); `managed`: the platform's (a
     * database URL, bucket keys: always today's, deploys/release-secrets.ts).
     */
    only?: 'own' | 'managed';
  } = {},
): Promise<Record<string, string>> {
  let query = ex
    .selectFrom('secrets')
    .select(['name', 'nonce', 'ciphertext'])
    .where('app_id', '=', appId);
  if (opts.buildOnly) query = query.where('build', '=', true);
  if (opts.only) query = query.where('managed_reason', opts.only === 'own' ? 'is' : 'is not', null);
  const all = await query.execute();
  return Object.fromEntries(all.map((s) => [s.name, ctx.box.open(s, bindingOf(appId, s.name))]));
}

/**
 * Copies the app's own secrets (not the managed ones: those belong to its attachments) to
 * another app inside the caller's transaction, each sealed again for its new app (a
 * preview gets its app's secrets this way). Answers the names copied.
 */
export async function copyOwnSecrets(
  tx: Executor,
  ctx: ServiceContext,
  fromAppId: string,
  toAppId: string,
): Promise<string[]> {
  const own = await tx
    .selectFrom('secrets')
    .select(['name', 'nonce', 'ciphertext', 'build'])
    .where('app_id', '=', fromAppId)
    .where('managed_reason', 'is', null)
    .execute();
  const now = ctx.clock();
  for (const s of own) {
    const sealed = ctx.box.seal(
      ctx.box.open(s, bindingOf(fromAppId, s.name)),
      bindingOf(toAppId, s.name),
    );
    await tx
      .insertInto('secrets')
      .values({
        app_id: toAppId,
        name: s.name,
        nonce: sealed.nonce,
        ciphertext: sealed.ciphertext,
        managed_reason: null,
        build: s.build,
        updated_at: now,
      })
      .execute();
  }
  return own.map((s) => s.name);
}
