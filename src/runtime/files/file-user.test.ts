/**
 * The kernel's permission rules as the files API applies them: classes, groups, root's
 * capabilities only over the machine's own ids, the sticky bit; and the user read from a
 * process's status and the machine's account files.
 */
import type { Stats } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  imageGroups,
  MAY_EXEC,
  MAY_READ,
  MAY_WRITE,
  mayAccess,
  mayReplace,
  userOfStatus,
  type FileUser,
} from './file-user.js';

const st = (mode: number, uid: number, gid: number, dir = false) =>
  ({ mode, uid, gid, isDirectory: () => dir }) as Stats;
const user: FileUser = {
  uid: 201_000,
  gid: 201_000,
  groups: [202_000],
  dacOverride: false,
  dacReadSearch: false,
  fowner: false,
};
const root: FileUser = {
  ...user,
  uid: 200_000,
  gid: 200_000,
  groups: [],
  dacOverride: true,
  fowner: true,
};

describe('mayAccess', () => {
  it('judges by the owner, group or other class, never the best of them', () => {
    expect(mayAccess(st(0o600, 201_000, 1), user, MAY_READ | MAY_WRITE)).toBe(true);
    expect(mayAccess(st(0o077, 201_000, 202_000), user, MAY_READ)).toBe(false);
    expect(mayAccess(st(0o640, 201_005, 202_000), user, MAY_READ)).toBe(true);
    expect(mayAccess(st(0o640, 201_005, 202_000), user, MAY_WRITE)).toBe(false);
    expect(mayAccess(st(0o604, 201_005, 203_000), user, MAY_READ)).toBe(true);
    expect(mayAccess(st(0o750, 201_005, 203_000, true), user, MAY_EXEC)).toBe(false);
  });

  it('gives root its override over the machine’s ids only', () => {
    expect(mayAccess(st(0o600, 201_000, 201_000), root, MAY_READ | MAY_WRITE)).toBe(true);
    expect(mayAccess(st(0o700, 201_000, 201_000, true), root, MAY_WRITE | MAY_EXEC)).toBe(true);
    // The host's files: root inside is "other" for them.
    expect(mayAccess(st(0o644, 0, 0), root, MAY_READ)).toBe(true);
    expect(mayAccess(st(0o644, 0, 0), root, MAY_WRITE)).toBe(false);
    expect(mayAccess(st(0o600, 201_000, 0), root, MAY_READ)).toBe(false);
    expect(mayAccess(st(0o755, 0, 0, true), root, MAY_WRITE | MAY_EXEC)).toBe(false);
    // Executing a file nobody may execute is refused even to root.
    expect(mayAccess(st(0o644, 201_000, 201_000), root, MAY_EXEC)).toBe(false);
    const reader = { ...user, dacReadSearch: true };
    expect(mayAccess(st(0o000, 201_005, 201_005), reader, MAY_READ)).toBe(true);
    expect(mayAccess(st(0o000, 201_005, 201_005), reader, MAY_WRITE)).toBe(false);
  });
});

describe('mayReplace', () => {
  const tmp = st(0o1777, 200_000, 200_000, true);
  it('keeps the sticky rule: owner of the file or the directory, or CAP_FOWNER', () => {
    expect(mayReplace(tmp, st(0o666, 201_005, 201_005), user)).toBe(false);
    expect(mayReplace(tmp, st(0o600, 201_000, 201_000), user)).toBe(true);
    expect(mayReplace(st(0o777, 200_000, 200_000, true), st(0o666, 1, 1), user)).toBe(true);
    expect(mayReplace(tmp, st(0o666, 201_005, 201_005), root)).toBe(true);
    // A host file in a host directory: the capability does not reach it.
    expect(mayReplace(st(0o1777, 0, 0, true), st(0o666, 0, 0), root)).toBe(false);
    expect(mayReplace(tmp, st(0o666, 0, 0), root)).toBe(true); // root owns /tmp itself
  });
});

describe('the user of a machine', () => {
  it('is read from the main process’s status: file system ids, groups, capabilities', () => {
    const status = [
      'Name:\tsh',
      'Uid:\t201000\t201000\t201000\t201001',
      'Gid:\t201000\t201000\t201000\t201002',
      'Groups:\t202000 ',
      'CapEff:\t0000000000000000',
    ].join('\n');
    expect(userOfStatus(status, [203_000])).toEqual({
      uid: 201_001,
      gid: 201_002,
      groups: [202_000, 203_000],
      dacOverride: false,
      dacReadSearch: false,
      fowner: false,
    });
    const rootStatus = status
      .replace(/201001|201000/g, '200000')
      .replace('Groups:\t202000 ', 'Groups:\t')
      .replace('CapEff:\t0000000000000000', 'CapEff:\t00000000a80425fb');
    expect(userOfStatus(rootStatus)).toMatchObject({
      uid: 200_000,
      groups: [],
      dacOverride: true,
      dacReadSearch: false,
      fowner: true,
    });
  });

  it('belongs to the groups the machine’s /etc/group lists its name in', () => {
    const passwd = 'root:x:0:0::/root:/bin/sh\nweb:x:1000:1000::/srv:/bin/sh\n';
    const group = '# groups\nroot:x:0:\nweb:x:1000:\nteam:x:2000:alice,web\nops:x:3000:alice\n';
    expect(imageGroups(passwd, group, 1000)).toEqual([2000]);
    expect(imageGroups(passwd, group, 4242)).toEqual([]);
    expect(imageGroups(passwd, 'bad:x:99999999:web\n', 1000)).toEqual([]);
  });
});
