/**
 * Folders of a bucket listing. The objects route lists keys under a prefix (no
 * delimiter), so the console groups one page of keys itself: a key with a `/` after the
 * prefix belongs to a folder (`prefix` + up to that `/`), the rest are files here.
 */
import type { ObjectEntry } from '../../contracts/buckets.js';

export interface Listing {
  folders: string[];
  files: ObjectEntry[];
}

export function groupByFolder(prefix: string, objects: ObjectEntry[]): Listing {
  const folders = new Set<string>();
  const files: ObjectEntry[] = [];
  for (const o of objects) {
    const rest = o.key.slice(prefix.length);
    const slash = rest.indexOf('/');
    if (slash >= 0) folders.add(prefix + rest.slice(0, slash + 1));
    else files.push(o);
  }
  return { folders: [...folders].sort(), files };
}

/** The folders above a prefix, for the breadcrumb: `a/b/` → [`a/`, `a/b/`]. */
export function parentsOf(prefix: string): string[] {
  const parts = prefix.split('/').filter((p) => p.length > 0);
  return parts.map((_, i) => `${parts.slice(0, i + 1).join('/')}/`);
}
