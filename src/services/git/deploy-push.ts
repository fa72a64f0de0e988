/**
 * What a push does, run for the pre-receive hook while the pushed objects wait in
 * quarantine, by the app's Git settings (settings.ts): the same steps as `pier deploy`,
 * through the same services, to the app for its production branch and to the branch's
 * preview (made by the first push of it, the app's `<app>--<branch>`) for any other;
 * with branch previews off, another branch is stored and deploys nothing; deleting a
 * branch removes its preview. The commit's tree goes into the sources store (`git
 * archive` streamed into `uploadSource`, which caps it and checks every entry: links out
 * of the tree, `..`, devices), a build runs with its log relayed line by line, then a
 * deploy of `build:<id>` is followed step by step, and the app's URL ends the output. The
 * answer is the hook's exit code: 0 only once the release is live, so a failed build or
 * deploy refuses the push (the branch does not move; the live release serves on).
 */
import { StringDecoder } from 'node:string_decoder';
import { ApiError } from '../../errors/api-error.js';
import { archiveCommit } from '../../runtime/git/archive.js';
import { refValue } from '../../runtime/git/git.js';
import type { HookRequest } from '../../runtime/git/hook-channel.js';
import { findApp, toApp } from '../apps/records.js';
import { buildLogs, createBuild, getBuild } from '../builds/builds.js';
import { uploadSource } from '../builds/sources.js';
import type { ServiceContext } from '../context.js';
import { createDeploy, getDeploy } from '../deploys/deploys.js';
import { quarantineOf } from './quarantine.js';
import {
  createPreview,
  getPreview,
  listPreviews,
  removePreviewsOfBranch,
} from '../previews/previews.js';
import {
  parseUpdates,
  planPush,
  previewNameOf,
  productionBranchesOf,
  ZERO_ID,
  type RefUpdate,
} from './plan.js';
import { pushSettingsOf, type AppPushSettings } from './settings.js';

/** How often a deploy is read while followed (as `pier deploy` does). */
const POLL_MS = 500;

export interface PushRun {
  ctx: ServiceContext;
  orgId: string;
  appName: string;
  repo: string;
  request: HookRequest;
  /** Writes to the pushing client (`remote:` lines). */
  say: (text: string) => void;
  /** Takes the app's push lock, held until receive-pack has moved the refs and ended. */
  lock: () => Promise<void>;
  /** Aborted when the push is over for the client (the hook died, the key was revoked). */
  signal: AbortSignal;
}

/** Refused, with a sentence for the pushing client; the push fails. */
class Refusal extends Error {}

const short = (id: string) => id.slice(0, 12);

export async function deployPush(run: PushRun): Promise<number> {
  const { say } = run;
  try {
    await decide(run);
    return 0;
  } catch (err) {
    if (err instanceof Refusal) say(`pier: ${err.message}\n`);
    else if (err instanceof ApiError) say(`pier: ${err.message} (${err.code})\n`);
    else if (run.signal.aborted) return 1;
    else {
      run.ctx.log.error({ err, app: run.appName }, 'git push: deploy failed');
      say('pier: the platform failed while deploying this push\n');
    }
    say('pier: the push is refused; the branch did not move and the live release serves on\n');
    return 1;
  }
}

async function decide(run: PushRun): Promise<void> {
  const { ctx, say } = run;
  const updates = parseUpdates(run.request.updates);
  if (!updates) throw new Refusal('git sent ref updates pier cannot read');
  const settings = await pushSettingsOf(ctx.db, (await findApp(ctx.db, run.orgId, run.appName)).id);
  const plan = planPush(updates, settings);
  if (plan.kind === 'refuse') throw new Refusal(plan.reason);
  if (plan.kind === 'keep') {
    say(`pier: ${plan.tags.length} tag(s) kept; only branches deploy\n`);
    return;
  }
  if (plan.kind === 'store') {
    sayStored(run, plan.branch, settings);
    return;
  }
  await run.lock();
  const app = await findApp(ctx.db, run.orgId, run.appName);
  if (plan.kind === 'unpreview') {
    const gone = await removePreviewsOfBranch(ctx, run.orgId, app.name, plan.branch);
    say(
      gone.length
        ? `pier: branch ${plan.branch} deleted: its preview ${gone.join(', ')} is removed\n`
        : `pier: branch ${plan.branch} deleted; it had no preview\n`,
    );
    return;
  }
  await assertUnmoved(run.repo, plan.update);
  if (plan.kind === 'deploy') {
    say(`pier: deploying ${plan.branch} (${short(plan.update.new)}) to ${app.name}\n`);
    await buildAndDeploy(run, app.name, plan.update);
    return;
  }
  const { preview, made } = await previewOfBranch(run, app.name, plan.branch);
  say(
    `pier: deploying ${plan.branch} (${short(plan.update.new)}) to its preview ${preview.appName}\n`,
  );
  try {
    await buildAndDeploy(run, preview.appName, plan.update, () =>
      previewSettled(run, app.name, preview.name),
    );
  } catch (err) {
    // The branch did not move: a preview this push made goes with it.
    if (made) {
      await removePreviewsOfBranch(ctx, run.orgId, app.name, plan.branch).catch((e: unknown) =>
        ctx.log.warn({ err: e, preview: preview.appName }, 'git push: preview not taken back'),
      );
      say(`pier: the preview ${preview.appName} this push made is removed\n`);
    }
    throw err;
  }
}

/**
 * A branch that deploys nothing (branch previews are off, or the app is a preview): the
 * push lands, and says why nothing else happens and how to have previews.
 */
