/**
 * Generations of a persistent Redis's AOF: how its point-in-time history outlives the
 * rewrites pier asks for, so that it can be pruned to the window like PostgreSQL's.
 *
 * The live AOF is one chain: a base (the data when it was written) and incremental files
 * of commands. A rewrite (`BGREWRITEAOF`, sent only by pier: the customer may not) opens
 * a new incremental file, forks, writes a new base as of the switch and deletes the old
 * chain. Before sending it, `rotate` hard-links the live chain's files into
 * `aof-history/<label>/` in the instance volume (root's, outside the server's `dir`) with
 * a manifest of its own: that generation then holds every write up to the switch, and
 * the live chain everything after it. So the history is a list of chains, oldest first,
 * each starting when its base was written (`start`, the base file's mtime, which is at
 * or after the switch).
 *
 * A fork as of `asOf` reads the newest chain starting at or before `asOf`, followed by
 * the first incremental file of the chain after it (the writes from the switch on): a
 * moment between a switch and the new base's mtime is in that file, not in the old chain.
 * The two are joined only when their sequence numbers follow each other, which is always
 * the case for rotations by pier.
 *
 * Crash safety: a generation is committed by renaming its `.partial` directory after its
 * manifest is written, and removed manifest first, so a listed generation is always
 * complete. A crash after the commit and before the rewrite leaves a generation with the
 * live chain's base: a prefix of the live chain, ignored by reads and replaced by the
 * next rotation. Pruning keeps the newest chain starting at or before the window's start
 * and everything after it, and never touches the live chain.
 */
