/** Overlay roots, for real: mounted, written through, unmounted. Skipped unless root. */
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run } from './exec.js';
import { mountedType, mountRootfs, unmountRootfs } from './rootfs.js';
import { sandboxUnavailable } from './testbed.test-helper.js';

const unavailable = await sandboxUnavailable();

describe.skipIf(unavailable)(`rootfs${unavailable ? ` (skipped: ${unavailable})` : ''}`, () => {
  let dir: string;
  const p = (...parts: string[]) => path.join(dir, ...parts);
  const spec = () => ({
    lower: [p('layer2'), p('layer1')],
    upper: p('vol/upper'),
    work: p('vol/work'),
    merged: p('merged dir'), // a space, escaped as \040 in mountinfo
  });

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'pier-rootfs-'));
    await mkdir(p('layer1/etc'), { recursive: true });
    await mkdir(p('layer2/etc'), { recursive: true });
    await writeFile(p('layer1/etc/a'), 'a from layer 1\n');
    await writeFile(p('layer1/etc/b'), 'b from layer 1\n');
    await writeFile(p('layer2/etc/b'), 'b from layer 2\n');
  });
  afterAll(async () => {
    await unmountRootfs(p('merged dir')).catch(() => {});
    await unmountRootfs(p('other')).catch(() => {});
    await rm(dir, { recursive: true, force: true });
  });

  it('merges the layers, topmost first, and sends every write to the upper layer', async () => {
    await mountRootfs(spec());
    expect(await mountedType(p('merged dir'))).toBe('overlay');
    expect(await readFile(p('merged dir/etc/a'), 'utf8')).toBe('a from layer 1\n');
    expect(await readFile(p('merged dir/etc/b'), 'utf8')).toBe('b from layer 2\n');
    await writeFile(p('merged dir/etc/a'), 'changed\n');
    await writeFile(p('merged dir/etc/new'), 'new\n');
    await rm(p('merged dir/etc/b'));
    expect(await readFile(p('layer1/etc/a'), 'utf8')).toBe('a from layer 1\n');
    expect(await readFile(p('layer2/etc/b'), 'utf8')).toBe('b from layer 2\n');
    expect(await readdir(p('layer1/etc'))).toEqual(['a', 'b']);
    expect(await readFile(p('vol/upper/etc/a'), 'utf8')).toBe('changed\n');
    expect(await readFile(p('vol/upper/etc/new'), 'utf8')).toBe('new\n');
    expect((await readdir(p('vol/upper/etc'))).sort()).toEqual(['a', 'b', 'new']); // b: a whiteout
  });

  it('is idempotent both ways, and keeps the writes across a remount', async () => {
    await mountRootfs(spec());
    const mounts = (await readFile('/proc/self/mountinfo', 'utf8')).split('\n');
    expect(mounts.filter((l) => l.includes('merged\\040dir'))).toHaveLength(1);
    await unmountRootfs(p('merged dir'));
    await unmountRootfs(p('merged dir'));
    expect(await mountedType(p('merged dir'))).toBeUndefined();
    await mountRootfs(spec());
    expect(await readFile(p('merged dir/etc/a'), 'utf8')).toBe('changed\n');
    await unmountRootfs(p('merged dir'));
  });

  it('refuses paths overlayfs would misread, and a mount point taken by something else', async () => {
    await expect(mountRootfs({ ...spec(), lower: p('a,b') })).rejects.toThrow(/without , :/);
    await expect(mountRootfs({ ...spec(), upper: 'relative' })).rejects.toThrow(/absolute/);
    await expect(mountRootfs({ ...spec(), lower: [] })).rejects.toThrow(/at least one/);
    await mkdir(p('other'));
    await run(['mount', '-t', 'tmpfs', 'tmpfs', p('other')]);
    await expect(mountRootfs({ ...spec(), merged: p('other') })).rejects.toThrow(/tmpfs mounted/);
  });
});
