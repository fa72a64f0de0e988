/**
 * Names of a pool's own entries beside the volumes. They start with a dot, which no volume
 * name can, so listing skips them and they never clash with a volume.
 */
import { randomBytes } from 'node:crypto';

/** Where a volume is built before it is renamed into place (so it appears complete or not at all). */
export function buildingName(name: string): string {
  return `.tmp-${name}-${randomBytes(6).toString('hex')}`;
}

/** Where a directory volume goes to be deleted (so its name is free at once). */
export function trashName(name: string): string {
  return `.trash-${name}-${randomBytes(6).toString('hex')}`;
}

/** Whether an entry of the pool's root is a leftover of an interrupted create or destroy. */
export function isLeftover(entry: string): boolean {
  return entry.startsWith('.tmp-') || entry.startsWith('.trash-');
}