import { link, lstat, mkdir, readdir, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import type { EngineEnv } from '../engine.js';
import { EngineError } from '../engine.js';
import { aofOldest, readManifest, renderManifest, type ManifestEntry } from './aof.js';
import { info, withAdmin } from './control.js';
import { copyRegularFile, fsyncPath, writeAtomic } from './files.js';
import { AOF_BASENAME, type RedisPaths } from './paths.js';
import { sleep } from './process.js';

/** The directory of generations in an instance volume (root's, 0700). */
export const historyDir = (paths: RedisPaths) => path.join(paths.root, 'aof-history');

const MANIFEST = `${AOF_BASENAME}.manifest`;

/** Longest wait for a rewrite pier asked for (it forks and writes the whole data set). */
const REWRITE_TIMEOUT_MS = 30 * 60_000;

/** One chain of the history: a generation, or the live AOF (no label). */
export interface Chain {
  dir: string;
  label?: string;
  /** The files of the chain in manifest order (history entries of the live one left out). */
  entries: ManifestEntry[];
  /** The oldest moment it restores: its base's mtime. */
  start: Date;
  /** The base file's inode: a generation with the live chain's base is only its prefix. */
  baseId: string;
}

async function chainAt(dir: string, label?: string): Promise<Chain | undefined> {
  const manifest = await readManifest(dir);
  const entries = manifest?.filter((e) => e.type !== 'h');
  const base = entries?.find((e) => e.type === 'b');
  if (!entries || !base) return undefined;
  const start = await aofOldest(dir);
  const st = await lstat(path.join(dir, base.file)).catch(() => undefined);
  if (!start || !st) return undefined;
  return { dir, ...(label ? { label } : {}), entries, start, baseId: `${st.dev}:${st.ino}` };
}

/** The committed generations, oldest first, superseded ones (same base as the next) included. */
async function generations(paths: RedisPaths): Promise<Chain[]> {
  const dir = historyDir(paths);
  const labels = await readdir(dir).catch(() => [] as string[]);
  const gens: Chain[] = [];
  for (const label of labels) {
    if (label.includes('.')) continue; // `.partial`: not committed
    const gen = await chainAt(path.join(dir, label), label);
    if (gen) gens.push(gen);
  }
  return gens.sort(
    (a, b) => a.start.getTime() - b.start.getTime() || a.label!.localeCompare(b.label!),
  );
}

/** Whether a generation only repeats the start of the chain after it (same base). */
const superseded = (chains: Chain[], i: number) =>
  i + 1 < chains.length && chains[i + 1]!.baseId === chains[i]!.baseId;

/**
 * The history of the instance at `paths`, oldest first, the live chain last; generations
 * that only repeat the start of a later chain are left out. Empty without an AOF.
 */
export async function historyChains(paths: RedisPaths): Promise<Chain[]> {
  const live = await chainAt(paths.aofDir);
  if (!live) return [];
  const all = [...(await generations(paths)), live];
  return all.filter((_, i) => !superseded(all, i));
}

/** The parts of the AOF a fork as of `asOf` copies: directory and entries, in order. */
export interface RestoreSource {
  parts: { dir: string; entries: ManifestEntry[] }[];
}

/**
 * What a fork as of `asOf` reads: the newest chain starting at or before `asOf`, and
 * after a generation the first incremental file of the chain after it. Undefined when
 * no chain starts that early.
 */
export async function restoreSource(
  paths: RedisPaths,
  asOf: Date,
): Promise<RestoreSource | undefined> {
  const chains = await historyChains(paths);
  const at = chains.findLastIndex((c) => c.start <= asOf);
  if (at < 0) return undefined;
  const chain = chains[at]!;
  const parts = [{ dir: chain.dir, entries: chain.entries }];
  const next = chains[at + 1];
  const lastIncr = chain.entries.filter((e) => e.type === 'i').at(-1);
  const nextIncr = next?.entries.find((e) => e.type === 'i');
  if (next && nextIncr && (!lastIncr || nextIncr.seq === lastIncr.seq + 1)) {
    parts.push({ dir: next.dir, entries: [nextIncr] });
  }
  return { parts };
}

/**
 * Copies the files of `source` into `dst` (replaced) with a manifest naming them. Files
 * are opened without following links and must belong to `expectUid` (the server's).
 */
export async function copySource(
  source: RestoreSource,
  dst: string,
  expectUid?: number,
): Promise<void> {
  await rm(dst, { recursive: true, force: true });
  await mkdir(dst, { recursive: true, mode: 0o700 });
  const entries: ManifestEntry[] = [];
  for (const part of source.parts) {
    for (const e of part.entries) {
      await copyRegularFile(path.join(part.dir, e.file), path.join(dst, e.file), expectUid);
      entries.push(e);
    }
  }
  await writeAtomic(path.join(dst, MANIFEST), renderManifest(entries), 0o600);
}

async function removeGeneration(dir: string): Promise<void> {
  // Manifest first: without it the generation is no longer listed, whatever a crash leaves.
  await rm(path.join(dir, MANIFEST), { force: true });
  await fsyncPath(path.dirname(dir));
  await rm(dir, { recursive: true, force: true });
}

/** Removes what a crash left: uncommitted `.partial` directories and manifest-less ones. */
async function clearLeftovers(paths: RedisPaths): Promise<void> {
  const dir = historyDir(paths);
  for (const entry of await readdir(dir).catch(() => [] as string[])) {
    const full = path.join(dir, entry);
    if (entry.includes('.') || !(await readManifest(full).catch(() => undefined))) {
      await rm(full, { recursive: true, force: true });
    }
  }
}

/** Whether the live chain holds any write after its base (else a rotation adds nothing). */
async function hasWrites(live: Chain): Promise<boolean> {
  for (const e of live.entries.filter((x) => x.type === 'i')) {
    const st = await lstat(path.join(live.dir, e.file)).catch(() => undefined);
    if (st && st.size > 0) return true;
  }
  return false;
}

function freeLabel(taken: Set<string>): string {
  const base = new Date().toISOString().replace(/[-:.]/g, '');
  for (let i = 0; ; i++) {
    const label = i === 0 ? base : `${base}-${i}`;
    if (!taken.has(label)) return label;
  }
}

/**
 * Keeps the live chain as a generation and starts a new one: hard links of its files in
 * a committed generation, then BGREWRITEAOF on the admin socket, waiting for the new
 * base. A no-op without an AOF or when nothing was written since the base. The caller
 * serializes it with prunes and forks of the same instance.
 */
export async function rotate(env: EngineEnv, paths: RedisPaths, serverUid: number): Promise<void> {
  const live = await chainAt(paths.aofDir);
  if (!live || !(await hasWrites(live))) return;
  const dir = historyDir(paths);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await clearLeftovers(paths);
  const before = await generations(paths);
  const label = freeLabel(new Set(before.map((g) => g.label!)));
  const partial = path.join(dir, `${label}.partial`);
  await mkdir(partial, { mode: 0o700 });
  for (const e of live.entries) {
    const src = path.join(paths.aofDir, e.file);
    // Only the server's own regular files: the data directory is the server's to change.
    const st = await lstat(src);
    if (!st.isFile() || st.uid !== serverUid) {
      throw new EngineError('failed', `${src} is not a regular file of the redis user`);
    }
    await link(src, path.join(partial, e.file));
  }
  await writeAtomic(path.join(partial, MANIFEST), renderManifest(live.entries), 0o600);
  await fsyncPath(partial);
  await rename(partial, path.join(dir, label));
  await fsyncPath(dir);
  // An earlier rotation that stopped before its rewrite left a prefix of this one.
  for (const gen of before) if (gen.baseId === live.baseId) await removeGeneration(gen.dir);
  await rewrite(paths, live.baseId);
  env.log.info({ aofDir: paths.aofDir, generation: label }, 'redis AOF rotated');
}

/** Sends BGREWRITEAOF and waits until the live chain has a new base. */
async function rewrite(paths: RedisPaths, oldBaseId: string): Promise<void> {
  await withAdmin(paths, async (conn) => {
    await conn.command(['BGREWRITEAOF']);
    const deadline = Date.now() + REWRITE_TIMEOUT_MS;
    for (;;) {
      const p = await info(conn, 'persistence');
      if (p.aof_rewrite_in_progress === '0' && p.aof_rewrite_scheduled === '0') {
        const now = await chainAt(paths.aofDir);
        if (now && now.baseId !== oldBaseId) return;
        if (p.aof_last_bgrewrite_status !== 'ok') {
          throw new EngineError('failed', 'redis could not rewrite its AOF (see its log)');
        }
      }
      if (Date.now() > deadline) throw new EngineError('failed', 'the AOF rewrite took too long');
      await sleep(20);
    }
  });
}

/**
 * Removes the generations only moments before `before` need: every one older than the
 * newest chain starting at or before `before` (that chain and all later ones stay), and
 * those that only repeat a later chain's start. Idempotent; the live chain is never
 * touched. Returns how many generations went.
 */
export async function pruneGenerations(paths: RedisPaths, before: Date): Promise<number> {
  await clearLeftovers(paths);
  const live = await chainAt(paths.aofDir);
  if (!live) return 0;
  const chains = [...(await generations(paths)), live];
  const kept = chains.filter((_, i) => !superseded(chains, i));
  const keepAt = kept.findLastIndex((c) => c.start <= before);
  const keep = new Set(kept.slice(Math.max(keepAt, 0)).map((c) => c.dir));
  let removed = 0;
  for (const gen of chains.slice(0, -1)) {
    if (keep.has(gen.dir)) continue;
    await removeGeneration(gen.dir);
    removed++;
  }
  return removed;
}