function sayStored(run: PushRun, branch: string, settings: AppPushSettings): void {
  const production = productionBranchesOf(settings).join(' or ');
  const app = run.appName;
  if (settings.previewOf !== undefined) {
    run.say(
      `pier: ${branch} is stored and deploys nothing: ${app} is a preview of ${settings.previewOf}, and makes no previews; only ${production} deploys it\n`,
    );
    return;
  }
  run.say(
    `pier: ${branch} is stored and deploys nothing: branch previews are off for ${app} (only ${production} deploys)\n`,
  );
  run.say(
    `pier: to deploy branches to previews: pier apps git ${app} --branch-previews on (PUT /v1/apps/${app}/git {"branchPreviews":true})\n`,
  );
}

/**
 * The pushed commit's tree, built and deployed to `target` (the app, or a preview's app);
 * `beforeDeploy` waits for what the deploy needs first (a new preview's own making).
 */
async function buildAndDeploy(
  run: PushRun,
  target: string,
  update: RefUpdate,
  beforeDeploy?: () => Promise<void>,
): Promise<void> {
  const { ctx, say, signal } = run;
  const objectDir = await quarantineOf(run.repo, run.request.quarantine);
  const archive = archiveCommit(run.repo, update.new, objectDir);
  const source = await uploadSource(ctx, run.orgId, target, archive.stream, undefined).catch(
    async (err: unknown) => {
      // git failing (rather than the archive being refused) is the platform's failure.
      const gitFailed = await Promise.race([
        archive.done.then(
          () => undefined,
          (e: unknown) => e,
        ),
        new Promise((r) => setTimeout(r, 500, undefined)),
      ]);
      archive.stop();
      throw gitFailed ?? err;
    },
  );
  await archive.done;
  say(`pier: source ${source.id}: ${source.files} entries, ${source.sizeBytes} bytes\n`);

  const build = await createBuild(ctx, run.orgId, target, { source: source.id });
  say(`pier: building ${build.id}\n`);
  const decoder = new StringDecoder('utf8');
  for await (const chunk of await buildLogs(ctx, run.orgId, build.id, true, signal)) {
    say(decoder.write(chunk as Buffer));
  }
  say(decoder.end());
  if (signal.aborted) throw signal.reason;
  const built = await getBuild(ctx, run.orgId, build.id);
  if (built.state !== 'done') {
    throw new Refusal(`the build ${build.id} failed: ${built.error ?? 'no reason given'}`);
  }
  say(`pier: built ${build.id} (${built.imageDigest ?? 'no digest'})\n`);
  await beforeDeploy?.();

  const accepted = await createDeploy(ctx, run.orgId, target, { image: `build:${build.id}` });
  say(`pier: deploying build:${build.id} (${accepted.strategy}): deploy ${accepted.id}\n`);
  const done = await followDeploy(run, accepted.id);
  if (done.status === 'error') {
    throw new Refusal(`the deploy ${done.id} failed: ${done.error ?? 'no reason given'}`);
  }
  const app = await findApp(ctx.db, run.orgId, target);
  say(
    `pier: release v${done.release ?? '?'} of ${target} is live: ${toApp(ctx, app).defaultAddress}\n`,
  );
}

/** The preview the branch deploys to: the one it made before, else a new one. */
async function previewOfBranch(run: PushRun, appName: string, branch: string) {
  const { ctx, say } = run;
  const name = previewNameOf(appName, branch);
  if (!name) throw new Refusal(`the branch name ${branch} makes no preview name`);
  const existing = (await listPreviews(ctx, run.orgId, appName)).find((p) => p.name === name);
  if (existing && existing.gitBranch !== branch) {
    throw new Refusal(
      `the preview ${existing.appName} is another branch's (${existing.gitBranch ?? 'made by hand'}); rename the branch`,
    );
  }
  if (existing && existing.state !== 'failed') return { preview: existing, made: false };
  const made = await createPreview(ctx, run.orgId, appName, { name, gitBranch: branch });
  say(`pier: preview ${made.appName} made for branch ${branch} (expires ${made.expiresAt})\n`);
  return { preview: made, made: true };
}

/** Waits until the preview is made (its branches, its first release): its own job. */
async function previewSettled(run: PushRun, appName: string, name: string): Promise<void> {
  for (;;) {
    const p = await getPreview(run.ctx, run.orgId, appName, name);
    if (p.state === 'ready') return;
    if (p.state === 'failed') {
      throw new Refusal(`the preview ${p.appName} failed: ${p.stateReason ?? 'no reason given'}`);
    }
    if (run.signal.aborted) throw run.signal.reason;
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}

/**
 * The branch is where the client saw it: another push that landed while this one was
 * received (the lock serialized them) would otherwise be overwritten by a build of a
 * tree that never saw it.
 */
async function assertUnmoved(repo: string, update: RefUpdate): Promise<void> {
  const now = (await refValue(repo, update.ref)) ?? ZERO_ID;
  if (now !== update.old) {
    throw new Refusal(
      `${update.ref} moved while this push was received (another push landed first); push again (--force replaces it)`,
    );
  }
}

async function followDeploy(run: PushRun, id: string) {
  let last = '';
  for (;;) {
    const d = await getDeploy(run.ctx, run.orgId, id);
    if (d.status === 'done' || d.status === 'error') return d;
    const text = d.step ?? d.status;
    if (text !== last) run.say(`pier:   ${text}\n`);
    last = text;
    if (run.signal.aborted) throw run.signal.reason;
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}
